"""Choosing a rejection region from a selection sample.

Every candidate region is scored by the Clopper–Pearson lower bound on ε it would give on the
selection sample itself; the best one is then evaluated on fresh outputs, so trying many candidates
costs no confidence (the selection/evaluation split of Jagielski et al. 2020 and Nasr et al. 2021).
Candidates, by kind of output:

* scalar: thresholds on both tails (``>= t`` and ``<= t``) at every value when there are few, else
  at ranks spaced geometrically towards both ends (ε is found in the tails); bounded intervals
  (and their complements) between pooled quantiles, which find a window one input never reaches;
  unions of histogram bins ranked by their estimated likelihood ratio (the Neyman–Pearson family,
  binned); sets of the most frequent values (atoms); the float lattice features of Mironov (2012);
  for integer outputs, residue classes modulo small integers ranked by likelihood ratio (a parity
  or other low-order leak);
* discrete (few distinct outputs, scalar or vector): sets of outputs ranked by their estimated
  likelihood ratio — the Neyman–Pearson family;
* continuous vectors: a logistic-regression score (fitted with NumPy by Newton's method) and
  thresholds on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit.audit._clopper_pearson import cp_upper
from dpkit.audit._regions import (
    Above,
    Below,
    Coordinate,
    InBins,
    InSet,
    Interval,
    LinearScore,
    OffLattice,
    OnLattice,
    Region,
    Residue,
    RowsIn,
    residues_of,
)
from dpkit.audit._result import epsilon_from_rates

__all__ = ["choose_region"]

MAX_CATEGORIES = 512
"""Outputs with at most this many distinct values (or rows) are treated as discrete."""

MIN_REPEATS = 4
"""...and only if each distinct value is seen this many times on average. A continuous output
from a few hundred runs has few distinct values too, but none repeats: sets of such values fit
the selection sample and hold nothing on fresh runs, where they would crowd out the thresholds."""


def _is_discrete(distinct: int, runs: int) -> bool:
    return distinct <= MAX_CATEGORIES and MIN_REPEATS * distinct <= runs


MAX_COORDINATES = 64
"""Vector outputs with at most this many coordinates also get per-coordinate thresholds."""

LATTICE_EXPONENTS = range(-64, 9)
"""Powers of two tried by the low-order-bit (lattice) regions."""

INTERVAL_POINTS = 64
"""Pooled quantiles used as interval end points (all pairs are tried: 2016 intervals)."""

LR_BINS = 32
"""Bins (at pooled quantiles) of the likelihood-ratio-ranked regions."""

MODULI = (*range(2, 17), 32, 64, 128, 256)
"""Moduli tried by the residue regions on integer outputs."""

Array = npt.NDArray[Any]


class _Scorer:
    """Accumulates candidate regions with their counts and keeps the best."""

    def __init__(self, n0: int, n1: int, delta: float, alpha: float) -> None:
        self.n0, self.n1, self.delta, self.alpha = n0, n1, delta, alpha
        self.best: Region | None = None
        self.best_eps = -1.0

    def add(self, regions: Sequence[Region], in0: npt.ArrayLike, in1: npt.ArrayLike) -> None:
        """``in0[i]``, ``in1[i]``: how many outputs of D, D′ fall in ``regions[i]``."""
        if not regions:
            return
        a = np.asarray(in0, dtype=np.float64)
        b = np.asarray(in1, dtype=np.float64)
        p_hi = cp_upper(a, self.n0, self.alpha)
        q_hi = cp_upper(self.n1 - b, self.n1, self.alpha)
        eps = epsilon_from_rates(p_hi, q_hi, self.delta)
        i = int(np.argmax(eps))
        if eps[i] > self.best_eps:
            self.best_eps = float(eps[i])
            self.best = regions[i]


def _threshold_values(pooled_sorted: Array) -> Array:
    uniq = np.unique(pooled_sorted)
    if uniq.size <= 4096:
        return uniq
    n = pooled_sorted.size
    geo = np.unique(np.geomspace(1, n // 2, 600).astype(np.int64))
    ranks = np.concatenate([geo - 1, n - geo, np.linspace(0, n - 1, 800).astype(np.int64)])
    return np.unique(pooled_sorted[np.clip(ranks, 0, n - 1)])


def _scalar(y0: Array, y1: Array, scorer: _Scorer) -> None:
    s0, s1 = np.sort(y0), np.sort(y1)
    ts = _threshold_values(np.sort(np.concatenate([s0, s1])))
    n0, n1 = s0.size, s1.size
    above0 = n0 - np.searchsorted(s0, ts, side="left")
    above1 = n1 - np.searchsorted(s1, ts, side="left")
    below0 = np.searchsorted(s0, ts, side="right")
    below1 = np.searchsorted(s1, ts, side="right")
    tl = [float(t) for t in ts]
    scorer.add([Above(t) for t in tl], above0, above1)
    scorer.add([Below(t) for t in tl], below0, below1)
    pooled = np.sort(np.concatenate([s0, s1]))
    if np.all(np.isfinite(np.asarray(pooled, dtype=np.float64))):
        _intervals(s0, s1, pooled, scorer)
        _lr_bins(y0, y1, pooled, scorer)
    _residues(y0, y1, scorer)
    # Atoms: values taken with positive probability (a clamp at 0, a sentinel, a count).
    vals, counts = np.unique(np.concatenate([y0, y1]), return_counts=True)
    order = np.argsort(counts)[::-1][:16]
    top = vals[order][counts[order] > 1]
    if top.size:
        atoms = [InSet((v.item(),)) for v in top]
        scorer.add(atoms, [int(np.sum(y0 == v)) for v in top], [int(np.sum(y1 == v)) for v in top])
    if np.issubdtype(y0.dtype, np.floating):
        on: list[Region] = []
        off: list[Region] = []
        c_on0, c_on1 = [], []
        for e in LATTICE_EXPONENTS:
            on.append(OnLattice(e))
            off.append(OffLattice(e))
            c_on0.append(int(np.count_nonzero(OnLattice(e)(y0))))
            c_on1.append(int(np.count_nonzero(OnLattice(e)(y1))))
        scorer.add(on, c_on0, c_on1)
        scorer.add(off, n0 - np.asarray(c_on0), n1 - np.asarray(c_on1))


def _quantile_points(pooled_sorted: Array, k: int) -> Array:
    ranks = np.linspace(0, pooled_sorted.size - 1, k + 2)[1:-1].astype(np.int64)
    return np.unique(np.asarray(pooled_sorted[ranks], dtype=np.float64))


def _intervals(s0: Array, s1: Array, pooled: Array, scorer: _Scorer) -> None:
    pts = _quantile_points(pooled, INTERVAL_POINTS)
    if pts.size < 2:
        return
    lo_i, hi_i = np.triu_indices(pts.size, k=1)
    lo, hi = pts[lo_i], pts[hi_i]
    in0 = np.searchsorted(s0, hi, side="right") - np.searchsorted(s0, lo, side="left")
    in1 = np.searchsorted(s1, hi, side="right") - np.searchsorted(s1, lo, side="left")
    inside = [Interval(float(a), float(b)) for a, b in zip(lo, hi, strict=True)]
    outside = [Interval(float(a), float(b), inside=False) for a, b in zip(lo, hi, strict=True)]
    scorer.add(inside, in0, in1)
    scorer.add(outside, s0.size - in0, s1.size - in1)


def _ranked_unions(c0: Array, c1: Array, make: Any, scorer: _Scorer) -> None:
    """Unions of the cells with the highest estimated likelihood ratio c1/c0 (add-½ smoothed)."""
    order = np.argsort(-(c1 + 0.5) / (c0 + 0.5), kind="stable")
    regions = [make(tuple(int(i) for i in order[:j])) for j in range(1, order.size)]
    scorer.add(regions, np.cumsum(c0[order])[:-1], np.cumsum(c1[order])[:-1])


def _lr_bins(y0: Array, y1: Array, pooled: Array, scorer: _Scorer) -> None:
    inner = _quantile_points(pooled, LR_BINS - 1)
    edges = np.concatenate([[-np.inf], inner, [np.inf]])
    if edges.size < 3:
        return
    k = edges.size - 1
    b0 = np.clip(np.searchsorted(edges, np.asarray(y0, dtype=np.float64), side="right") - 1, 0, k)
    b1 = np.clip(np.searchsorted(edges, np.asarray(y1, dtype=np.float64), side="right") - 1, 0, k)
    c0 = np.bincount(b0, minlength=k + 1)[:k].astype(np.float64)
    c1 = np.bincount(b1, minlength=k + 1)[:k].astype(np.float64)
    e = tuple(float(v) for v in edges)
    _ranked_unions(c0, c1, lambda bins: InBins(edges=e, bins=bins), scorer)


def _residues(y0: Array, y1: Array, scorer: _Scorer) -> None:
    for m in MODULI:
        r0, r1 = residues_of(y0, m), residues_of(y1, m)
        if np.any(r0 < 0) or np.any(r1 < 0):
            return  # not integer outputs
        c0 = np.bincount(r0, minlength=m).astype(np.float64)
        c1 = np.bincount(r1, minlength=m).astype(np.float64)
        _ranked_unions(c0, c1, lambda res, m=m: Residue(m, res), scorer)


def _discrete(y0: Array, y1: Array, scorer: _Scorer, *, rows: bool) -> None:
    both = np.concatenate([y0, y1])
    if rows:
        flat = both.reshape(both.shape[0], -1)
        cats, inv = np.unique(flat, axis=0, return_inverse=True)
    else:
        cats, inv = np.unique(both, return_inverse=True)
    inv = inv.reshape(-1)
    k = cats.shape[0]
    c0 = np.bincount(inv[: y0.shape[0]], minlength=k)
    c1 = np.bincount(inv[y0.shape[0] :], minlength=k)
    order = np.argsort(-(c1 + 0.5) / (c0 + 0.5), kind="stable")
    regions: list[Region] = []
    for j in range(1, k):
        chosen = cats[order[:j]]
        if rows:
            regions.append(RowsIn(tuple(tuple(r.tolist()) for r in chosen)))
        else:
            regions.append(InSet(tuple(v.item() for v in chosen)))
    scorer.add(regions, np.cumsum(c0[order])[:-1], np.cumsum(c1[order])[:-1])


def _logistic(z: Array, y: Array, *, l2: float = 1e-3, iters: int = 15) -> Array:
    """Weights (last entry = intercept) of an L2-regularised logistic regression, by Newton."""
    x = np.hstack([z, np.ones((z.shape[0], 1))])
    w = np.zeros(x.shape[1])
    reg = l2 * x.shape[0] * np.eye(x.shape[1])
    reg[-1, -1] = 0.0
    for _ in range(iters):
        eta = np.clip(x @ w, -30.0, 30.0)
        mu = 1.0 / (1.0 + np.exp(-eta))
        grad = x.T @ (mu - y) + reg @ w
        hess = (x * (mu * (1.0 - mu))[:, None]).T @ x + reg + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        w = w - step
        if float(np.max(np.abs(step))) < 1e-6:
            break
    return w


def _vector(y0: Array, y1: Array, scorer: _Scorer) -> None:
    f0 = np.asarray(y0, dtype=np.float64).reshape(y0.shape[0], -1)
    f1 = np.asarray(y1, dtype=np.float64).reshape(y1.shape[0], -1)
    both = np.vstack([f0, f1])
    center = both.mean(axis=0)
    scale = both.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (both - center) / scale
    label = np.concatenate([np.zeros(f0.shape[0]), np.ones(f1.shape[0])])
    if f0.shape[1] <= MAX_COORDINATES:
        for j in range(f0.shape[1]):
            probe = _Scorer(scorer.n0, scorer.n1, scorer.delta, scorer.alpha)
            _scalar_thresholds_only(f0[:, j], f1[:, j], probe)
            if isinstance(probe.best, Above | Below):
                coord = Coordinate(j, probe.best)
                scorer.add([coord], [int(coord(f0).sum())], [int(coord(f1).sum())])
    w = _logistic(z, label)[:-1]
    base = LinearScore(
        weights=tuple(float(v) for v in w),
        center=tuple(float(v) for v in center),
        scale=tuple(float(v) for v in scale),
        threshold=0.0,
    )
    g0, g1 = base.score(f0), base.score(f1)
    probe = _Scorer(scorer.n0, scorer.n1, scorer.delta, scorer.alpha)
    _scalar_thresholds_only(g0, g1, probe)
    if isinstance(probe.best, Above | Below):
        side: Literal["above", "below"] = "above" if isinstance(probe.best, Above) else "below"
        region = LinearScore(
            weights=base.weights,
            center=base.center,
            scale=base.scale,
            threshold=probe.best.threshold,
            side=side,
        )
        m = region(np.vstack([f0, f1]))
        scorer.add([region], [int(m[: f0.shape[0]].sum())], [int(m[f0.shape[0] :].sum())])


def _scalar_thresholds_only(g0: Array, g1: Array, scorer: _Scorer) -> None:
    s0, s1 = np.sort(g0), np.sort(g1)
    ts = _threshold_values(np.sort(np.concatenate([s0, s1])))
    tl = [float(t) for t in ts]
    scorer.add(
        [Above(t) for t in tl],
        s0.size - np.searchsorted(s0, ts, side="left"),
        s1.size - np.searchsorted(s1, ts, side="left"),
    )
    scorer.add(
        [Below(t) for t in tl],
        np.searchsorted(s0, ts, side="right"),
        np.searchsorted(s1, ts, side="right"),
    )


def choose_region(y0: Array, y1: Array, *, delta: float, alpha: float) -> tuple[Region, float]:
    """The candidate region with the largest ε lower bound on this (selection) sample.

    ``y0``, ``y1``: outputs on D and D′, first axis = runs. ``alpha``: one-sided level of each
    Clopper–Pearson end. Returns the region and its in-sample bound (optimistic; for information).
    """
    scorer = _Scorer(y0.shape[0], y1.shape[0], delta, alpha)
    vector = y0.ndim > 1 and int(np.prod(y0.shape[1:])) > 1
    numeric = np.issubdtype(y0.dtype, np.number) or y0.dtype == np.bool_
    if y0.dtype == np.bool_:
        y0, y1 = y0.astype(np.int8), y1.astype(np.int8)
    if vector:
        flat = np.concatenate([y0, y1]).reshape(y0.shape[0] + y1.shape[0], -1)
        distinct = np.unique(flat, axis=0).shape[0] if flat.shape[0] else 0
        discrete = _is_discrete(distinct, flat.shape[0])
        if discrete or not numeric:
            _discrete(y0, y1, scorer, rows=True)
        if not discrete and numeric:
            _vector(y0, y1, scorer)
    else:
        y0, y1 = y0.reshape(-1), y1.reshape(-1)
        if not numeric:
            _discrete(y0, y1, scorer, rows=False)
        else:
            distinct = np.unique(np.concatenate([y0, y1])).size
            if _is_discrete(distinct, y0.size + y1.size):
                _discrete(y0, y1, scorer, rows=False)
            _scalar(y0, y1, scorer)
    if scorer.best is None:
        return Above(float("-inf")), 0.0
    return scorer.best, max(scorer.best_eps, 0.0)
