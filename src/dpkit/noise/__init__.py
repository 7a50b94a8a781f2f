"""Exact noise: samplers on the integers and float-safe real noise on a power-of-two grid.

Noise drawn naively in floating point leaks: the set of floats ``x + Laplace`` can produce depends
on ``x`` (Mironov 2012; McSherry 2016, "a warning"). dpkit samples noise on the integers with exact
arithmetic (Canonne, Kamath and Steinke 2020) and returns real outputs on a grid that does not
depend on the data. See ``docs/noise.md``.
"""

from __future__ import annotations

from dpkit.noise._bernoulli import bernoulli_exp
from dpkit.noise._discrete import discrete_gaussian, discrete_laplace, sampled_sigma
from dpkit.noise._float_safe import (
    as_finite_array,
    check_gaussian_scale,
    check_laplace_scale,
    gaussian,
    gaussian_grid,
    laplace,
    laplace_grid,
    round_to_grid,
    rounded_sensitivity,
)
from dpkit.noise._pool import NoisePool

__all__ = [
    "NoisePool",
    "as_finite_array",
    "bernoulli_exp",
    "check_gaussian_scale",
    "check_laplace_scale",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian",
    "gaussian_grid",
    "laplace",
    "laplace_grid",
    "round_to_grid",
    "rounded_sensitivity",
    "sampled_sigma",
]
