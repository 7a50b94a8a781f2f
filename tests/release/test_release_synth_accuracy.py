"""Synthesizer.accuracy: each measured marginal cell's noisy count is within its half-width as
often as promised.

The fit measures marginals with :func:`dpkit.release._marginals.measure` at the plan's σ; here the
same function measures a 3 × 4 marginal 200 times (2400 cells, fixed seed) at the one-way and the
round σ of an MST plan. The half-width is the smallest integer quantile of the exact discrete
Gaussian tail, so the share within it lies in [1 − alpha, 1 − alpha + P(|Z| = h)]; at these σ
(about 2 to 4) the last term is below 0.06. The share must lie within ±4 binomial sd of that range.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.random import seeded
from dpkit.release import Categorical, Domain, Synthesizer
from dpkit.release._marginals import marginal, measure

ALPHA = 0.1
DOM = Domain({"a": Categorical([0, 1, 2]), "b": Categorical([0, 1, 2, 3])})


@pytest.mark.parametrize("key", ["one-way", "rounds"])
def test_marginal_cells_cover(key: str) -> None:
    syn = Synthesizer(DOM, rho=0.5, method="mst", estimator="closed")
    h = syn.accuracy(ALPHA)[key]
    sigma = syn.plan.sigma_one_way if key == "one-way" else syn.plan.sigma_round
    codes = np.random.default_rng(0).integers(0, 3, size=(500, 2)) % np.array([3, 4])
    exact = marginal(codes, (3, 4), (0, 1))
    gen = seeded(6)
    err = np.concatenate(
        [(measure(codes, (3, 4), (0, 1), sigma, gen).noisy - exact).ravel() for _ in range(200)]
    )
    share = float(np.mean(np.abs(err) <= h))
    band = 4 * math.sqrt(ALPHA * (1 - ALPHA) / err.size)
    assert 1 - ALPHA - band <= share <= 1 - ALPHA + 0.06 + band


def test_rounds_of_annealed_aim_are_bounded_and_independent_has_none() -> None:
    aim = Synthesizer(DOM, rho=0.5).accuracy()
    assert aim["rounds"] >= aim["one-way"]  # σ₀/√0.9 at the widest
    assert set(Synthesizer(DOM, rho=0.5, method="independent").accuracy()) == {"one-way"}
