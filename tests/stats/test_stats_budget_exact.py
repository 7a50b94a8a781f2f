"""A statistic calibrated to (ε, δ) fits an ApproxDP(ε, δ) budget exactly."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import BudgetExceededError


def test_mean_fits_its_own_budget_once() -> None:
    x = np.random.default_rng(0).uniform(0, 10, 1000)
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-5))
    m = dp.mean(x, bounds=(0, 10), epsilon=1.0, delta=1e-5, accountant=acct, rng=1)
    assert abs(float(m) - float(np.mean(x))) < 1.0
    assert acct.spent.epsilon <= 1.0 + 1e-12
    with pytest.raises(BudgetExceededError):
        dp.mean(x, bounds=(0, 10), epsilon=1.0, delta=1e-5, accountant=acct, rng=1)


def test_parts_charge_discrete_gaussians() -> None:
    from dpkit.accounting import ComposedEvent, DiscreteGaussianEvent, GaussianEvent, epsilon_of

    x = np.random.default_rng(1).uniform(0, 10, 1000)
    m = dp.mean(x, bounds=(0, 10), epsilon=1.0, delta=1e-5, rng=2)
    events = m.event.events if isinstance(m.event, ComposedEvent) else (m.event,)
    assert all(isinstance(e, DiscreteGaussianEvent) for e in events)
    assert not any(isinstance(e, GaussianEvent) for e in events)
    assert epsilon_of(m.event, delta=1e-5) <= 1.0
