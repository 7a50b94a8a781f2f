"""Zero-concentrated budgets for statistics: ``rho=`` releases paid in ρ, exactly, end to end.

The audit: ρ-zCDP implies (ε(ρ, δ), δ)-DP (Canonne, Kamath and Steinke 2020); an empirical lower
bound at δ = 1e-3 from 20 000 runs per neighbour must not exceed that ε (a bound above the claim
at 95% confidence would refute it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit.stats as st
from dpkit import plan
from dpkit.accounting import ZCDP, Accountant, ApproxDP, zcdp_epsilon
from dpkit.audit import epsilon_lower_bound
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.noise import discrete_gaussian
from dpkit.stats._noisy import Part
from dpkit.stats._noisy import plan as noise_plan

X = np.linspace(0.0, 10.0, 101)


def test_count_sum_mean_histogram_are_paid_in_rho_exactly() -> None:
    acct = Accountant(ZCDP(rho=1.0))
    st.count(X, rho=0.25, accountant=acct)
    st.sum(X, bounds=(0, 10), rho=0.25, accountant=acct)
    st.mean(X, bounds=(0, 10), rho=0.25, accountant=acct)  # two parts, 0.25 in all
    r = st.histogram(X, bins=[0, 5, 10], rho=0.25, accountant=acct)
    assert acct.spent.rho <= 1.0  # type: ignore[attr-defined]
    assert acct.spent.rho > 1.0 - 1e-6  # type: ignore[attr-defined]  # (σ rounded up to sample)
    assert "rho=0.25" in repr(r)
    with pytest.raises(BudgetExceededError):
        st.count(X, rho=1e-3, accountant=acct)


def test_rho_releases_fit_an_approx_budget_too() -> None:
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6), method="zcdp")
    for _ in range(3):
        st.count(X, rho=0.005, accountant=acct)
    assert acct.spent.epsilon < 1.0  # type: ignore[attr-defined]


def test_rho_accuracy_is_the_released_interval() -> None:
    for stat, kw in (("count", {}), ("sum", {"bounds": (0, 10)}), ("histogram", {})):
        h = st.accuracy(stat, rho=0.05, **kw)
        if stat == "histogram":
            r = st.histogram(X, bins=[0, 5, 10], rho=0.05)
            assert np.allclose(r.ci()[1] - r.value, h)
        else:
            r = getattr(st, stat)(X, rho=0.05, **kw)
            lo, hi = r.ci()
            assert math.isclose((hi - lo) / 2, h, rel_tol=1e-12)
    rho = plan.rho_for("sum", bounds=(0, 10), half_width=50.0)
    assert st.accuracy("sum", bounds=(0, 10), rho=rho) <= 50.0
    assert st.accuracy("sum", bounds=(0, 10), rho=rho * (1 - 1e-3)) > 50.0


def test_mixed_or_bad_budgets_are_refused_before_anything() -> None:
    for kw in ({"rho": 0.1, "epsilon": 1.0}, {"rho": 0.1, "delta": 1e-6}, {"rho": -1.0}, {}):
        with pytest.raises(PrivacyParameterError):
            st.count(X, **kw)  # type: ignore[arg-type]


def test_audit_of_the_rho_count_stays_below_its_claim() -> None:
    rho, delta = 0.5, 1e-3
    pl = noise_plan([Part("count", 0, 1)], epsilon=0.0, delta=0.0, rho=rho)
    sigma = pl.parts[0].scale

    def mech(d: int, n: int, rng: object) -> np.ndarray:
        return d + np.asarray(discrete_gaussian(sigma, size=n, rng=rng), dtype=float)

    claim = zcdp_epsilon(rho, delta)
    got = epsilon_lower_bound(mech, 100, 101, trials=20_000, delta=delta, rng=3).epsilon
    assert 0.3 * claim < got <= claim  # the audit has power, and finds no violation
