"""Gradient-space (Dirac) canaries for the one-run audit of a dpkit.torch run (white box)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded
from dpkit.torch import GradientCanaries, make_private

D, CLASSES, M = 100, 10, 100


@pytest.fixture(scope="module")
def data() -> TensorDataset:
    gen = np.random.default_rng(0)
    x = torch.tensor(gen.standard_normal((200, D)), dtype=torch.float32)
    y = torch.tensor(gen.integers(0, CLASSES, 200))
    return TensorDataset(x, y)


def _run(data: TensorDataset, *, broken: bool, sampling: str = "poisson"):
    torch.manual_seed(0)
    model = nn.Linear(D, CLASSES)
    run = make_private(
        model, torch.optim.SGD(model.parameters(), lr=2.0), data, n_samples=250,
        batch_size=125, epochs=4, max_grad_norm=1.0, delta=1e-5, noise_multiplier=4.0,
        sampling=sampling, rng=seeded(3),
    )  # fmt: skip
    # 250 = 200 examples + half of the 100 canaries (declared: the coins are secret)
    if broken:  # the bug being caught: noise 1000 times too small (clipping intact)
        run.optimizer.plan = dataclasses.replace(run.plan, sigma=run.plan.sigma * 1e-3)
    return run


@pytest.mark.parametrize("broken", [False, True])
def test_dirac_canaries_bound_an_honest_run_and_catch_a_broken_one(data, broken):
    run = _run(data, broken=broken)
    canaries = GradientCanaries(run, count=M, rng=seeded(5))
    run.fit(nn.CrossEntropyLoss(reduction="none"))
    claimed = run.epsilon()
    assert 1.0 < claimed < 2.0  # 8 steps at q = 1/2, z = 4: ε ≈ 1.4 at δ = 1e-5
    for observe in ("steps", "final"):
        r = canaries.audit(guess_in=15, guess_out=15, delta=1e-5, observe=observe)
        if broken:
            # included canaries add C per sampled step (q·T = 4 in expectation) against noise of
            # σ/1000 and the data's own gradient on the coordinate; an included canary sampled in
            # none of the 8 steps (probability 2⁻⁸ each, ~50 included) looks excluded, so a
            # guess may miss: the bound must still exceed the claim (29 of 30 gives ε ≥ 1.74)
            assert r.correct >= 29 and r.exceeds(claimed), str(r)
        else:
            assert r.epsilon <= claimed, str(r)
    # with plain SGD at a fixed rate, the final model is the steps' sum scaled by −lr/B
    assert np.allclose(
        canaries.scores("final"),
        canaries.scores("steps") * 2.0 / run.plan.expected_batch_size,
        rtol=1e-4,
        atol=1e-5,
    )


def test_canaries_are_refused_where_the_audit_would_not_hold(data):
    with pytest.raises(PrivacyParameterError, match="poisson"):
        GradientCanaries(_run(data, broken=False, sampling="shuffle"), count=10, rng=seeded(0))
    run = _run(data, broken=False)
    with pytest.raises(PrivacyParameterError, match="coordinates"):
        GradientCanaries(run, count=3, coordinates=[1, 1, 2], rng=seeded(0))
    with pytest.raises(PrivacyParameterError, match="count"):
        GradientCanaries(run, count=D * CLASSES + CLASSES + 1, rng=seeded(0))
    canaries = GradientCanaries(run, count=10, coordinates=np.arange(10), rng=seeded(0))
    with pytest.raises(PrivacyParameterError, match="no step"):
        canaries.audit(guess_in=1, guess_out=1, delta=1e-5)
    with pytest.raises(PrivacyParameterError, match="once"):
        GradientCanaries(run, count=10, rng=seeded(0))
