"""From exact bounded totals to the released table: key selection, noise, estimates, intervals.

This is the only code that touches noise, and every engine calls it with the same inputs (a
small Polars frame of exact integer totals per key, and per (key, bucket) counts), so Polars and
Spark share every line of privacy code. Everything here is post-processing of exact totals that
were computed before the budget was charged; nothing here can fail because of the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dpkit.frame._aggs import Aggregation, Measure
from dpkit.frame._calibrate import MeasureNoise, NoisePlan
from dpkit.frame._pipeline import ROWS, UNITS, WEIGHT
from dpkit.noise import discrete_gaussian, discrete_laplace

__all__ = ["finish", "measure_column", "public_totals"]

Array = np.ndarray[Any, Any]


def measure_column(m: Measure) -> str:
    return {"rows": ROWS, "units": UNITS}.get(m.kind, m.name)


def public_totals(totals: Any, buckets: Any, public: Any, keys: Sequence[str]) -> tuple[Any, Any]:
    """Totals for exactly the public keys: absent keys get exact zeros (then their own noise)."""
    pl = _pl()
    # a null key value is a group of its own (as in group_by): every key join matches nulls
    t = public.join(totals, on=list(keys), how="left", nulls_equal=True)
    t = t.with_columns([pl.col(c).fill_null(0) for c in totals.columns if c not in keys])
    if buckets is not None:
        buckets = buckets.join(public, on=list(keys), how="semi", nulls_equal=True)
    return t, buckets


def _pl() -> Any:
    from dpkit.frame._engine import polars

    return polars()


def _noise(mn: MeasureNoise, shape: int | tuple[int, ...], gen: Any) -> Array:
    if mn.kind == "laplace":
        z = discrete_laplace(mn.scale, size=shape, rng=gen)
    else:
        z = discrete_gaussian(mn.scale, size=shape, rng=gen)
    out: Array = np.asarray(z, dtype=np.int64)
    return out


def _noisy_scalar(totals: Any, mn: MeasureNoise, gen: Any) -> Array:
    exact = totals[measure_column(mn.measure)].to_numpy().astype(np.int64)
    # Fresh, independent noise for every released key, present in the data or not.
    out: Array = np.ldexp((exact + _noise(mn, exact.size, gen)).astype(np.float64), -mn.exponent)
    return out


def _bucket_matrix(buckets: Any, totals: Any, keys: Sequence[str], m: Measure) -> Array:
    """Exact counts, one row per released key, one column per bucket (leaf or bin)."""
    pl = _pl()
    width = len(m.edges) - 1 if m.edges else m.branching**m.levels
    out = np.zeros((totals.height, width), dtype=np.int64)
    if buckets is None or totals.height == 0:
        return out
    index = totals.select(list(keys)).with_row_index("__i")
    part = buckets.filter(pl.col("__measure") == m.name).join(
        index, on=list(keys), how="inner", nulls_equal=True
    )
    rows = part["__i"].to_numpy().astype(np.int64)
    cols = part["__bucket"].to_numpy().astype(np.int64)
    np.add.at(out, (rows, cols), part["__count"].to_numpy().astype(np.int64))
    return out


def _tree_levels(leaves: Array, branching: int, levels: int) -> list[Array]:
    """Exact node counts per level (level 1 = the root's children … level ``levels`` = leaves)."""
    out = [leaves]
    for _ in range(levels - 1):
        cur = out[0]
        # explicit widths: with no released key (n = 0) a -1 in reshape is ambiguous
        parents = cur.reshape(cur.shape[0], cur.shape[1] // branching, branching)
        out.insert(0, parents.sum(axis=2))
    return out


def _tree_quantiles(noisy: list[Array], agg: Aggregation) -> Array:
    """Walk down the noisy tree: at each node go to the child where the cumulative count
    (negatives clamped to 0) crosses the rank still to find, carried down as the share ``f`` of
    the chosen child that lies below it (``f = q`` at the root); return the chosen leaf's
    midpoint (post-processing)."""
    assert agg.bounds is not None
    lo, hi = agg.bounds
    b, h = agg.branching, agg.levels
    n = noisy[0].shape[0]
    out = np.empty((n, len(agg.qs)))
    rows = np.arange(n)
    for j, q in enumerate(agg.qs):
        node = np.zeros(n, dtype=np.int64)
        share = np.full(n, q)
        for level in range(h):
            nodes = noisy[level].reshape(n, noisy[level].shape[1] // b, b)
            kids = np.clip(nodes[rows, node], 0.0, None)
            total = kids.sum(axis=1)
            cum = np.cumsum(kids, axis=1)
            target = share * total
            choice = np.argmax(cum >= target[:, None] - 1e-12, axis=1)
            middle = np.where(share <= 0.5, (b - 1) // 2, b // 2)
            choice = np.where(total > 0, choice, middle)
            # The rank left inside the chosen child, as a share of its count: the next level
            # searches the same global rank, not the child's own q-quantile.
            before = cum[rows, choice] - kids[rows, choice]
            inside = kids[rows, choice]
            left = (target - before) / np.where(inside > 0, inside, 1.0)
            share = np.where(inside > 0, np.clip(left, 0.0, 1.0), share)
            node = node * b + choice
        width = (hi - lo) / b**h
        out[:, j] = lo + (node + 0.5) * width
    return out


def _tree_intervals(noisy: list[Array], agg: Aggregation, h: float) -> tuple[Array, Array]:
    """(1 − alpha) intervals for the quantiles, valid when every node's noise is within ``h``
    (``h`` at alpha / number of nodes: Bonferroni).

    The prefix count of the first i leaves is a sum of at most (B − 1) nodes per level, so its
    error is at most h times that number; the total count's at most B·h. The true quantile's
    leaf boundary i* (the first with F(i) ≥ q·n) then lies between the first i whose optimistic
    prefix reaches q times the smallest possible n, and the first whose pessimistic prefix
    reaches q times the largest possible n. Post-processing of the released nodes only.
    """
    assert agg.bounds is not None
    lo, hi = agg.bounds
    b, levels = agg.branching, agg.levels
    n_groups, leaves = noisy[-1].shape
    i = np.arange(leaves + 1)
    prefix = np.zeros((n_groups, leaves + 1))
    used = np.zeros(leaves + 1)
    for level in range(levels):
        size = b ** (levels - 1 - level)  # leaves per node at this level
        start = (i // (size * b)) * b if level else np.zeros_like(i)
        stop = i // size
        cs = np.concatenate([np.zeros((n_groups, 1)), np.cumsum(noisy[level], axis=1)], axis=1)
        prefix += cs[:, stop] - cs[:, start]
        used += stop - start
    err = used * h
    total = prefix[:, -1]
    n_lo, n_hi = np.maximum(total - b * h, 0.0), total + b * h
    width = (hi - lo) / leaves
    los, his = np.empty((n_groups, len(agg.qs))), np.empty((n_groups, len(agg.qs)))
    for j, q in enumerate(agg.qs):
        reach_lo = (prefix + err) >= q * n_lo[:, None]
        reach_hi = (prefix - err) >= q * n_hi[:, None]
        i_lo = np.where(reach_lo.any(axis=1), reach_lo.argmax(axis=1), leaves)
        i_hi = np.where(reach_hi.any(axis=1), reach_hi.argmax(axis=1), leaves)
        los[:, j] = lo + np.maximum(i_lo - 1, 0) * width
        his[:, j] = lo + np.maximum(i_hi, 1) * width
    return los, his


def _ratio_box(s: tuple[Array, Array], n: tuple[Array, Array]) -> tuple[Array, Array]:
    """Range of S/N over the box; ±inf where N's range reaches 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        cands = np.stack([s[0] / n[0], s[0] / n[1], s[1] / n[0], s[1] / n[1]])
    ok = n[0] > 0
    lo = np.where(ok, cands.min(axis=0), -np.inf)
    hi = np.where(ok, cands.max(axis=0), np.inf)
    return lo, hi


def finish(
    totals: Any,
    buckets: Any,
    *,
    keys: Sequence[str],
    aggs: Sequence[Aggregation],
    plan: NoisePlan,
    gen: Any,
    alpha: float,
    drop_keys: Sequence[str] = (),
) -> Any:
    """Select keys (private keys only), add noise, estimate; a Polars DataFrame, one row per key.

    Call only after the plan's event has been charged.
    """
    pl = _pl()
    totals = totals.sort(list(keys), nulls_last=True)  # released order carries no data order
    noisy: dict[str, Any] = {}
    sel = plan.selection
    if sel is not None and sel.method == "count":
        # the released count is the selection's noisy count: drawn on every candidate key,
        # thresholded, then the other measures are drawn on the kept keys only
        rows = next(mn for mn in plan.measures if mn.measure.kind == "rows")
        v = _noisy_scalar(totals, rows, gen)
        keep = v >= sel.threshold
        totals = totals.filter(pl.Series(keep, dtype=pl.Boolean))
        noisy[rows.measure.name] = v[keep]
    elif sel is not None:
        keep = sel.keep(totals[UNITS].to_numpy(), totals[WEIGHT].to_numpy(), gen)
        totals = totals.filter(pl.Series(keep, dtype=pl.Boolean))
    for mn in plan.measures:
        m = mn.measure
        if m.name in noisy:
            continue
        if m.kind == "bucket":
            exact = _bucket_matrix(buckets, totals, keys, m)
            if m.edges:
                noisy[m.name] = [(exact + _noise(mn, exact.shape, gen)).astype(np.float64)]
            else:
                lv = _tree_levels(exact, m.branching, m.levels)
                noisy[m.name] = [(x + _noise(mn, x.shape, gen)).astype(np.float64) for x in lv]
        else:
            noisy[m.name] = _noisy_scalar(totals, mn, gen)
    out: dict[str, Any] = {k: totals[k] for k in keys if k not in drop_keys}
    # Post-processing of released values, after the charge: an overflow to ±inf (tiny ε,
    # extreme bounds) is clipped or shown as an infinite interval, never raised as an error
    # that would lose the budget already paid (under -W error, a RuntimeWarning would be).
    with np.errstate(all="ignore"):
        _estimates(out, aggs, plan, noisy, alpha)
    frame = pl.DataFrame(out) if out else pl.DataFrame()
    return frame


def _estimates(
    out: dict[str, Any],
    aggs: Sequence[Aggregation],
    plan: NoisePlan,
    noisy: dict[str, Any],
    alpha: float,
) -> None:
    """Each aggregation's estimate and (1 − alpha) interval from the noisy totals, into ``out``."""
    a_each = alpha
    for agg in aggs:
        ms = agg.measures()
        mns = [plan.of(m) for m in ms]
        if agg.stat in ("count", "count_units", "sum"):
            v = noisy[ms[0].name]
            hw = mns[0].half_width(a_each)
            # a count is an integer plus integer noise (exponent 0): released as one
            out[agg.alias] = v.astype(np.int64) if agg.stat != "sum" else v
            out[f"{agg.alias}_lo"], out[f"{agg.alias}_hi"] = v - hw, v + hw
        elif agg.stat in ("mean", "var", "std"):
            assert agg.bounds is not None
            lo, hi = agg.bounds
            mid, half = lo / 2 + hi / 2, hi / 2 - lo / 2
            k = len(ms)
            hws = [mn.half_width(a_each / k) for mn in mns]  # Bonferroni over the parts
            s1, n = noisy[ms[0].name], noisy[ms[-1].name]
            nb = (n - hws[-1], n + hws[-1])
            r1 = _ratio_box((s1 - hws[0], s1 + hws[0]), nb)
            m1 = np.where(n > 0, s1 / np.maximum(n, 1e-300), 0.0)
            m1 = np.clip(m1, -1.0, 1.0)
            if agg.stat == "mean":
                out[agg.alias] = mid + half * m1
                out[f"{agg.alias}_lo"] = mid + half * np.clip(r1[0], -1.0, 1.0)
                out[f"{agg.alias}_hi"] = mid + half * np.clip(r1[1], -1.0, 1.0)
                continue
            s2 = noisy[ms[1].name]
            m2 = np.where(n > 0, s2 / np.maximum(n, 1e-300), 0.0)
            v = half * half * np.clip(np.clip(m2, 0.0, 1.0) - m1 * m1, 0.0, 1.0)
            r2 = _ratio_box((s2 - hws[1], s2 + hws[1]), nb)
            sq_lo = np.where((r1[0] <= 0) & (r1[1] >= 0), 0.0, np.minimum(r1[0] ** 2, r1[1] ** 2))
            sq_hi = np.maximum(np.clip(r1[0], -1, 1) ** 2, np.clip(r1[1], -1, 1) ** 2)
            vlo = half * half * np.clip(np.clip(r2[0], 0.0, 1.0) - sq_hi, 0.0, 1.0)
            vhi = half * half * np.clip(np.clip(r2[1], 0.0, 1.0) - sq_lo, 0.0, 1.0)
            if agg.stat == "std":
                v, vlo, vhi = np.sqrt(v), np.sqrt(vlo), np.sqrt(vhi)
            out[agg.alias], out[f"{agg.alias}_lo"], out[f"{agg.alias}_hi"] = v, vlo, vhi
        elif agg.stat == "histogram":
            v = noisy[ms[0].name][0]
            hw = mns[0].half_width(a_each)
            for i in range(v.shape[1]):
                out[f"{agg.alias}_{i}"] = v[:, i].astype(np.int64)  # counts: integers
                out[f"{agg.alias}_{i}_lo"] = v[:, i] - hw
                out[f"{agg.alias}_{i}_hi"] = v[:, i] + hw
        else:
            tree = noisy[ms[0].name]
            qv = _tree_quantiles(tree, agg)
            nodes = sum(x.shape[1] for x in tree)
            qlo, qhi = _tree_intervals(tree, agg, mns[0].half_width(a_each / nodes))
            for j, q in enumerate(agg.qs):
                name = f"{agg.alias}_{_qname(q)}"
                out[name], out[f"{name}_lo"], out[f"{name}_hi"] = qv[:, j], qlo[:, j], qhi[:, j]


def _qname(q: float) -> str:
    return f"{q:g}"
