"""An (ε, δ) budget pays for an event calibrated exactly to it (the (ε(δ_i), δ_i) route)."""

from __future__ import annotations

import math

import pytest

from dpkit.accounting import (
    Accountant,
    ApproxDP,
    GaussianEvent,
    LaplaceEvent,
    epsilon_of,
    gaussian_sigma,
)
from dpkit.errors import BudgetExceededError, PrivacyParameterError


def _exact_gaussian(epsilon: float, delta: float) -> GaussianEvent:
    return GaussianEvent(sigma=gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0))


def test_gaussian_calibrated_to_the_budget_fits_once() -> None:
    ev = _exact_gaussian(1.0, 1e-5)
    assert epsilon_of(ev, delta=1e-5) <= 1.0 + 1e-12
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-5))
    acct.charge(ev, label="g")
    entry = acct.ledger[-1]
    assert entry.delta == 1e-5 and entry.rho == 0.0
    assert acct.spent.epsilon == pytest.approx(1.0, rel=1e-12)
    assert not acct.can_afford(ev)
    with pytest.raises(BudgetExceededError):
        acct.charge(ev)
    assert len(acct.ledger) == 1  # the refused charge recorded nothing


def test_the_hint_is_used() -> None:
    # Calibrated for δ = 5e-6 inside a 1e-5 budget: the hint is cheaper than all remaining δ
    # only in δ, and ε(5e-6) fits ε = 1 exactly; a second one fits with the other half.
    ev = _exact_gaussian(0.5, 5e-6)
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-5))
    acct.charge(ev, delta=5e-6)
    acct.charge(ev, delta=5e-6)
    assert acct.spent.epsilon <= 1.0 + 1e-12
    assert math.isclose(acct.remaining.delta, 0.0, abs_tol=1e-18)


def test_bad_hint_is_refused_and_nothing_charged() -> None:
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-5))
    with pytest.raises(PrivacyParameterError):
        acct.charge(GaussianEvent(sigma=10.0), delta=-1.0)
    assert acct.ledger == ()


def test_many_small_gaussians_use_zcdp_when_asked() -> None:
    # Same figure as the Accountant docstring: one zCDP filter, converted once.
    z = Accountant(ApproxDP(epsilon=1.0, delta=1e-6), method="zcdp")
    for _ in range(20):
        z.charge(GaussianEvent(sigma=25.0), delta=1e-6)
    assert round(z.spent.epsilon, 3) == 0.799
    assert all(e.rho > 0 and e.delta == 0 for e in z.ledger)


def test_pure_then_gaussian() -> None:
    acct = Accountant(ApproxDP(epsilon=2.0, delta=1e-5))
    acct.charge(LaplaceEvent(scale=1.0))  # ε = 1, pure
    acct.charge(_exact_gaussian(1.0, 1e-5), delta=1e-5)  # (1, 1e-5) by the curve
    assert acct.spent.epsilon == pytest.approx(2.0, rel=1e-12)
    assert not acct.can_afford(LaplaceEvent(scale=1e6))


def test_basic_pays_the_calibrated_delta_and_leaves_the_rest() -> None:
    # A Gaussian calibrated at (1, 1e-5) costs exactly that, leaving ε = 0.5 for a pure query.
    acct = Accountant(ApproxDP(epsilon=1.5, delta=1e-5))
    acct.charge(_exact_gaussian(1.0, 1e-5), delta=1e-5)
    assert acct.ledger[-1].delta == 1e-5 and acct.ledger[-1].epsilon <= 1.0
    acct.charge(LaplaceEvent(scale=2.0))
    assert acct.spent.epsilon <= 1.5 * (1 + 1e-12)
