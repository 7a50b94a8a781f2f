"""Regressions for float-safe noise (issue 13): a data-independent path, a grid that follows the
sensitivity at small ε."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit.noise._float_safe as float_safe
from dpkit.errors import PrivacyParameterError
from dpkit.noise import laplace, laplace_grid, round_to_grid
from tests._structure import lines_run


@pytest.mark.parametrize("grid", [-40, 0, -1060])
def test_rounding_takes_the_same_path_for_every_magnitude(grid: int) -> None:
    # It used to branch on max|x| < 2**(grid + 53): one large record changed the path taken.
    limit = math.ldexp(1.0, grid + 53)
    small = np.array([0.1, -0.3, 0.7]) * math.ldexp(1.0, grid + 4)
    large = small.copy()
    large[1] = limit * 3.0
    runs = [
        lines_run(lambda x=x: round_to_grid(x, grid), float_safe.__file__) for x in (small, large)
    ]
    assert runs[0] and runs[0] == runs[1]
    out = round_to_grid(large, grid)
    assert out[1] == large[1]  # kept: already a multiple of 2**grid
    assert np.all(np.ldexp(out, -grid) == np.rint(np.ldexp(out, -grid)))


def test_laplace_release_takes_the_same_path_for_every_magnitude() -> None:
    small, large = np.array([1.0, 2.0]), np.array([1.0, 2.0**100])
    runs = [
        lines_run(lambda x=x: laplace(x, 1.0, rng=0), float_safe.__file__) for x in (small, large)
    ]
    assert runs[0] == runs[1]


def test_laplace_grid_from_the_smaller_of_sensitivity_and_scale() -> None:
    from dpkit.noise import check_laplace_scale

    assert laplace_grid(4.0, sensitivity=1.0) == -40  # ε = 1/4: from Δ, not from b
    assert laplace_grid(0.25, sensitivity=1.0) == -42  # ε = 4: from b, as before
    assert laplace_grid(1e13, sensitivity=1.0) == -7  # never finer than b · 2**-51
    check_laplace_scale(1e13 * (1 + 2.0**-6), -7)  # and the noise can then be sampled exactly
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        laplace_grid(2.0**53, sensitivity=1.0)
    with pytest.raises(PrivacyParameterError):
        check_laplace_scale(2.0**60, 0)
