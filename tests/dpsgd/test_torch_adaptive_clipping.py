"""Adaptive clipping (Andrew, Thakkar, McMahan & Ramaswamy 2021): quantile tracking, accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded
from dpkit.torch import make_private, plan_training
from dpkit.torch._clip import Clipper

KW = {"n_samples": 1000, "batch_size": 50, "epochs": 2, "max_grad_norm": 1.0, "dimension": 1000}
FAST = {**KW, "accounting": "rdp"}


@pytest.mark.parametrize(("z", "sigma_b"), [(1.0, 2.5), (0.8, 12.8), (3.0, 1.6)])
def test_count_noise_is_paid_from_the_declared_multiplier(z, sigma_b):
    # Andrew et al. (2021), Theorem 1: gradient multiplier (z⁻² − (2σ_b)⁻²)^(−1/2), and the sum
    # and the count together cost exactly the plain run of multiplier z
    plain = plan_training(**FAST, delta=1e-5, noise_multiplier=z)
    adaptive = plan_training(**FAST, delta=1e-5, noise_multiplier=z, count_noise=sigma_b)
    z_grad = (z**-2 - (2 * sigma_b) ** -2) ** -0.5
    assert adaptive.sigma / adaptive.sensitivity == pytest.approx(z_grad, rel=1e-6)
    assert adaptive.count_sigma == sigma_b
    assert adaptive.noise_multiplier == z
    assert adaptive.epsilon() == pytest.approx(plain.epsilon(), rel=1e-6)
    assert adaptive.epsilon() >= plain.epsilon() * (1 - 1e-9)  # rounded on the safe side


def test_target_epsilon_calibrates_the_total_multiplier():
    plain = plan_training(**FAST, delta=1e-5, target_epsilon=2.0)
    adaptive = plan_training(**FAST, delta=1e-5, target_epsilon=2.0, count_noise=2.5)
    assert adaptive.noise_multiplier == plain.noise_multiplier
    assert adaptive.epsilon() <= 2.0 + 1e-9


def test_count_noise_too_small_is_refused():
    with pytest.raises(PrivacyParameterError, match="count_noise"):
        plan_training(**KW, delta=1e-5, noise_multiplier=2.0, count_noise=0.9)
    model = nn.Linear(1, 1)
    with pytest.raises(PrivacyParameterError, match="target_quantile"):
        make_private(
            model, torch.optim.SGD(model.parameters(), lr=0.1), _regression(100)[0],
            n_samples=100, batch_size=10, epochs=1, max_grad_norm=1.0, delta=1e-5,
            noise_multiplier=1.0, clipping="adaptive", target_quantile=1.0,
        )  # fmt: skip
    assert not model._forward_hooks


def _regression(n: int) -> tuple[TensorDataset, np.ndarray]:
    gen = np.random.default_rng(0)
    x = torch.tensor(gen.standard_normal((n, 1)), dtype=torch.float32)
    y = torch.tensor(3 * gen.standard_normal((n, 1)), dtype=torch.float32)
    # with the weight held at 0, example i's gradient of (w·x − y)² has norm |2·y_i·x_i|
    return TensorDataset(x, y), (2 * y.abs() * x.abs()).ravel().numpy()


@pytest.mark.parametrize("quantile", [0.3, 0.7])
def test_clip_norm_converges_to_the_target_quantile(quantile):
    data, norms = _regression(1000)
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    run = make_private(
        model, torch.optim.SGD(model.parameters(), lr=0.0), data, n_samples=1000,
        batch_size=100, epochs=4, max_grad_norm=0.1, delta=1e-5, noise_multiplier=1.0,
        clipping="adaptive", target_quantile=quantile, clip_learning_rate=1.0, rng=seeded(1),
    )  # fmt: skip
    seen: list[float] = []
    run.fit(
        loss_fn=lambda m, b: ((m(b[0]) - b[1]) ** 2).ravel(),
        callback=lambda s: seen.append(run.optimizer.clipper.clip_norm),
    )
    assert seen[0] > 0.1  # every gradient was clipped: the norm grew
    late = float(np.mean(seen[-15:]))  # 40 steps from 0.1; the last 15 hover
    # the fraction of norms below the tracked value is the target, up to the count's noise
    # (σ_b = 5 on 100 examples: ±0.05 per step) and the geometric steps' jitter
    assert abs(float(np.mean(norms <= late)) - quantile) < 0.1


def test_rescaled_sum_is_the_sum_clipped_at_the_current_norm():
    torch.manual_seed(0)
    model = nn.Linear(3, 1, bias=False)
    x, y = torch.randn(8, 3) * 3, torch.randn(8, 1)
    clipper = Clipper(model, max_grad_norm=1.0, clipping="adaptive")
    clipper.clip_norm = 2.5
    clipper.accumulate(((model(x) - y) ** 2).ravel(), torch.ones(8, dtype=torch.bool))
    got = clipper.sums[0] * clipper.output_scale
    g = torch.stack(
        [torch.autograd.grad(((model(x[i]) - y[i]) ** 2).sum(), model.weight)[0] for i in range(8)]
    )
    norm = g.flatten(1).norm(dim=1)
    want = (g * (2.5 * (1 - 2**-16) / norm).clamp(max=1).reshape(-1, 1, 1)).sum(0)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    assert clipper.unclipped == float((norm <= 2.5).sum()) - 4  # Σ(b_i − ½)
    assert math.isclose(clipper.output_scale, 2.5)


def test_checkpoint_carries_the_clip_norm():
    data, _ = _regression(200)
    model = nn.Linear(1, 1)
    run = make_private(
        model, torch.optim.SGD(model.parameters(), lr=0.1), data, n_samples=200,
        batch_size=20, epochs=1, max_grad_norm=0.5, delta=1e-5, noise_multiplier=1.0,
        clipping="adaptive", rng=seeded(2),
    )  # fmt: skip
    run.fit(loss_fn=lambda m, b: ((m(b[0]) - b[1]) ** 2).ravel(), steps=3)
    state = run.optimizer.state_dict()
    assert state["clip_norm"] == run.optimizer.clipper.clip_norm != 0.5
    run.optimizer.clipper.clip_norm = 0.5
    run.optimizer.load_state_dict(state)
    assert run.optimizer.clipper.clip_norm == state["clip_norm"]
