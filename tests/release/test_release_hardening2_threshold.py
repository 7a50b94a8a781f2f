"""histogram_density's default post-processing keeps empty regions empty.

The threshold step zeroed the cells whose noisy count is below τ, then projected the result
onto the simplex with the released total, which spread the removed mass over every cell again,
the zeroed ones included (32 phantom records in an empty half at n = 2000). The mass is now
renormalised over the surviving cells only.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.release import histogram_density
from dpkit.release._histogram_density import _threshold


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_cells_below_the_threshold_stay_empty(seed: int, delta: float) -> None:
    x = np.random.default_rng(seed).uniform(0.0, 0.5, size=2000)  # the right half is empty
    dens = histogram_density(x, bounds=(0, 1), epsilon=1.0, delta=delta, bins=40, n=2000, rng=seed)
    tau = _threshold(dens.raw.size, dens.noise_scale, delta > 0.0)
    below = dens.raw <= tau
    assert below[20:].sum() >= 15  # the empty half is mostly below τ (P(above) ≤ 1/40 each)
    assert np.all(dens.probabilities[below] == 0.0)
    assert dens.probabilities.sum() == pytest.approx(1.0)
    # and the phantom mass in the empty half is at most that of the few cells above τ
    above_right = dens.probabilities[20:][~below[20:]].sum()
    assert dens.probabilities[20:].sum() == above_right


def test_mass_is_renormalised_over_the_surviving_cells() -> None:
    x = np.r_[np.full(900, 0.05), np.full(100, 0.95)]
    dens = histogram_density(x, bounds=(0, 1), epsilon=1.0, bins=10, n=1000, rng=0)
    tau = _threshold(dens.raw.size, dens.noise_scale, False)
    kept = dens.raw > tau
    assert kept[0] and kept[9] and not kept.all()
    assert np.all(dens.probabilities[~kept] == 0.0)
    assert dens.probabilities[kept].sum() == pytest.approx(1.0)
    # the surviving cells keep their noisy counts up to one common shift (the projection)
    shift = dens.probabilities[kept] * 1000 - dens.raw[kept]
    assert np.ptp(shift) == pytest.approx(0.0, abs=1e-9)
