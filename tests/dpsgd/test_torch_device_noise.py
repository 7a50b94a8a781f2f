"""dpkit.torch's on-device noise: ChaCha20 (RFC 8439 vectors), exact uniform integers, the exact
discrete Gaussian (chi-square against its pmf), the grid arithmetic of dpkit.noise, the pool.

The CUDA tests run only where a GPU is present; every other test runs on CPU torch.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scipy import stats  # noqa: E402

from dpkit.errors import PrivacyParameterError  # noqa: E402
from dpkit.noise._discrete import sample_discrete_gaussian  # noqa: E402
from dpkit.noise._float_safe import _add_on_grid  # noqa: E402
from dpkit.random import secure_generator, seeded  # noqa: E402
from dpkit.torch._chacha import ChaChaStream, chacha20_blocks, key_words  # noqa: E402
from dpkit.torch._device_noise import DeviceGaussian, ExactSampler, add_on_grid  # noqa: E402

CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="no GPU"))]
RFC_KEY = bytes(range(32))

# RFC 8439 §2.3.2: the block for counter 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00
BLOCK_232 = """e4e7f110 15593bd1 1fdd0f50 c47120a3 c7f4d1c7 0368c033 9aaa2204 4e6cd4c3
466482d2 09aa9f07 05d7c214 a2028bd9 d19c12b5 b94e16de e883d0cb 4e3c50a2"""
# RFC 8439 §2.4.2: encryption of the "sunscreen" text from counter 1, nonce 00…4a:00:00:00:00
PLAIN_242 = (
    b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
    b"future, sunscreen would be it."
)
CIPHER_242 = bytes.fromhex(
    "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b"
    "f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8"
    "07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736"
    "5af90bbf74a35be6b40b8eedf2785e42874d"
)


def _serialise(words: torch.Tensor) -> bytes:
    return b"".join(int(w).to_bytes(4, "little") for w in words.reshape(-1).tolist())


@pytest.mark.parametrize("device", DEVICES)
def test_rfc8439_block_function(device: str) -> None:
    counters = torch.tensor([1], dtype=torch.int64, device=device)
    out = chacha20_blocks(key_words(RFC_KEY), counters, (0x09000000, 0x4A000000, 0))
    assert out.device.type == device
    assert [f"{w:08x}" for w in out[0].tolist()] == BLOCK_232.split()


@pytest.mark.parametrize("device", DEVICES)
def test_rfc8439_keystream_encrypts_the_sunscreen_text(device: str) -> None:
    counters = torch.tensor([1, 2], dtype=torch.int64, device=device)
    stream = _serialise(chacha20_blocks(key_words(RFC_KEY), counters, (0, 0x4A000000, 0)))
    assert bytes(p ^ k for p, k in zip(PLAIN_242, stream, strict=False)) == CIPHER_242


def test_stream_layout_is_a_64_bit_counter_then_the_stream_id() -> None:
    # words 12–13: block counter 7, 8; words 14–15: stream id 5·2**32 (ChaCha20 keystream of
    # RFC 8439 with counter 7 and nonce 00:00:00:00:00:00:00:00:05:00:00:00, computed
    # independently)
    s = ChaChaStream(RFC_KEY, "cpu", stream=5 << 32, chunk=3)
    s.counter = 7
    first = s.words(20)
    assert _serialise(torch.cat((first, s.words(12)))).hex() == (
        "c8e7aad54a3fa8f0a196b82e26ab15d667909e90a56c4d2b144beaf8e6bcf416"
        "4d8ee58ca582dc65207fdd93ad9b28f0fd03a98a81c8d0d8a2728ff949db59db"
        "06419a19b523886a424968807117c574bdb1b62f2634d987ae682b87e292d1cd"
        "148f5dffa5700a32e611599f7d2e7d5c5440fa25c73c43a1247f32d8d61eac7f"
    )
    # each word once: what follows is block 9's word 0 (the buffer holds the rest of block 9)
    following = s.words(1)
    t = ChaChaStream(RFC_KEY, "cpu", stream=5 << 32, chunk=1)
    t.counter = 9
    assert torch.equal(following, t.words(1))


def test_bad_keys_are_refused() -> None:
    with pytest.raises(PrivacyParameterError):
        ChaChaStream(b"short", "cpu")


@pytest.mark.parametrize("high", [6, 3 * 2**30 + 1, 2**40 + 3])
def test_bounded_integers_are_uniform(high: int) -> None:
    # 60k draws in 6 equal-probability classes (value · 6 // high): chi-square at the 1e-3 level
    # with a fixed key (deterministic: it fails only if the draw is biased). Reducing 32-bit
    # words modulo 3·2**30 + 1 without rejection would double the mass of the lowest third.
    sampler = ExactSampler(ChaChaStream(bytes(32), "cpu"))
    x = sampler.below(high, 60_000)
    assert int(x.min()) >= 0 and int(x.max()) < high
    classes = np.bincount((x.numpy().astype(object) * 6 // high).astype(np.int64), minlength=6)
    assert stats.chisquare(classes).pvalue > 1e-3


def _dgauss_pmf(a: int, b: int, ks: np.ndarray) -> np.ndarray:
    sigma2 = (a / b) ** 2
    support = np.arange(-60 * math.ceil(a / b) - 10, 60 * math.ceil(a / b) + 11)
    norm = np.exp(-(support.astype(float) ** 2) / (2 * sigma2)).sum()
    return np.exp(-(ks.astype(float) ** 2) / (2 * sigma2)) / norm


@pytest.mark.parametrize(("sigma", "grid"), [(3.0, 0), (0.75, -1), (0.4, 0)])
def test_device_gaussian_matches_the_exact_pmf(sigma: float, grid: int) -> None:
    # σ in grid units 3, 3/2 (a/b with b = 2: the floor division by b) and 2/5; 40k samples,
    # cells |k| ≤ 3σ one by one and the two tails pooled; p > 1e-3 with a fixed key
    noise = DeviceGaussian(sigma, grid, gen=seeded(11), device="cpu")
    a, b = noise.a, noise.b
    z = noise.sample(40_000).numpy()
    top = max(1, int(3 * a / b))
    ks = np.arange(-top, top + 1)
    p = _dgauss_pmf(a, b, ks)
    observed = np.array([(z == k).sum() for k in ks] + [(np.abs(z) > top).sum()])
    expected = np.append(p, 1 - p.sum()) * z.size
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_device_gaussian_on_the_training_grid() -> None:
    # the σ and grid a training plan uses (σ ≈ 2^24 grid units): 20k samples in 20 cells of equal
    # continuous-normal probability (the discrete Gaussian's cdf differs from it by far less than
    # 2^-20 at this σ); plus the same test for dpkit.noise's sampler on the same (σ, grid)
    sigma, grid = 1.2500001, -24
    noise = DeviceGaussian(sigma, grid, gen=seeded(12), device="cpu")
    s = noise.a / noise.b
    edges = stats.norm.ppf(np.linspace(0, 1, 21)[1:-1]) * s
    for z in (
        noise.sample(20_000).numpy(),
        sample_discrete_gaussian(noise.a, noise.b, 20_000, seeded(12)),
    ):
        counts = np.bincount(np.searchsorted(edges, z), minlength=20)
        assert stats.chisquare(counts).pvalue > 1e-3
        assert abs(z.std() / s - 1) < 0.02  # 3.5 standard errors of a sample sd


def test_grid_arithmetic_is_dpkit_noise_s() -> None:
    gen = np.random.default_rng(0)
    x = gen.standard_normal(4000) * np.logspace(-30, 300, 4000)
    x[:8] = [0.5, 1.5, 2.5, -0.5, 2.0**60, -(2.0**80), 1e308, 2.0**-1070]
    z = gen.integers(-(2**40), 2**40, size=x.size)
    for grid in (-24, 0, 3, -1060):
        ours = add_on_grid(torch.from_numpy(x), torch.from_numpy(z), grid).numpy()
        theirs = _add_on_grid(x.copy(), z, grid)
        assert np.array_equal(ours, theirs)


def test_key_comes_from_the_given_generator_never_torchs() -> None:
    a = DeviceGaussian(1.0, -24, gen=seeded(5), device="cpu").sample(64)
    b = DeviceGaussian(1.0, -24, gen=seeded(5), device="cpu").sample(64)
    assert torch.equal(a, b)  # a seeded run is reproducible
    torch.manual_seed(0)
    c = DeviceGaussian(1.0, -24, gen=np.random.Generator(np.random.PCG64()), device="cpu")
    torch.manual_seed(0)
    d = DeviceGaussian(1.0, -24, gen=np.random.Generator(np.random.PCG64()), device="cpu")
    assert not torch.equal(c.sample(64), d.sample(64))  # torch's seed does not decide the noise


def test_pool_hands_out_each_sample_once_and_is_dropped_on_clear() -> None:
    noise = DeviceGaussian(1.0, -24, gen=seeded(6), device="cpu", ahead=4)
    first = noise.take(1000)
    assert noise._pool.numel() == 3000
    second = noise.take(1000)
    assert noise._pool.numel() == 2000 and not torch.equal(first, second)
    noise.clear()
    assert noise._pool.numel() == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_forked_child_draws_other_noise() -> None:
    noise = DeviceGaussian(1.0, -24, gen=secure_generator(), device="cpu", ahead=1)
    before = noise.take(8)
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns of fork() in a threaded process; the
        warnings.simplefilter("ignore", DeprecationWarning)  # child only writes and exits
        pid = os.fork()
    if pid == 0:  # the child runs no torch op (it could wait forever on the parent's threads)
        os.write(write, bytes([noise._forked, len(noise._pool)]))
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 2) == bytes([1, 0])  # marked for a new key; the pool is the parent's
    assert not noise._forked  # the parent keeps its stream
    # what the child does at its first draw: a new key from the OS, the pool dropped
    old = noise._sampler
    noise._forked = True
    after = noise.take(8)
    assert noise._sampler is not old and not noise._forked and not torch.equal(before, after)


def test_sigma_the_int64_sampler_cannot_hold_is_refused_up_front() -> None:
    with pytest.raises(PrivacyParameterError):
        DeviceGaussian(1.0, -40, gen=seeded(0), device="cpu")  # σ = 2^40 grid units


@pytest.mark.skipif(not CUDA, reason="no GPU")
def test_cuda_noise_is_the_cpu_noise() -> None:
    # the same key gives the same words and the same decisions: equal in distribution (and in
    # value) to the CPU torch sampler, whose distribution the tests above check
    cpu = DeviceGaussian(1.5, 0, gen=seeded(21), device="cpu").sample(30_000)
    gpu = DeviceGaussian(1.5, 0, gen=seeded(21), device="cuda").sample(30_000)
    assert gpu.device.type == "cuda"
    assert torch.equal(cpu, gpu.cpu())
    big = DeviceGaussian(1.0, -24, gen=seeded(22), device="cuda").sample(200_000)
    s = big.double().std().item() / 2**24  # σ = 2**24 grid units
    assert abs(s - 1) < 0.01  # 6 standard errors of a sample sd at n = 200k


def _learns(device: str, noise: str) -> tuple[float, object]:
    from torch import nn
    from torch.utils.data import TensorDataset

    from dpkit.torch import make_private

    torch.manual_seed(0)
    x = torch.randn(600, 5)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 2)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    data = TensorDataset(x.to(device), y.to(device))
    run = make_private(
        model, opt, data, n_samples=600, batch_size=100, epochs=6, max_grad_norm=1.0,
        delta=1e-5, noise_multiplier=0.8, rng=seeded(4), noise=noise,
    )  # fmt: skip
    run.fit(nn.CrossEntropyLoss(reduction="none"))
    for p in model.parameters():
        assert p.device.type == device and p.grad is not None and p.grad.device.type == device
    with torch.no_grad():
        acc = float((model(x.to(device)).argmax(1) == y.to(device)).float().mean())
    return acc, run


def test_training_with_device_noise_on_cpu_learns_and_drops_the_pool_on_load() -> None:
    acc, run = _learns("cpu", "device")
    assert acc > 0.85  # 36 noisy steps on an easy linear rule (a constant guess: about 0.5)
    opt = run.optimizer  # type: ignore[attr-defined]
    assert opt.noise == "device" and opt._device_noise._pool.numel() > 0
    opt.load_state_dict(opt.state_dict())
    assert opt._device_noise._pool.numel() == 0


def test_noise_choice_is_checked() -> None:
    with pytest.raises(PrivacyParameterError, match="noise must be"):
        _learns("cpu", "gpu")


@pytest.mark.skipif(not CUDA, reason="no GPU")
def test_training_on_cuda_learns_with_noise_made_on_the_device() -> None:
    acc, run = _learns("cuda", "auto")
    assert run.optimizer.noise == "device"  # type: ignore[attr-defined]
    assert acc > 0.85
