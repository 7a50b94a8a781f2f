"""Float-safe real noise: exact integer noise on a data-independent power-of-two grid.

How it works (Mironov 2012's fix, as in McSherry's (2016) closing warning):

1. The input ``x`` is rounded to the nearest multiple of ``2**grid`` (ties to even). This is exact
   in floating point: scaling by a power of two and ``rint`` introduce no error.
2. Integer noise ``Z`` (discrete Laplace or Gaussian, sampled exactly) is scaled to the grid,
   ``Z · 2**grid``, which is also exact.
3. The two are added in IEEE arithmetic, which returns the correctly rounded value of the exact sum
   ``(k + Z) · 2**grid``. The output is therefore a fixed, data-independent function of the integer
   ``k + Z``: post-processing of the exact integer mechanism, and every output lies on the grid.

Privacy: rounding moves each coordinate by at most ``2**grid / 2``, so between neighbours a rounded
coordinate moves by at most its true change plus ``2**grid``. For a query with ℓ1 sensitivity Δ
(ℓ2 sensitivity Δ₂), in which at most ``k`` coordinates can differ between neighbours, the rounded
query has ℓ1 sensitivity at most Δ + k·2**grid (ℓ2: Δ₂ + √k·2**grid). :func:`rounded_sensitivity`
computes this; mechanisms calibrate their noise to it.

The default grids are far below the noise: ``2**grid`` is about ``scale · 2**-40`` for Laplace and
``σ · 2**-24`` for Gaussian, so the rounding costs a relative 10^-12 (10^-7) of ε.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit._checks import Rational, check_positive, exact_fraction
from dpkit._messages import not_numeric
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.noise._discrete import DGAUSS_MAX_NUMERATOR, DLAP_MAX_NUMERATOR, sampler
from dpkit.noise._parallel import PARALLEL_FROM, in_chunks
from dpkit.noise._scales import rational_at_least
from dpkit.random import RNGLike, as_generator

__all__ = [
    "GAUSSIAN_GRID_BITS",
    "LAPLACE_GRID_BITS",
    "as_finite_array",
    "check_gaussian_scale",
    "check_laplace_scale",
    "gaussian",
    "gaussian_grid",
    "laplace",
    "laplace_grid",
    "round_to_grid",
    "rounded_sensitivity",
]

FloatArray = npt.NDArray[np.float64]

LAPLACE_GRID_BITS = 40
"""The Laplace grid is about ``2**-40`` of the scale (so the integer scale is in [2^40, 2^41))."""

GAUSSIAN_GRID_BITS = 24
"""The Gaussian grid is about ``2**-24`` of σ (so the integer σ is in [2^24, 2^25])."""

_MIN_GRID = -1074 + 1  # every n · 2**grid with |n| < 2**53 is then an exact double


def _grid_below(scale: object, bits: int, name: str) -> int:
    x = check_positive(scale, name)
    grid = math.frexp(x)[1] - 1 - bits  # floor(log2 x) - bits
    if grid < _MIN_GRID:
        raise PrivacyParameterError(
            f"{name}={x!r} is too small for a float-safe grid; rescale the query."
        )
    return grid


def laplace_grid(
    scale: Rational, *, sensitivity: Rational | None = None, coordinates: int = 1
) -> int:
    """Default grid exponent for Laplace noise of this scale: ``floor(log2 scale) − 40``.

    With ``sensitivity`` Δ given (what a mechanism should pass), the grid is taken from
    ``min(Δ, scale)`` instead, so that the rounding allowance ``k · 2**grid`` (k coordinates)
    stays about ``2**-40`` of the sensitivity even for ε < 1, where the scale Δ/ε exceeds Δ; a
    grid from the scale alone lets the allowance dominate Δ for tiny ε (2^3 = 8Δ at ε = 1e-13,
    inflating the noise 9×). The grid is never finer than ``scale · 2**-51``, because the exact
    sampler needs the integer scale below ``2**52``: then the allowance is at most
    ``2**-51 · scale`` (at ε = 1e-13, Δ/128: the noise grows by 0.8%, and the release stays
    exactly ε-DP because the noise is calibrated to the rounded sensitivity). When it would exceed
    ``2**-6`` of Δ (ε below about ``2**-45 · k``), accuracy would suffer visibly and
    :class:`~dpkit.errors.PrivacyParameterError` is raised — before anything is charged, as
    mechanisms call this at construction.

    >>> laplace_grid(1.0), laplace_grid(3.0)
    (-40, -39)
    >>> laplace_grid(1e13, sensitivity=1.0)  # ε = 1e-13: 2^-7 = Δ/128 rather than 2^3 = 8Δ
    -7
    """
    if sensitivity is None:
        return _grid_below(scale, LAPLACE_GRID_BITS, "scale")
    b = check_positive(scale, "scale")
    d = check_positive(sensitivity, "sensitivity")
    fine = _grid_below(min(b, d), LAPLACE_GRID_BITS, "sensitivity")
    grid = max(fine, math.frexp(b)[1] - 51)  # b / 2**grid < 2**51: room for the rounded Δ
    if coordinates * math.ldexp(1.0, grid) > math.ldexp(d, -6):
        raise PrivacyParameterError(
            f"the noise scale {b:.3g} is more than 2^45 times the sensitivity {d:.3g} (epsilon "
            "too small): exact float-safe sampling cannot represent it without inflating the "
            "noise; use a larger epsilon (or a count of whole units)."
        )
    _check_grid(grid)
    return grid


def gaussian_grid(sigma: Rational) -> int:
    """Default grid exponent for Gaussian noise of this σ: ``floor(log2 σ) − 24``.

    >>> gaussian_grid(1.0)
    -24
    """
    return _grid_below(sigma, GAUSSIAN_GRID_BITS, "sigma")


def rounded_sensitivity(
    sensitivity: float, grid: int, *, coordinates: int = 1, norm: int = 1
) -> float:
    """Sensitivity of the grid-rounded query, rounded up to a float.

    Parameters
    ----------
    sensitivity : float
        ℓ1 (``norm=1``) or ℓ2 (``norm=2``) sensitivity of the unrounded query.
    grid : int
        Grid exponent; outputs lie on multiples of ``2**grid``.
    coordinates : int
        How many coordinates can differ between neighbouring datasets.

    Returns
    -------
    float
        ``Δ + k · 2**grid`` (ℓ1) or ``Δ + √k · 2**grid`` (ℓ2), never below the exact value.

    >>> rounded_sensitivity(1.0, -40) >= 1.0 + 2.0**-40
    True
    """
    delta = check_positive(sensitivity, "sensitivity")
    if norm not in (1, 2):
        raise PrivacyParameterError(f"norm must be 1 or 2, got {norm!r}.")
    if not isinstance(coordinates, numbers.Integral) or coordinates < 1:
        raise PrivacyParameterError(f"coordinates must be a positive int, got {coordinates!r}.")
    spread = coordinates if norm == 1 else math.sqrt(coordinates)
    total = delta + spread * math.ldexp(1.0, grid)
    return math.nextafter(total, math.inf)  # the float sum may have rounded down


def as_finite_array(values: object, name: str = "values") -> FloatArray:
    """Convert to a float64 array, refusing None, non-numbers, NaN and infinities."""
    if values is None:
        raise DataError(f"{name} is None; pass a number or an array of numbers.")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataError(not_numeric(name, exc)) from None
    if not np.all(np.isfinite(arr)):
        raise DataError(
            f"{name} contains NaN or infinite values; clean or clamp the data before releasing."
        )
    return arr


def round_to_grid(x: FloatArray, grid: int) -> FloatArray:
    """Round each value to the nearest multiple of ``2**grid`` (ties to even), exactly.

    Branch-free in the data: every value goes through the same vectorised operations whatever
    its magnitude (no path chosen from ``max|x|``, which would make the running time depend on
    the largest value). Scaling by a power of two is exact unless it overflows or falls to the
    subnormal range: a value at or beyond ``2**(grid + 53)`` is already a multiple of ``2**grid``
    and is kept as it is (its scaled copy may overflow and is discarded), and a scaled value in
    the subnormal range rounds to zero either way. Only the public ``grid`` picks how the power
    of two is applied.
    """
    limit = math.ldexp(1.0, grid + 53)  # at and beyond it, every double is a multiple of 2**grid
    small = np.abs(x) < limit
    with np.errstate(over="ignore"):  # the scaled copies of large values are discarded below
        if grid >= -1022:
            rounded: FloatArray = np.multiply(x, math.ldexp(1.0, -grid), out=np.empty_like(x))
            np.rint(rounded, out=rounded)
            rounded *= math.ldexp(1.0, grid)
        else:  # 2**-grid is not a double: scale in two exact steps
            rounded = np.ldexp(np.rint(np.ldexp(x, -grid)), grid)
    # a select of every element (np.copyto with a mask skips runs of False: its time would
    # depend on how many values are large)
    out: FloatArray = np.where(small, rounded, x)
    return out


def _check_grid(grid: object) -> int:
    if isinstance(grid, bool) or not isinstance(grid, numbers.Integral | np.integer):
        raise PrivacyParameterError(f"grid must be an int exponent, got {grid!r}.")
    g = int(grid)
    if not _MIN_GRID <= g <= 960:
        raise PrivacyParameterError(f"grid exponent {g} is outside [{_MIN_GRID}, 960].")
    return g


def _add_on_grid(x: FloatArray, noise: npt.NDArray[np.int64], grid: int) -> FloatArray:
    # |noise| < 2**53 in practice (its tail is at ~60 scales ≈ 2**47), so ldexp is exact, and
    # the IEEE sum is the correctly rounded value of the exact grid point.
    out = round_to_grid(x, grid)
    step = noise.astype(np.float64)
    if grid >= -1022:  # a product by a normal power of two: exact (|noise| >= 1 or 0)
        step *= math.ldexp(1.0, grid)
    else:
        step = np.ldexp(step, grid)
    out += step
    return out


def _noisy(
    x: FloatArray, kind: str, num: int, den: int, grid: int, rng: np.random.Generator
) -> FloatArray:
    """``round(x) + 2**grid · Z`` with exact integer noise ``Z`` (``kind``, scale ``num/den``).

    A large array is done chunk by chunk on the worker threads (see ``_parallel``), each chunk
    sampled and added while it is in the cache; the result does not depend on the thread count.
    """
    sample = sampler(kind, num, den)
    flat = x.reshape(-1)
    n = flat.size
    if n < PARALLEL_FROM:
        return _add_on_grid(x, sample(n, rng).reshape(x.shape), grid)
    out = np.empty(n)

    def work(start: int, stop: int, gen: np.random.Generator) -> None:
        out[start:stop] = _add_on_grid(flat[start:stop], sample(stop - start, gen), grid)

    in_chunks(n, rng, work)
    return out.reshape(x.shape)


def _shape_result(x: FloatArray, out: FloatArray) -> float | FloatArray:
    return float(out) if x.ndim == 0 else out


def laplace(
    values: object, scale: Rational, *, grid: int | None = None, rng: RNGLike = None
) -> float | FloatArray:
    """Add float-safe Laplace noise of the given scale to each value.

    Returns ``round(x) + 2**grid · Z`` where ``round`` goes to the nearest multiple of ``2**grid``
    and ``Z`` is exact discrete Laplace noise of scale ``scale / 2**grid``. Every output lies on
    the grid ``2**grid · ℤ``, whatever the input (Mironov 2012).

    Privacy: for a query with ℓ1 sensitivity Δ in which at most k coordinates change, the release
    is ε-DP with ε = ``rounded_sensitivity(Δ, grid, coordinates=k) / scale``.

    Parameters
    ----------
    values : float or array_like
        Finite values.
    scale : int, Fraction or float
        Laplace scale b > 0 in the units of ``values``.
    grid : int, optional
        Grid exponent; default :func:`laplace_grid` of ``scale``.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; an int seed is reproducible and not secure.

    Examples
    --------
    >>> from dpkit.noise import laplace
    >>> y = laplace(10.0, 2.0, rng=1)
    >>> (y * 2**39).is_integer()
    True
    """
    x = as_finite_array(values)
    g = laplace_grid(scale) if grid is None else _check_grid(grid)
    t, s = rational_at_least(_in_grid_units(scale, g), "scale", max_numerator=DLAP_MAX_NUMERATOR)
    return _shape_result(x, _noisy(x, "laplace", t, s, g, as_generator(rng)))


def gaussian(
    values: object, sigma: Rational, *, grid: int | None = None, rng: RNGLike = None
) -> float | FloatArray:
    """Add float-safe Gaussian noise of standard deviation ``sigma`` to each value.

    Returns ``round(x) + 2**grid · Z`` with ``Z`` exact discrete Gaussian noise of parameter
    ``σ / 2**grid`` (rounded up by a relative 2^-24 at most).

    Privacy: for a query with ℓ2 sensitivity Δ₂ in which at most k coordinates change, the release
    satisfies ρ-zCDP with ρ = Δ'²/(2σ²), Δ' = ``rounded_sensitivity(Δ₂, grid, coordinates=k,
    norm=2)`` (Canonne, Kamath and Steinke 2020); its (ε, δ) curve is within the continuous
    Gaussian's to the precision of the grid.

    Examples
    --------
    >>> from dpkit.noise import gaussian
    >>> y = gaussian([1.0, 2.0], 1.0, rng=1)
    >>> y.shape, bool(((y * 2**24) % 1 == 0).all())
    ((2,), True)
    """
    x = as_finite_array(values)
    g = gaussian_grid(sigma) if grid is None else _check_grid(grid)
    a, b = rational_at_least(_in_grid_units(sigma, g), "sigma", max_numerator=DGAUSS_MAX_NUMERATOR)
    return _shape_result(x, _noisy(x, "gaussian", a, b, g, as_generator(rng)))


def check_laplace_scale(scale: Rational, grid: int) -> None:
    """Refuse (``PrivacyParameterError``) a Laplace scale the exact sampler cannot use on ``grid``.

    Mechanisms call it at construction, so that a release never charges and then fails.

    >>> check_laplace_scale(1.0, -40)
    """
    g = _check_grid(grid)
    rational_at_least(_in_grid_units(scale, g), "scale", max_numerator=DLAP_MAX_NUMERATOR)


def check_gaussian_scale(sigma: Rational, grid: int) -> None:
    """Refuse (``PrivacyParameterError``) a Gaussian σ the exact sampler cannot use on ``grid``.

    >>> check_gaussian_scale(1.0, -24)
    """
    g = _check_grid(grid)
    rational_at_least(_in_grid_units(sigma, g), "sigma", max_numerator=DGAUSS_MAX_NUMERATOR)


def _in_grid_units(scale: Rational, grid: int) -> Fraction:
    return exact_fraction(scale, "scale") / Fraction(2) ** grid
