"""The float-safe Gaussian charges the discrete Gaussian it adds, and fits its own budget."""

from __future__ import annotations

import pytest

from dpkit.accounting import Accountant, ApproxDP, DiscreteGaussianEvent, epsilon_of
from dpkit.errors import BudgetExceededError
from dpkit.mechanisms import Gaussian


def test_scalar_event_is_discrete_and_fits_exact_budget() -> None:
    g = Gaussian(epsilon=1.0, delta=1e-5)
    assert isinstance(g.event, DiscreteGaussianEvent)
    assert float(g.event.sensitivity).is_integer()
    assert 2**24 <= g.event.sigma < 2**25
    assert epsilon_of(g.event, delta=1e-5) <= 1.0
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-5))
    g.release(3.0, accountant=acct, rng=0)
    assert acct.ledger[-1].delta == 1e-5
    with pytest.raises(BudgetExceededError):
        g.release(3.0, accountant=acct, rng=0)


def test_sigma_only_goes_up_from_analytic() -> None:
    from dpkit.accounting import gaussian_sigma

    for eps, dlt, sens in [(1.0, 1e-5, 1.0), (0.1, 1e-8, 7.0), (4.0, 1e-3, 0.01)]:
        g = Gaussian(epsilon=eps, delta=dlt, sensitivity=sens)
        assert g.sigma >= gaussian_sigma(epsilon=eps, delta=dlt, sensitivity=sens)
        assert g.sigma == pytest.approx(
            gaussian_sigma(epsilon=eps, delta=dlt, sensitivity=sens),
            rel=1e-5,  # + one grid step (~σ·2^-24) in Δ
        )
        assert epsilon_of(g.event, delta=dlt) <= eps
