"""accuracy(alpha) of the additive mechanisms: public, and the coverage of many releases.

Each check draws 4000 coordinates of one vector release (independent noise per coordinate, the
per-coordinate guarantee ``accuracy`` states). With alpha = 0.1 the share of coordinates within
the half-width is at least 0.9 and, since the half-width is the smallest integer quantile, at most
0.9 plus the probability of the last integer included; the band allows ±4 binomial standard
deviations (sd = √(0.09/4000) ≈ 0.0047), a false failure about once in 16 000 runs at a fixed seed
that never changes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting import ZCDP, Accountant
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace
from dpkit.random import seeded

N = 4000
ALPHA = 0.1
BAND = 4 * math.sqrt(ALPHA * (1 - ALPHA) / N)


def _coverage(mech, zero):
    out = np.asarray(mech.release(zero, rng=seeded(11)), dtype=np.float64)
    return float(np.mean(np.abs(out - zero) <= mech.accuracy(ALPHA)))


@pytest.mark.parametrize(
    "mech",
    [
        Laplace(epsilon=0.5, sensitivity=1.0, shape=N),
        Laplace(epsilon=2.0, sensitivity=3.0, shape=N),
        Gaussian(epsilon=1.0, delta=1e-6, shape=N),
        Gaussian(rho=0.05, sensitivity=2.0, shape=N),
        Geometric(epsilon=0.3, shape=N),
        DiscreteGaussian(rho=0.02, shape=N),
    ],
    ids=["laplace", "laplace-wide", "gaussian", "gaussian-rho", "geometric", "dgauss-rho"],
)
def test_accuracy_covers_like_the_releases(mech):
    zero = np.zeros(N, dtype=np.int64 if isinstance(mech, Geometric | DiscreteGaussian) else float)
    cov = _coverage(mech, zero)
    assert 1 - ALPHA - BAND <= cov <= 1 - ALPHA + 0.02 + BAND
    assert mech.accuracy(ALPHA) == mech.ci(ALPHA)


def test_accuracy_is_public_and_validated():
    lap = Laplace(epsilon=1.0)
    assert lap.accuracy() == lap.ci(0.05)
    with pytest.raises(PrivacyParameterError):
        lap.accuracy(1.5)


def test_gaussian_rho_is_paid_in_rho_without_conversion():
    g = Gaussian(rho=0.125)
    assert g.epsilon is None and g.delta is None
    acct = Accountant(ZCDP(rho=1.0))
    for _ in range(8):
        g.release(1.0, accountant=acct)
    assert acct.spent.rho <= 1.0  # eight charges of (at most) 0.125 fit exactly
    with pytest.raises(BudgetExceededError):
        g.release(1.0, accountant=acct)
    assert math.isclose(g.sigma, 2.0, rel_tol=1e-6)  # σ = Δ/√(2ρ), up to the output grid


def test_gaussian_rho_refuses_mixed_budgets():
    with pytest.raises(PrivacyParameterError):
        Gaussian(rho=0.1, epsilon=1.0, delta=1e-6)
    with pytest.raises(PrivacyParameterError):
        Gaussian(epsilon=1.0)
    with pytest.raises(PrivacyParameterError):
        Gaussian(rho=-1.0)
