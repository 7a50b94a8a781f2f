"""Private histograms with given bin edges (seed 000 §"private histograms"; seed 001, counts)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dpkit._missing import Missing, check_missing, handle_missing
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
from dpkit.stats._common import SupportsCharge, charge, check_privacy
from dpkit.stats._data import FloatArray, as_matrix
from dpkit.stats._events import (
    Neighbouring,
    discrete_laplace_event,
    is_replace,
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
    one = DiscreteGaussianEvent(sigma=sigma, sensitivity=1)
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


def histogram(
    x: object,
    *,
    bins: object,
    epsilon: float,
    delta: float = 0.0,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
) -> Release:
    """Private counts of records in given bins (1-d, or d-d with one edge array per column).

    Each record falls in at most one bin (records outside the edges are not counted), so the
    vector of counts has ℓ1 and ℓ2 sensitivity 1 under add/remove (ℓ1 2, ℓ2 √2 under replace).
    Exact discrete Laplace noise of scale Δ₁/ε per bin gives ε-DP; with δ > 0, discrete Gaussian
    noise with σ from the analytic Gaussian calibration for Δ₂ gives (ε, δ)-DP (seed 002). Counts
    are unbiased and may be negative: clamp at 0 and renormalise for a density (seed 000).

    ``missing="raise"`` (default) refuses a NaN or None before any charge (the refusal reveals
    that one exists); ``missing="drop"`` removes such records first (add/remove neighbours).

    Examples
    --------
    >>> import numpy as np, dpkit.stats as st
    >>> x = np.random.default_rng(0).normal(size=10_000)
    >>> h = st.histogram(x, bins=[-3, -1, 0, 1, 3], epsilon=1.0, rng=1)
    >>> h.value.shape, bool(abs(h.value[1] - 3413) < 100)
    ((4,), True)
    """
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    policy = check_missing(missing, public_size=replace)
    if is_spark(x):  # bin counts where the data are (one column per dimension)
        edges = _edges(bins, len(x.columns))  # type: ignore[attr-defined]
        counts = spark_histogram(x, edges, policy)
    else:
        counts = _counts(x, bins, policy)
    if dlt == 0.0:
        sens = 2 if replace else 1
        scale = Fraction(sens) / Fraction(eps * (1.0 - 2.0**-40))
        noise = PartNoise(Part("counts", 0, sens), 0, sens, "laplace", scale)
        event = discrete_laplace_event(scale=scale, sensitivity=sens)
    else:
        sigma = Fraction(_gaussian_sigma(eps, dlt, replace))
        noise = PartNoise(Part("counts", 0, 1), 0, 1, "gaussian", sigma)
        event = _gaussian_event(float(sigma), replace)
    check_sampleable(noise.kind, noise.scale)  # refuse a tiny ε before charging, not after
    charge(accountant, event, "histogram", delta=dlt, rng=rng)
    gen = as_generator(rng)
    if noise.kind == "laplace":
        z = discrete_laplace(noise.scale, size=counts.shape, rng=gen)
    else:
        z = discrete_gaussian(noise.scale, size=counts.shape, rng=gen)
    value = counts + np.asarray(z, dtype=np.float64)
    return Release(value, event, "histogram", LinearNoise(((noise, 1.0),)), delta=dlt)
