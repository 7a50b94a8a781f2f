"""Private quantiles by the exponential mechanism over sorted intervals (Smith 2011; McSherry 2016).

Output space. Every multiple ``v = K · 2**g`` of a data-independent grid inside the bounds, with
about 2^40 points across ``[L, U]`` (McSherry 2016 uses the 2^32 integers of an i32). The data are
clamped and rounded to the same grid, a per-record map, so neighbours stay neighbours.

Score. ``u(v) = −|(1 − q)·a(v) − q·b(v)|`` with ``a(v) = #{x < v}`` and ``b(v) = #{x > v}``; for
the median this is McSherry's (2016) ``−||data > v| − |data < v||`` halved. Adding or removing a
record moves ``u`` by at most ``max(q, 1 − q)``; replacing one by at most 1. The mechanism outputs v
with probability ∝ ``exp(ε u(v) / (2Δu))`` — ε-DP (McSherry and Talwar 2007).

Sampling. The score is constant between consecutive distinct data values, so the grid splits
into at most 2n + 1 cells (gaps and the data values themselves). A cell is picked with the
Gumbel-max trick on ``log(#points) + ε u / (2Δu)`` — in log space, so no weight underflows however
concentrated the data (diffprivlib's issue #107) — and a grid point inside it uniformly.

Speed. Only ranks near ``q·n`` matter: a grid point below the order statistic of rank
``r1 = ⌊qn⌋ − K`` has ``|(1 − q)a − qb| ≥ K``, so the whole region below it weighs at most
``#points · exp(−εK/(2Δu))``. dpkit partitions the data around ranks ``r1`` and ``r2`` (O(n), like
``numpy.median``), sorts only the window between them, and samples from the exact cells of the
window plus the two outer regions *at their bounds*. If an outer region is drawn (probability
below e^-40), its exact weight is computed from a full sort and the draw is accepted with
probability exact/bound, else redrawn: rejection sampling, so the output distribution is the
exponential mechanism's, with no approximation from the window.

Floating point. The cell is chosen by Gumbel-max on float log-weights and the within-window
acceptance uses a float uniform, so selection probabilities carry float rounding (relative
≈1e-16 per weight), as in every float implementation of the exponential mechanism; the cells, the
grid and the point drawn inside a cell are exact integers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_epsilon
from dpkit._missing import Missing, check_missing, handle_missing
from dpkit.errors import DataError
from dpkit.random import RNGLike, as_generator
from dpkit.stats._common import SupportsCharge, charge
from dpkit.stats._data import FloatArray, as_vector, check_bounds, refuse_empty_public
from dpkit.stats._events import (
    Neighbouring,
    composed,
    exponential_event,
    is_replace,
    relation,
)
from dpkit.stats._release import NoInterval, Release

__all__ = ["median", "quantile", "quantile_grid"]

_GRID_BITS = 40
_TAIL = 40.0  # outer regions weigh at most e^-40 of the proposal: fallback almost never runs

_NO_CI = (
    "the exponential mechanism's error depends on the data, so no interval follows from the "
    "released value alone; release extra quantiles (e.g. q ± 0.05) to bracket it."
)


def quantile_grid(lo: float, hi: float) -> int:
    """Grid exponent of the output space: about 2^40 points across ``[lo, hi]``, all exact doubles.

    >>> quantile_grid(-1.0, 1.0)
    -39
    """
    g = math.frexp(hi - lo)[1] - 1 - _GRID_BITS
    top = max(abs(lo), abs(hi))
    return max(g, math.frexp(top)[1] - 53)


@dataclass(frozen=True)
class _Cells:
    start: npt.NDArray[np.float64]  # first grid integer of each cell
    count: npt.NDArray[np.float64]  # number of grid points in it (> 0)
    logw: npt.NDArray[np.float64]  # log(count) + β · score


def _cells(
    window: FloatArray, below: int, above: int, first: float, last: float, q: float, beta: float
) -> _Cells:
    """Exact cells of the grid range ``[first, last]`` given the sorted data inside it.

    ``below``/``above``: numbers of data points strictly below ``first`` / above ``last``;
    ``window`` (sorted) holds every data point in ``[first, last]``.
    """
    n = below + above + window.size
    if window.size == 0:  # one gap covers the whole range (e.g. an empty dataset)
        empty_score = -abs((1.0 - q) * below - q * above)
        width = float(last - first + 1)
        return _Cells(
            np.array([float(first)]),
            np.array([width]),
            np.array([math.log(width)]) + beta * empty_score,
        )
    vals, counts = np.unique(window, return_counts=True)
    cum = below + np.cumsum(counts)  # points ≤ each value
    less_atom = cum - counts
    # atoms: a = points below the value, b = points above it
    a_atom = less_atom.astype(np.float64)
    b_atom = (n - cum).astype(np.float64)
    # gaps (d_i, d_{i+1}) and the edges [first, d_1), (d_m, last]
    gap_start = np.concatenate(([first], vals + 1))
    gap_end = np.concatenate((vals - 1, [last]))
    a_gap = np.concatenate(([below], cum)).astype(np.float64)
    b_gap = n - a_gap
    start = np.concatenate((vals.astype(np.float64), gap_start))
    count = np.concatenate((np.where(counts > 0, 1.0, 0.0), gap_end - gap_start + 1))
    a = np.concatenate((a_atom, a_gap))
    b = np.concatenate((b_atom, b_gap))
    keep = count > 0
    score = -np.abs((1.0 - q) * a[keep] - q * b[keep])
    return _Cells(start[keep], count[keep], np.log(count[keep]) + beta * score)


def _pick(logw: FloatArray, gen: np.random.Generator) -> int:
    """Gumbel-max: index i with probability ∝ exp(logw[i])."""
    return int(np.argmax(logw + gen.gumbel(size=logw.size)))


def _point(cells: _Cells, i: int, gen: np.random.Generator) -> int:
    return int(cells.start[i]) + int(gen.integers(0, int(cells.count[i])))


def _sample(
    z: FloatArray, kl: int, kh: int, q: float, beta: float, gen: np.random.Generator
) -> int:
    """One draw of the exponential mechanism on grid integers ``[kl, kh]`` (cells exact).

    ``z`` (the gridded copy of the data) is reordered in place.
    """
    n = z.size
    spread = math.log(kh - kl + 1) + _TAIL
    k = math.ceil(spread / beta) + 1
    r1 = max(0, math.floor(q * n) - k)
    r2 = min(n - 1, math.ceil(q * n) + k)
    if r1 == 0 and r2 == n - 1:
        full = np.sort(z)
        cells = _cells(full, 0, 0, kl, kh, q, beta)
        return _point(cells, _pick(cells.logw, gen), gen)
    # In place: z is this release's own gridded copy (from _grid_data), and only its multiset
    # matters to every later step, so the partition needs no second copy of the data.
    part = z
    part.partition([r1, r2])
    lo_v, hi_v = float(part[r1]), float(part[r2])
    window = np.sort(part[r1 : r2 + 1])
    eq_lo = int(np.count_nonzero(part[:r1] == lo_v))
    eq_hi = int(np.count_nonzero(part[r2 + 1 :] == hi_v))
    if eq_lo or eq_hi:
        window = np.sort(np.concatenate((np.full(eq_lo, lo_v), window, np.full(eq_hi, hi_v))))
    below, above = r1 - eq_lo, n - 1 - r2 - eq_hi
    inner = _cells(window, below, above, lo_v, hi_v, q, beta)
    # Outer regions, at their exact weight when the window reaches the edge, else at a bound.
    outer: list[tuple[float, float, bool]] = []  # (first, last, exact)
    logs: list[float] = []
    for first, last, edge, exact_score in (
        (kl, lo_v - 1, r1 == 0, -q * n),
        (hi_v + 1, kh, r2 == n - 1, -(1.0 - q) * n),
    ):
        width = last - first + 1
        if width <= 0:
            continue
        outer.append((first, last, edge))
        logs.append(math.log(width) + beta * (exact_score if edge else -(k - 1)))
    logw = np.concatenate((inner.logw, np.array(logs)))
    full_sorted: FloatArray | None = None
    while True:
        i = _pick(logw, gen)
        if i < inner.logw.size:
            return _point(inner, i, gen)
        first, last, exact = outer[i - inner.logw.size]
        if exact:
            return int(first) + int(gen.integers(0, int(last - first + 1)))
        if full_sorted is None:
            full_sorted = np.sort(z)
        lo_i = int(np.searchsorted(full_sorted, first, "left"))
        hi_i = int(np.searchsorted(full_sorted, last, "right"))
        region = _cells(full_sorted[lo_i:hi_i], lo_i, n - hi_i, first, last, q, beta)
        log_mass = float(np.logaddexp.reduce(region.logw))
        if math.log(gen.random()) < log_mass - logw[i]:
            return _point(region, _pick(region.logw, gen), gen)


def _grid_data(x: FloatArray, lo: float, hi: float, g: int) -> tuple[FloatArray, int, int]:
    kl = math.ceil(math.ldexp(lo, -g))
    kh = math.floor(math.ldexp(hi, -g))
    if kh < kl:
        raise DataError("bounds are narrower than the output grid; widen them.")
    z = np.clip(x, math.ldexp(float(kl), g), math.ldexp(float(kh), g))
    np.multiply(z, math.ldexp(1.0, -g), out=z)
    np.rint(z, out=z)
    return z, kl, kh


def _check_qs(q: object) -> tuple[list[float], bool]:
    arr = np.asarray(q, dtype=np.float64) if q is not None else np.array(np.nan)
    if arr.ndim > 1 or arr.size == 0 or not np.all((arr >= 0) & (arr <= 1)):
        raise DataError(f"q must be a number or a 1-d list of numbers in [0, 1], got {q!r}.")
    return [float(v) for v in arr.ravel()], arr.ndim == 0


def quantile(
    x: object,
    q: float | Sequence[float],
    *,
    bounds: tuple[float, float],
    epsilon: float,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
) -> Release:
    """Private quantile(s) by the exponential mechanism over sorted intervals (Smith 2011).

    Each of the ``m`` quantiles is ε/m-DP (sequential composition), so the whole release is
    ε-DP. The output lies on a grid of about 2^40 points across the bounds; no candidate list is
    needed and no weight can underflow. Runs in O(n) (a partition around the target rank, as
    ``numpy.median``) for one quantile and O(n log n) for several. See the module notes.

    Parameters
    ----------
    x : array_like
        1-d array of values (clamped to the bounds).
    q : float or sequence of float
        Quantile level(s) in [0, 1].
    bounds : (float, float)
        Public bounds of the output space.
    epsilon : float
        Total ε for all the quantiles.
    accountant, rng, neighbouring :
        As for every statistic.

    Returns
    -------
    Release
        Its ``ci`` raises: the error of the exponential mechanism depends on the data.

    Examples
    --------
    McSherry's (2016) concentrated example: 1,000 points in [0.123, 0.124], bounds [-1, 1], ε = 0.1.

    >>> import numpy as np, dpkit.stats as st
    >>> x = np.random.default_rng(0).uniform(0.123, 0.124, 1000)
    >>> m = st.quantile(x, 0.5, bounds=(-1, 1), epsilon=0.1, rng=1)
    >>> bool(abs(m.value - 0.1235) < 1e-4)
    True
    """
    eps = check_epsilon(epsilon)
    replace = is_replace(neighbouring)
    qs, scalar = _check_qs(q)
    lo, hi = check_bounds(bounds)
    data = handle_missing(as_vector(x), check_missing(missing, public_size=replace))
    if replace:
        refuse_empty_public(int(data.size), "quantile")
    g = quantile_grid(lo, hi)
    z, kl, kh = _grid_data(data, lo, hi, g)
    eps_each = eps / len(qs) * (1.0 - 2.0**-40)
    # rank utilities move by at most 1 under either relation; the event declares the chosen one
    rel = relation(replace)
    event = composed(tuple(exponential_event(epsilon=eps_each, neighbouring=rel) for _ in qs))
    charge(accountant, event, "quantile", rng=rng)
    gen = as_generator(rng)
    if len(qs) > 1:
        z = np.sort(z)  # one sort serves every quantile (the window path then is exact and fast)
    out: list[float] = []
    for qi in qs:
        sens = 1.0 if replace else max(qi, 1.0 - qi)
        k = _sample(z, kl, kh, qi, eps_each / (2.0 * sens), gen)
        out.append(math.ldexp(float(k), g))
    value: Any = out[0] if scalar else np.array(out)
    return Release(value, event, "quantile", NoInterval(_NO_CI))


def median(
    x: object,
    *,
    bounds: tuple[float, float],
    epsilon: float,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
) -> Release:
    """Private median: :func:`quantile` at q = 0.5 (McSherry 2016, "the median"). ε-DP.

    ``missing="raise"`` (default) refuses a NaN or None before any charge (the refusal reveals
    that one exists); ``missing="drop"`` removes such records first (add/remove neighbours).

    Examples
    --------
    McSherry 2016: 1,000 copies of 0.4 give exactly 0.4 (up to the grid) almost always.

    >>> import dpkit.stats as st
    >>> m = st.median([0.4] * 1000, bounds=(-1, 1), epsilon=0.1, rng=0)
    >>> round(m.value, 9)
    0.4
    """
    return quantile(
        x,
        0.5,
        bounds=bounds,
        epsilon=epsilon,
        accountant=accountant,
        rng=rng,
        neighbouring=neighbouring,
        missing=missing,
    )
