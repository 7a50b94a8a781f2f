"""Fixed-size batches (without replacement) accounted as what they are, never as Poisson."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm
from torch import nn
from torch.utils.data import TensorDataset

from dpkit.accounting import (
    Accountant,
    ApproxDP,
    GaussianEvent,
    LaplaceEvent,
    PoissonSubsampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    compose,
    epsilon_of,
)
from dpkit.accounting._gaussian import gaussian_delta
from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded
from dpkit.torch import make_private, plan_training


def _event(sigma: float, b: int, n: int) -> SampledWithoutReplacementEvent:
    # clip C = 1: replacing one example moves a batch's sum by at most 2
    return SampledWithoutReplacementEvent(
        GaussianEvent(sigma=sigma, sensitivity=2.0), sample_size=b, population_size=n
    )


@pytest.mark.parametrize(("sigma", "b", "n"), [(2.0, 50, 1000), (1.0, 200, 1000), (5.0, 10, 10)])
def test_one_step_is_the_closed_form_of_balle_barthe_gaboardi(sigma, b, n):
    # Theorem 10 with the exact Gaussian curve (Balle & Wang 2018):
    # δ'(ε') = γ·δ_G(log(1 + (e^ε' − 1)/γ)) at μ = 2C/σ, for ε' ≥ 0
    g = b / n
    c = compose(_event(sigma, b, n), method="pld")
    for eps in (0.05, 0.3, 1.0, 2.0):
        exact = g * gaussian_delta(math.log1p(math.expm1(eps) / g), 2.0 / sigma)
        assert exact <= c.delta(eps) <= exact * (1 + 1e-6) + 1e-15


def test_composition_matches_a_monte_carlo_of_the_symmetric_pair_and_exceeds_poisson():
    # Independent computation: k steps' privacy loss is a sum of k draws from the symmetric
    # pair (positive losses of ((1−γ)N(0,1) + γN(μ,1), N(0,1)), mirrored with weight e^{−l},
    # the rest at 0); δ(ε) = E[(1 − e^{ε − L})₊]. Sampled directly, not through the PLD grid.
    sigma, g, k, n = 1.0, 0.2, 10, 60_000
    mu = 2.0 / sigma
    rng = np.random.default_rng(0)

    def loss(x: np.ndarray) -> np.ndarray:
        return np.log1p(g * np.expm1(mu * x - mu * mu / 2))

    a = (1 - g) * norm.cdf(-mu / 2) + g * norm.cdf(mu / 2)  # P-mass of loss > 0
    b = norm.cdf(-mu / 2)  # Q-mass of loss > 0 (loss > 0 ⟺ x > μ/2)
    total = np.zeros(n)
    for _ in range(k):
        x = np.where(rng.random(n) < g, rng.normal(mu, 1, n), rng.normal(0, 1, n))
        y = -norm.ppf(rng.random(n) * b)  # N(0,1) given x > μ/2
        lx, ly = loss(x), loss(y)
        total += np.where(lx > 0, lx, np.where(rng.random(n) < b / (1 - a), -ly, 0.0))
    pld = compose(SelfComposedEvent(_event(sigma, 200, 1000), count=k), method="pld")
    naive = compose(
        SelfComposedEvent(
            PoissonSubsampledEvent(GaussianEvent(sigma=sigma, sensitivity=2.0), sampling_rate=g),
            count=k,
        ),
        method="pld",
    )
    for eps in (1.0, 2.0, 3.0):
        v = np.maximum(0.0, -np.expm1(eps - total))
        mc, se = float(v.mean()), float(v.std()) / math.sqrt(n)
        assert abs(pld.delta(eps) - mc) < 5 * se + 1e-4
        # composing each ordered pair alone (as for Poisson add/remove) would understate δ
        assert naive.delta(eps) < mc - 20 * se


def test_pure_inner_event_amplifies_as_theorem_10():
    e = SampledWithoutReplacementEvent(LaplaceEvent(scale=1.0), sample_size=1, population_size=4)
    assert epsilon_of(e) == pytest.approx(math.log1p(0.25 * math.expm1(1.0)))


def test_event_validation():
    with pytest.raises(PrivacyParameterError):
        SampledWithoutReplacementEvent(GaussianEvent(sigma=1.0), sample_size=5, population_size=4)
    with pytest.raises(PrivacyParameterError):
        SampledWithoutReplacementEvent(GaussianEvent(sigma=1.0), sample_size=0, population_size=4)


def test_plan_accounts_fixed_batches_by_pld_only():
    kw = {"n_samples": 1000, "batch_size": 50, "epochs": 10, "max_grad_norm": 1.0}
    p = plan_training(**kw, dimension=100, delta=1e-5, noise_multiplier=2.0, sampling="fixed")
    assert p.steps == 200
    assert isinstance(p.step_event(), SampledWithoutReplacementEvent)
    assert p.step_event().event.sensitivity == pytest.approx(2 * p.sensitivity)
    eps = p.epsilon()
    assert eps == pytest.approx(5.411, abs=5e-3)  # Δ just above C: σ/Δ just below 2
    # dp_accounting 0.6.0, RdpAccountant(REPLACE_ONE) on SampledWithoutReplacementDpEvent(1000,
    # 50, GaussianDpEvent(1.0)) × 200 (the Rényi bound of Wang, Balle & Kasiviswanathan 2019):
    # ε = 9.279 at 1e-5. An upper bound too: the exact dominating pair must be below it, and
    # above the Poisson add/remove run of the same noise (half the sensitivity).
    poisson = epsilon_of(
        SelfComposedEvent(
            PoissonSubsampledEvent(GaussianEvent(sigma=2.0), sampling_rate=0.05), count=200
        ),
        delta=1e-5,
        method="rdp",
    )
    assert poisson < eps < 9.279
    assert p.epsilon_after(10) < p.epsilon()
    with pytest.raises(PrivacyParameterError, match="PLD only"):
        plan_training(
            **kw, dimension=100, delta=1e-5, noise_multiplier=2.0, sampling="fixed",
            accounting="rdp",
        )  # fmt: skip


def _data(n: int) -> TensorDataset:
    gen = np.random.default_rng(0)
    x = torch.tensor(gen.standard_normal((n, 5)), dtype=torch.float32)
    return TensorDataset(x, torch.tensor(gen.integers(0, 2, n)))


def test_fixed_batches_hold_exactly_batch_size_distinct_examples_and_train():
    torch.manual_seed(0)
    model = nn.Linear(5, 2)
    run = make_private(
        model, torch.optim.SGD(model.parameters(), lr=0.5), _data(120), n_samples=120,
        batch_size=30, physical_batch_size=16, epochs=1, max_grad_norm=1.0, delta=1e-5,
        noise_multiplier=1.0, sampling="fixed", rng=seeded(4),
    )  # fmt: skip
    assert run.plan.expected_batch_size == 30
    seen = []
    for batch in run.loader:
        assert len(batch.indices) == 30 and len(np.unique(batch.indices)) == 30
        seen.append(batch.indices.ravel())
        run.optimizer.zero_grad()
        for x, y in batch:
            run.optimizer.backward(nn.functional.cross_entropy(model(x), y, reduction="none"))
        run.optimizer.step()
    assert len(seen) == run.plan.steps == 4
    assert not all(np.array_equal(seen[0], s) for s in seen[1:])  # a fresh draw each step
    assert run.epsilon() == pytest.approx(run.plan.epsilon())


def test_fixed_batches_refuse_data_of_another_size():
    model = nn.Linear(5, 2)
    with pytest.raises(PrivacyParameterError, match="exactly n_samples"):
        make_private(
            model, torch.optim.SGD(model.parameters(), lr=0.5), _data(119), n_samples=120,
            batch_size=30, epochs=1, max_grad_norm=1.0, delta=1e-5, noise_multiplier=1.0,
            sampling="fixed", rng=seeded(4),
        )  # fmt: skip
    assert not model._forward_hooks  # the refusal leaves the model unhooked


def test_a_fixed_run_and_a_poisson_run_are_not_summed_in_one_accountant():
    # replace-one and add/remove guarantees add up to neither: the second run is refused before
    # it is charged, and its model is left unhooked
    acct = Accountant(ApproxDP(epsilon=1000.0, delta=1e-3))
    kw = dict(
        n_samples=120, batch_size=30, epochs=1, max_grad_norm=1.0, delta=1e-5,
        noise_multiplier=1.0, accountant=acct, rng=seeded(4),
    )  # fmt: skip
    first = nn.Linear(5, 2)
    make_private(first, torch.optim.SGD(first.parameters(), lr=0.5), _data(120), **kw,
                 sampling="fixed")  # fmt: skip
    spent = acct.spent
    model = nn.Linear(5, 2)
    with pytest.raises(PrivacyParameterError, match="neighbouring relations"):
        make_private(model, torch.optim.SGD(model.parameters(), lr=0.5), _data(120), **kw,
                     sampling="poisson")  # fmt: skip
    assert acct.spent == spent and len(acct.ledger) == 1
    assert not model._forward_hooks
