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
