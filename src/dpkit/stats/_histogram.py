"""Private histograms with given bin edges (Wasserman & Zhou 2010; McSherry 2016, counts)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dpkit._missing import Missing, check_missing, handle_missing, missing_error
from dpkit.accounting import (
    ComposedEvent,
    DiscreteGaussianEvent,
    Event,
    calibrate,
    gaussian_sigma,
)
from dpkit.errors import DataError
from dpkit.noise import discrete_gaussian, discrete_laplace, sampled_sigma
from dpkit.random import RNGLike, as_generator
from dpkit.stats._common import SupportsCharge, charge, check_budget
from dpkit.stats._data import FloatArray, as_matrix, object_records
from dpkit.stats._events import (
    Neighbouring,
    discrete_laplace_event,
    is_replace,
    relation,
)
from dpkit.stats._noisy import Part, PartNoise, check_sampleable
from dpkit.stats._release import LinearNoise, Release
from dpkit.stats._spark import is_spark, spark_histogram

__all__ = ["histogram"]


def _flat(bins: object) -> bool:
    """Whether ``bins`` is one flat array of edges (not one array per column)."""
    try:
        return bool(np.ndim(bins) == 1)  # type: ignore[arg-type]
    except ValueError:  # ragged: one edge array per column, of different lengths
        return False


def _edges(bins: object, d: int) -> list[FloatArray]:
    if bins is None:
        raise DataError("bins (the bin edges) are required; dpkit never derives them from data.")
    seq: Sequence[object] = (
        [bins] if d == 1 and _flat(bins) else list(bins)  # type: ignore[call-overload]
    )
    if len(seq) != d:
        raise DataError(f"give one array of edges per column: {d} column(s), {len(seq)} arrays.")
    out = []
    for e in seq:
        arr = np.asarray(e, dtype=np.float64)
        if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)):
            raise DataError("bin edges must be 1-d arrays of at least two finite numbers.")
        if not np.all(np.diff(arr) > 0):
            raise DataError("bin edges must be strictly increasing.")
        out.append(arr)
    return out


def _counts(x: object, bins: object, policy: Missing) -> FloatArray:
    data = handle_missing(as_matrix(x), policy)  # a record is missing when any column is
    if np.shape(x) == (0,) and bins is not None and not _flat(bins):  # type: ignore[call-overload]
        # An empty list carries no column count: take it from the bins, so that an empty dataset
        # is answered with noise in any container (a refusal would reveal the emptiness).
        data = np.empty((0, len(bins)))  # type: ignore[arg-type]
    edges = _edges(bins, data.shape[1])
    counts, _ = np.histogramdd(data, bins=edges)
    if data.shape[1] == 1:
        counts = counts.reshape(-1)
    return counts


def _gaussian_event(sigma: float, replace: bool) -> Event:
    """What discrete Gaussian noise on every count costs.

    Add/remove changes one count by 1: the exact privacy loss of a scalar discrete Gaussian with
    integer sensitivity 1. Replace moves one record between two bins: two such losses, composed
    (the coordinates are independent), which is tighter than the ℓ2 = √2 zCDP bound.
    """
    one = DiscreteGaussianEvent(sigma=sigma, sensitivity=1, neighbouring=relation(replace))
    return ComposedEvent(events=(one, one)) if replace else one


@lru_cache(maxsize=256)
def _gaussian_sigma(epsilon: float, delta: float, replace: bool) -> float:
    """Smallest σ (to a relative 1e-7, never below it) with the histogram's event (ε, δ)-DP."""
    start = gaussian_sigma(
        epsilon=epsilon, delta=delta, sensitivity=math.sqrt(2.0) if replace else 1
    )
    target = epsilon * (1.0 - 2.0**-40)
    sigma = calibrate(
        lambda s: _gaussian_event(sampled_sigma(s), replace),
        epsilon=target,
        delta=delta,
        lower=start / 2,
        upper=start * 4,
        tolerance=1e-7,
    )
    return sampled_sigma(sigma)  # calibrate checked exactly this value


def histogram_noise(
    epsilon: float, delta: float, replace: bool, rho: float | None = None
) -> tuple[PartNoise, object]:
    """The noise on every count of a histogram at (ε, δ) or ρ, and what it costs (public only).

    With ρ: discrete Gaussian noise with ``1/(2σ²) ≤ ρ`` per changed count (add/remove changes
    one count; replace two, so ``σ² ≥ 1/ρ``), paid in ρ exactly. Refuses, before anything is
    charged, a scale the exact samplers cannot use.
    """
    event: object
    if rho is not None:
        changed = 2.0 if replace else 1.0
        sigma = Fraction(sampled_sigma(math.nextafter(math.sqrt(changed / (2.0 * rho)), math.inf)))
        noise = PartNoise(Part("counts", 0, 1), 0, 1, "gaussian", sigma)
        event = _gaussian_event(float(sigma), replace)
    elif delta == 0.0:
        sens = 2 if replace else 1
        scale = Fraction(sens) / Fraction(epsilon * (1.0 - 2.0**-40))
        noise = PartNoise(Part("counts", 0, sens), 0, sens, "laplace", scale)
        event = discrete_laplace_event(
            scale=scale, sensitivity=sens, neighbouring=relation(replace)
        )
    else:
        sigma = Fraction(_gaussian_sigma(epsilon, delta, replace))
        noise = PartNoise(Part("counts", 0, 1), 0, 1, "gaussian", sigma)
        event = _gaussian_event(float(sigma), replace)
    check_sampleable(noise.kind, noise.scale)  # refuse a tiny ε before charging, not after
    return noise, event


def _key(value: object) -> tuple[type, object]:
    """A category's lookup key: its type with its value, so that ``1``, ``1.0`` and ``True``
    (equal under ``==``) stay distinct categories."""
    return (type(value), value)


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


_Index = dict[tuple[type, object], int]


def _category_table(categories: object) -> tuple[tuple[object, ...], _Index]:
    """The declared categories, checked (public: read before any data)."""
    if isinstance(categories, str | bytes):
        raise DataError("categories must be a sequence of category values, not one string.")
    try:
        cats: tuple[object, ...] = tuple(categories)  # type: ignore[arg-type]
    except TypeError:
        raise DataError("categories must be a sequence of category values.") from None
    if not cats:
        raise DataError("categories must hold at least one category.")
    index: _Index = {}
    for i, c in enumerate(cats):
        if _is_missing(c):
            raise DataError("categories may not contain None or NaN (those are missing values).")
        try:
            index.setdefault(_key(c), i)
        except TypeError:
            raise DataError("categories must be hashable values (str, int, ...).") from None
        if len(index) != i + 1:
            raise DataError("categories must be distinct.")
    return cats, index


def _category_counts(
    x: object, index: _Index, size: int, missing: Missing
) -> npt.NDArray[np.float64]:
    """Exact counts of the records in each declared category; other values are not counted
    (as records outside the bin edges), so no value is refused but a missing one."""
    if hasattr(x, "to_numpy") and not isinstance(x, np.ndarray):
        x = x.to_numpy()  # pandas / Polars Series (a categorical gives its values)
    records = object_records(x, "x must be a sequence of category values (1-d).")
    counts = np.zeros(size, dtype=np.float64)
    for v in records:
        if isinstance(v, np.generic):
            v = v.item()  # a NumPy scalar counts as the Python value it holds
        if _is_missing(v):
            if missing == "raise":
                raise missing_error("x")
            continue
        try:
            i = index.get(_key(v))
        except TypeError:  # an unhashable value is in no declared category
            i = None
        if i is not None:
            counts[i] += 1
    return counts


def histogram(
    x: object,
    *,
    bins: object = None,
    categories: object = None,
    epsilon: float | None = None,
    delta: float = 0.0,
    rho: float | None = None,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
) -> Release:
    """Private counts of records in given bins (1-d, or d-d with one edge array per column), or
    in declared categories (strings, a pandas or Polars categorical, any hashable values).

    Each record falls in at most one bin (records outside the edges are not counted), so the
    vector of counts has ℓ1 and ℓ2 sensitivity 1 under add/remove (ℓ1 2, ℓ2 √2 under replace).
    Exact discrete Laplace noise of scale Δ₁/ε per bin gives ε-DP; with δ > 0, discrete Gaussian
    noise with σ from the analytic Gaussian calibration for Δ₂ gives (ε, δ)-DP (the "Approximate
    Differential Privacy" notes). Counts are unbiased and may be negative: clamp at 0 and
    renormalise for a density (Wasserman & Zhou 2010).

    ``rho=`` instead of ``epsilon``/``delta``: discrete Gaussian noise, ρ-zCDP for the vector.

    With ``categories=`` (instead of ``bins``) the counts are of the declared categories, in
    their order; a value in no declared category is not counted (the categories are never read
    from the data: a pandas categorical's own categories may have been, so give them). The
    released counts are integers (the noise is on the integers).

    ``missing="raise"`` (default) refuses a NaN or None before any charge (the refusal reveals
    that one exists); ``missing="drop"`` removes such records first (add/remove neighbours).

    Examples
    --------
    >>> import numpy as np, dpkit.stats as st
    >>> x = np.random.default_rng(0).normal(size=10_000)
    >>> h = st.histogram(x, bins=[-3, -1, 0, 1, 3], epsilon=1.0, rng=1)
    >>> h.value.shape, h.value.dtype, bool(abs(h.value[1] - 3413) < 100)
    ((4,), dtype('int64'), True)
    >>> colours = ["red", "blue", "red", "green", "red"] * 200
    >>> st.histogram(colours, categories=["red", "blue", "green"], epsilon=1.0, rng=1)
    Release(histogram=[601 200 201], epsilon=1, ci='exact noise quantiles')
    """
    eps, dlt, r = check_budget(epsilon, delta, rho)
    replace = is_replace(neighbouring)
    policy = check_missing(missing, public_size=replace)
    if categories is not None:
        if bins is not None:
            raise DataError("give bins (numeric edges) or categories, not both.")
        _, index = _category_table(categories)
        if is_spark(x):
            raise DataError("categories= reads Python values; on Spark, give bins of codes.")
        counts = _category_counts(x, index, len(index), policy)
    elif is_spark(x):  # bin counts where the data are (one column per dimension)
        edges = _edges(bins, len(x.columns))  # type: ignore[attr-defined]
        counts = spark_histogram(x, edges, policy)
    else:
        counts = _counts(x, bins, policy)
    noise, event = histogram_noise(eps, dlt, replace, r)
    charge(accountant, event, "histogram", delta=dlt, rng=rng)
    gen = as_generator(rng)
    if noise.kind == "laplace":
        z = discrete_laplace(noise.scale, size=counts.shape, rng=gen)
    else:
        z = discrete_gaussian(noise.scale, size=counts.shape, rng=gen)
    # counts and noise are integers: the release is one (int64 holds any count of records
    # plus noise that dpkit can sample at a scale a finite ε gives)
    value = counts.astype(np.int64) + np.asarray(z, dtype=np.int64)
    return Release(value, event, "histogram", LinearNoise(((noise, 1.0),)), delta=dlt, rho=r)
