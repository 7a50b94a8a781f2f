"""The exponential mechanism over an interval, on a data-independent grid (Smith 2011).

The output space is every multiple ``y = K · 2**grid`` in ``[lo, hi]``: finite, and fixed before
the data are seen. The data points are rounded to the same grid (a per-record map, so
neighbouring datasets stay neighbours), sorted, and the grid splits into *cells* on which the
score is constant. Each cell is chosen with probability ∝ (number of grid points in it) ·
exp(c · score), by the Gumbel-max trick on ``log(count) + c · score`` — log space, so nothing
underflows — and then a grid point inside it is drawn uniformly with an exact integer draw. This is
exactly the exponential mechanism over the grid (McSherry 2016, "the median by the exponential
mechanism": "sample an interval and a point within it"), in O(n) after sorting.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dpkit._messages import not_numeric
from dpkit.errors import DataError
from dpkit.mechanisms._base import FloatArray, IntArray
from dpkit.mechanisms._selection import gumbel, score_limit

__all__ = [
    "Cells",
    "ScoreFunction",
    "cells_for",
    "check_bounds",
    "interval_grid",
    "log_weights",
    "sample_cell",
]

ScoreFunction = Callable[[IntArray, IntArray], object]
"""``scores(less, greater)``: score of a cell from the numbers of points below and above it."""

_GRID_BITS = 40  # about 2^40 output points across [lo, hi]
_EXACT_BITS = 53  # |K| < 2^53 keeps K · 2**grid an exact double


def check_bounds(bounds: object) -> tuple[float, float]:
    """``(lo, hi)`` finite with lo < hi."""
    if bounds is None:
        raise DataError(
            "bounds are required, e.g. bounds=(0, 100): dpkit never reads them from the data "
            "(that would leak); estimate them privately with dpkit.stats.bounds if unknown."
        )
    try:
        lo, hi = (float(b) for b in bounds)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise DataError(f"bounds must be a pair (lo, hi) of numbers, got {bounds!r}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise DataError(f"bounds must be finite, got ({lo!r}, {hi!r}).")
    if not lo < hi:
        raise DataError(f"bounds must satisfy lo < hi, got ({lo!r}, {hi!r}); swap them?")
    if not math.isfinite(hi - lo):
        raise DataError(f"bounds ({lo!r}, {hi!r}) are too far apart for floating point.")
    return lo, hi


def interval_grid(lo: float, hi: float) -> int:
    """Default grid exponent for outputs in [lo, hi]: about 2^40 points, every one exact.

    ``max(floor(log2(hi − lo)) − 40, floor(log2 max(|lo|, |hi|)) + 1 − 53)``: fine enough that
    the grid is invisible next to any useful error, and coarse enough that every grid point in
    range is an exactly representable double.

    >>> interval_grid(-1.0, 1.0)
    -39
    """
    width_exp = math.frexp(hi - lo)[1] - 1
    mag_exp = math.frexp(max(abs(lo), abs(hi)))[1]
    # never below 2^-1074, the spacing of the subnormals: finer grid points would not be doubles
    return max(width_exp - _GRID_BITS, mag_exp - _EXACT_BITS, -1074)


class Cells:
    """Runs of grid points of constant score: first grid index, number of points, score.

    Gaps and atoms are kept as separate blocks (no interleaving copies); ``count`` is ``None``
    for a block of atoms, which hold one grid point each.
    """

    __slots__ = ("blocks",)

    def __init__(self) -> None:
        self.blocks: list[tuple[IntArray, IntArray | None, FloatArray]] = []

    def add(self, start: IntArray, count: IntArray | None, score: FloatArray) -> None:
        if start.size:
            self.blocks.append((start, count, score))

    def flat(self) -> tuple[IntArray, IntArray, FloatArray]:
        """All cells as three arrays, sorted by position (for analysis)."""
        start = np.concatenate([b[0] for b in self.blocks])
        count = np.concatenate(
            [b[1] if b[1] is not None else np.ones(b[0].size, np.int64) for b in self.blocks]
        )
        score = np.concatenate([b[2] for b in self.blocks])
        order = np.argsort(start, kind="stable")
        return start[order], count[order], score[order]


def _grid_points(points: object, lo: float, hi: float, grid: int) -> tuple[IntArray, int, int]:
    if points is None:
        raise DataError("points is None; pass a 1-d array of data values.")
    try:
        x = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataError(not_numeric("points", exc)) from None
    if x.ndim != 1:
        raise DataError(f"points must be 1-d, got shape {x.shape}.")
    if not np.isfinite(x).all():
        raise DataError("points contain NaN or infinite values; clean the data first.")
    k_lo = math.ceil(math.ldexp(lo, -grid))
    k_hi = math.floor(math.ldexp(hi, -grid))
    # clip to the outermost grid points in range, then scale (exact: a power of two) and round
    k = np.clip(x, math.ldexp(k_lo, grid), math.ldexp(k_hi, grid))
    k = np.ldexp(k, -grid)  # elementwise: 2**-grid itself overflows for subnormal bounds
    np.rint(k, out=k)
    ki = k.astype(np.int64)
    if ki.size > 1 and not bool((ki[1:] >= ki[:-1]).all()):
        ki.sort()
    return ki, k_lo, k_hi


def _evaluate(scores: ScoreFunction, less: IntArray, greater: IntArray) -> FloatArray:
    out = np.asarray(scores(less, greater), dtype=np.float64)
    if out.shape != less.shape:
        raise DataError(
            f"scores(less, greater) returned shape {out.shape}, expected {less.shape}; it must "
            "be vectorised (one score per cell)."
        )
    if not np.isfinite(out).all():
        raise DataError("scores(less, greater) returned NaN or infinite values.")
    return out


def cells_for(
    points: object,
    scores: object,
    bounds: tuple[float, float],
    grid: int,
) -> Cells:
    """Split the grid over ``bounds`` into cells of constant score.

    With an array of ``n + 1`` gap scores, grid point y gets ``scores[#{points ≤ y}]``. With a
    callable, the distinct (rounded) points are cells of one grid point each (atoms) and the
    runs of grid points strictly between them are the other cells; each cell's score is
    ``scores(less, greater)``, the numbers of points strictly below and strictly above it.
    """
    lo, hi = bounds
    ki, k_lo, k_hi = _grid_points(points, lo, hi, grid)
    n = int(ki.size)
    cells = Cells()
    if callable(scores):
        if n and bool((ki[1:] != ki[:-1]).all()):  # all distinct: the common case, no unique
            values = ki
            below = np.arange(n, dtype=np.int64)
            ends = below + 1
        elif n:
            first = np.empty(n, dtype=bool)
            first[0] = True
            np.not_equal(ki[1:], ki[:-1], out=first[1:])
            below = np.flatnonzero(first).astype(np.int64)  # points strictly below each value
            values = ki[below]
            ends = np.empty_like(below)  # points ≤ each value
            ends[:-1] = below[1:]
            ends[-1] = n
        else:
            values = below = ends = np.zeros(0, dtype=np.int64)
        m = int(values.size)
        gap_start = np.empty(m + 1, dtype=np.int64)
        gap_start[0] = k_lo
        np.add(values, 1, out=gap_start[1:])
        gap_count = np.empty(m + 1, dtype=np.int64)
        gap_count[:m] = values
        gap_count[m] = k_hi + 1
        gap_count -= gap_start
        gap_less = np.empty(m + 1, dtype=np.int64)
        gap_less[:m] = below
        gap_less[m] = n
        cells.add(gap_start, gap_count, _evaluate(scores, gap_less, n - gap_less))
        if m:
            cells.add(values, None, _evaluate(scores, below, n - ends))
        return cells
    try:
        gap_scores = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataError(not_numeric("scores", exc, "numeric or a callable")) from None
    if gap_scores.shape != (n + 1,):
        raise DataError(
            f"scores must have one entry per gap, n + 1 = {n + 1} for {n} points; got shape "
            f"{gap_scores.shape}."
        )
    if not np.isfinite(gap_scores).all():
        raise DataError("scores contain NaN or infinite values; every score must be finite.")
    start = np.empty(n + 1, dtype=np.int64)
    start[0] = k_lo
    start[1:] = ki
    count = np.empty(n + 1, dtype=np.int64)
    count[:n] = ki
    count[n] = k_hi + 1
    count -= start
    cells.add(start, count, gap_scores)
    return cells


def _log_weights(count: IntArray | None, score: FloatArray, scale: float) -> FloatArray:
    # Each score is clamped to ±score_limit(scale) first, so scale · score cannot overflow:
    # a 1-Lipschitz, monotone map per score that keeps the sensitivity, where a refusal would
    # depend on the scores' values (they come from the data). Only NaN is refused.
    limit = score_limit(scale)
    logits = np.clip(score, -limit, limit) * scale
    if not np.isfinite(logits).all():
        raise DataError("the scores contain NaN; a score function must return numbers.")
    if count is not None:
        log_count = np.full(count.shape, -np.inf)
        np.log(count, out=log_count, where=count > 0)
        logits += log_count
    return logits


def log_weights(cells: Cells, scale: float) -> list[FloatArray]:
    """``log(count) + scale · score`` of every cell, each score clamped to the range of
    :func:`~dpkit.mechanisms._selection.score_limit` (no overflow, never refused on a value).

    Computed (and checked) before the accountant is charged: the scores come from the data, so
    an overflow found only while sampling would fail a release that was already paid for.
    """
    return [_log_weights(count, score, scale) for _, count, score in cells.blocks]


def sample_cell(cells: Cells, logw: list[FloatArray], rng: np.random.Generator) -> int:
    """Pick a cell ∝ exp(logw) by Gumbel-max, then a uniform grid index in it."""
    best_value, best_block, best_index = -np.inf, 0, 0
    for b, lw in enumerate(logw):
        lw += gumbel(rng, int(lw.size))
        j = int(np.argmax(lw))
        if lw[j] > best_value:
            best_value, best_block, best_index = float(lw[j]), b, j
    start, count, _ = cells.blocks[best_block]
    first = int(start[best_index])
    return first if count is None else first + int(rng.integers(0, int(count[best_index])))


def cell_probabilities(cells: Cells, scale: float) -> tuple[IntArray, IntArray, FloatArray]:
    """Exact-in-float probability of each cell (for tests and for planning, not for sampling)."""
    start, count, score = cells.flat()
    logw = _log_weights(count, score, scale)
    w = np.exp(logw - np.max(logw))
    return start, count, np.asarray(w / w.sum(), dtype=np.float64)
