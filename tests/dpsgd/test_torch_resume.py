"""Resuming a run from a checkpoint continues its randomness: no noise or batch is drawn twice."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded
from dpkit.torch import make_private

LOSS = nn.CrossEntropyLoss(reduction="none")


def _run(seed: int | None, *, noise: str = "numpy", sampling: str = "poisson"):
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    y = (x[:, 0] > 0).long()
    model = nn.Linear(6, 2)
    run = make_private(
        model, torch.optim.SGD(model.parameters(), lr=0.5), TensorDataset(x, y), n_samples=64,
        batch_size=16, epochs=2, max_grad_norm=1.0, delta=1e-5, noise_multiplier=1.0,
        sampling=sampling, rng=None if seed is None else seeded(seed), noise=noise,
    )  # fmt: skip
    return model, run


def _steps(run, k: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """k steps by hand: each step's batch indices and its noise (noisy gradient − clean one)."""
    opt, batches, noises = run.optimizer, [], []
    while k:
        for batch in run.loader:
            batches.append(batch.indices.ravel().copy())
            opt.zero_grad()
            for xb, yb in batch:
                opt.backward(LOSS(run.model(xb), yb))
            clean = torch.cat([s.reshape(-1) for s in opt.clipper.sums]).double()
            clean /= run.plan.expected_batch_size
            opt.step()
            noisy = torch.cat([p.grad.reshape(-1) for p in opt.clipper.params]).double()
            noises.append((noisy - clean).numpy())
            k -= 1
            if k == 0:
                break
    return batches, noises


def _checkpoint(model, run) -> dict:
    """Model and optimizer state through torch.save / torch.load (weights only, the default)."""
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": run.optimizer.state_dict()}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def _resumed(state, **kw):
    model, run = _run(**kw)
    model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["opt"])
    return run


def test_seeded_run_resumed_continues_its_stream_exactly():
    # numpy noise: the resumed run is the uninterrupted one, step for step and bit for bit
    _, whole = _run(7)
    batches, noises = _steps(whole, 5)
    model, first = _run(7)
    _steps(first, 2)
    later_batches, later_noises = _steps(_resumed(_checkpoint(model, first), seed=7), 3)
    for got, want in zip(later_batches, batches[2:], strict=True):
        assert np.array_equal(got, want)
    for got, want in zip(later_noises, noises[2:], strict=True):
        assert np.array_equal(got, want)


def test_seeded_run_resumed_never_replays_device_noise():
    # the device stream is keyed from the seed again; the checkpoint's block counter moves it
    # past every block made before (the pool drawn then is dropped, not replayed)
    model, first = _run(3, noise="device")
    _, before = _steps(first, 3)
    run = _resumed(_checkpoint(model, first), seed=3, noise="device")
    _, after = _steps(run, 3)
    scale = first.plan.sigma / first.plan.expected_batch_size  # the noise's standard deviation
    for a in after:
        for b in before:  # independent draws differ by about σ√2 per coordinate
            assert np.abs(a - b).max() > 0.1 * scale
    assert run.optimizer._device_noise.counter > first.optimizer._device_noise.counter


def test_seeded_checkpoint_without_the_stream_is_refused():
    model, first = _run(5)
    _steps(first, 1)
    state = _checkpoint(model, first)
    del state["opt"]["rng"]
    with pytest.raises(PrivacyParameterError, match="first steps"):
        _resumed(state, seed=5)
    _resumed(state, seed=None)  # a secure resumed run draws afresh: nothing to replay


def test_shuffled_run_resumed_mid_epoch_keeps_the_epoch_permutation():
    # accounted as one Gaussian per epoch: each example in at most one step of an epoch, also
    # across a resume (secure randomness: the checkpoint carries the permutation, not the key)
    _, run = _run(None, sampling="shuffle")
    model = run.model
    first, _ = _steps(run, 2)
    rest, _ = _steps(_resumed(_checkpoint(model, run), seed=None, sampling="shuffle"), 2)
    epoch = np.concatenate(first + rest)
    assert len(epoch) == 64 and len(np.unique(epoch)) == 64
