"""Mironov (2012)'s attack on textbook floating-point Laplace noise, and why dpkit resists it.

For the naive mechanism ``x + rng.laplace(0, b)``, the set of possible outputs depends on x. With
input 0 the output is the noise L itself, a float with a full 53-bit mantissa; an output in
[0.25, 0.5) is then an arbitrary multiple of 2^-54. With input 1 an output y in [0.25, 0.5) is
fl(1 + L) with L in [-0.75, -0.5), a multiple of 2^-53, and 1 is too, so the sum is exact and y is
a multiple of 2^-53: an output with an odd multiple of 2^-54 is *impossible* for input 1, and
seeing one proves the input was 0 — infinite privacy loss, whatever ε. dpkit's outputs for every
input lie on the same grid 2**grid · ℤ, so no bit pattern separates inputs.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.mechanisms import Laplace

N = 200_000


def _odd_at(y: np.ndarray, exponent: int) -> np.ndarray:
    """Whether y is an odd multiple of 2**exponent (y must be a multiple of it)."""
    k = np.ldexp(y, -exponent)
    return (k == np.rint(k)) & (np.mod(k, 2) == 1)


def test_naive_float_laplace_is_distinguishable() -> None:
    rng = np.random.default_rng(12)
    y0 = 0.0 + rng.laplace(0.0, 1.0, N)
    y1 = 1.0 + rng.laplace(0.0, 1.0, N)
    band0 = y0[(y0 >= 0.25) & (y0 < 0.5)]
    band1 = y1[(y1 >= 0.25) & (y1 < 0.5)]
    assert band0.size > 1000 and band1.size > 1000
    # every output of input 1 in the band is a multiple of 2^-53 (the exactness argument above)
    k1 = np.ldexp(band1, 53)
    assert np.all(k1 == np.rint(k1))
    # but input 0 produces odd multiples of 2^-54 there: outputs impossible under input 1
    witnesses = band0[_odd_at(band0, -54)]
    assert witnesses.size > band0.size // 4
    assert not np.isin(witnesses, band1).any()


def test_dpkit_laplace_outputs_share_one_grid() -> None:
    lap = Laplace(epsilon=1.0, sensitivity=1.0, shape=N)
    step = math.ldexp(1.0, lap.grid)
    y0 = lap.release(np.zeros(N), rng=np.random.default_rng(1))
    y1 = lap.release(np.ones(N), rng=np.random.default_rng(2))
    for y in (y0, y1):
        k = y / step
        assert np.all(k == np.rint(k)), "every output is a multiple of 2**grid"
        # nothing is finer than the grid: no output is an odd multiple of a half step
        assert not _odd_at(y, lap.grid - 1).any()
    # the attack's statistic — parity of the last grid bit — is the same for both inputs
    band = lambda y: y[(y >= 0.25) & (y < 0.5)]  # noqa: E731
    odd0 = _odd_at(band(y0), lap.grid).mean()
    odd1 = _odd_at(band(y1), lap.grid).mean()
    assert abs(odd0 - 0.5) < 0.05 and abs(odd1 - 0.5) < 0.05  # ~4000 points per band: σ ≈ 0.008


def test_dpkit_laplace_grid_is_data_independent() -> None:
    lap = Laplace(epsilon=0.3, sensitivity=5.0)
    for value in (0.0, 1.0, 1e-300, 12345.678, -7.25):
        y = lap.release(value, rng=3)
        assert (y / 2.0**lap.grid).is_integer()
