"""histogram_density_accuracy: the coverage of every cell's noisy count in actual releases.

2000 cells (one 1-d release with 2000 bins, its raw noisy counts against the exact counts) at
alpha = 0.1 must lie within ±4 binomial sd (√(0.09/2000) ≈ 0.0067) of [0.9, 0.93] (the
half-width is the smallest integer quantile of the noise).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded
from dpkit.release import histogram_density, histogram_density_accuracy

ALPHA = 0.1
BINS = 2000


@pytest.mark.parametrize("kw", [{}, {"delta": 1e-6}])
def test_cell_counts_cover_like_the_release(kw) -> None:
    x = np.random.default_rng(0).uniform(0, 1, 20_000)
    h = histogram_density_accuracy(epsilon=1.0, bins=BINS, alpha=ALPHA, **kw)
    d = histogram_density(x, bounds=(0, 1), epsilon=1.0, bins=BINS, rng=seeded(4), **kw)
    exact, _ = np.histogram(x, bins=np.linspace(0, 1, BINS + 1))
    cov = float(np.mean(np.abs(d.raw - exact) <= h))
    band = 4 * math.sqrt(ALPHA * (1 - ALPHA) / BINS)
    assert 1 - ALPHA - band <= cov <= 1 - ALPHA + 0.03 + band


def test_budget_split_and_refusals() -> None:
    # without bins and a public n, part of epsilon buys the count: the cells get less
    assert histogram_density_accuracy(epsilon=0.5) > histogram_density_accuracy(
        epsilon=0.5, bins=10
    )
    assert histogram_density_accuracy(epsilon=0.5, n=1000) == histogram_density_accuracy(
        epsilon=0.5, bins=10
    )
    with pytest.raises(PrivacyParameterError):
        histogram_density_accuracy(epsilon=0.0)
    with pytest.raises(PrivacyParameterError):
        histogram_density_accuracy(epsilon=1.0, alpha=1.0)
