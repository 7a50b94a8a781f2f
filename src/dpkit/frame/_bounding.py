"""Contribution bounding (steps 2–5 of :mod:`dpkit.frame._pipeline`) on prepared rows.

Either one sort and running counts (:func:`sorted_totals`) or a group-by per (unit, key) pair and
a window per unit (:func:`bound`); a unit within every bound keeps all its rows and is summed
from its pairs' totals (:func:`whole_units`), and only the other units' rows are hashed, sorted
and ranked. Which rows survive depends only on each unit's own rows and the release's hash key
(the module docstring of :mod:`dpkit.frame._pipeline` states why that is stable).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpkit.frame._calibrate import Bounding, NoisePlan
from dpkit.frame._engine import polars
from dpkit.frame._pipeline import (
    ALL,
    NPAIRS,
    ROWS,
    UNITS,
    WEIGHT,
    WHOLE,
    G,
    H,
    Layout,
    add_hashes,
    pack_min,
)
from dpkit.frame._selection import weights

__all__ = ["bound", "sort_is_faster", "sorted_totals", "whole_units"]


def _gaussian_weights(plan: NoisePlan) -> bool:
    return plan.selection is not None and plan.selection.method == "gaussian"


def sorted_totals(prep: Any, layout: Layout, plan: NoisePlan, bounding: Bounding) -> Any:
    """Steps 2, 3 and 5 by one sort and linear scans (no group-by per pair, no window).

    Rows sorted by (unit, pair hash, key, row hash): each unit's rows are contiguous, its pairs
    follow one another in pair-hash order (a pair is contiguous: its hash is a function of the
    pair, and the key breaks hash ties), and each pair's rows in row-hash order. A row's rank in
    its pair and its pair's rank in its unit are then differences of running counts, so the
    kept rows are those with both ranks below ``L∞`` and ``L0``: the ``L∞`` smallest row hashes
    of the ``L0`` pairs with the smallest pair hashes, exactly what the group-by plan keeps.
    Equality of consecutive keys is Polars' grouping equality (null = null, NaN = NaN,
    −0.0 = 0.0), so pairs are the groups ``group_by`` forms. Rows equal in every sort column are
    equal in every hashed column, so the order of ties cannot change a sum.
    """
    pl = polars()
    unit, keys = layout.unit, list(layout.keys)
    values = [m.measure.name for m in plan.measures if m.measure.kind == "value"]
    lmax, l0 = bounding.max_rows, bounding.max_groups
    u = pl.col(unit)
    # the first row starts a unit even where its unit is null (a null unit sorts first, and
    # ne_missing(null, shift's null) is false: its rows would have no rank and be dropped)
    new_unit = u.ne_missing(u.shift(1)) | (pl.int_range(pl.len(), dtype=pl.Int64) == 0)
    new_pair = pl.any_horizontal(
        new_unit, *(pl.col(k).ne_missing(pl.col(k).shift(1)) for k in keys)
    )
    rows = prep.sort([unit, G, *keys, H]).with_columns(
        new_unit.alias("__nu"), new_pair.alias("__np")
    )
    idx = pl.int_range(pl.len(), dtype=pl.Int64)
    pair_no = pl.col("__np").cast(pl.Int64).cum_sum()
    rows = rows.with_columns(idx.alias("__i"), pair_no.alias("__p"))
    p, i = pl.col("__p"), pl.col("__i")
    unit_first = pl.when(pl.col("__nu")).then(p).forward_fill()
    rank = [
        (p - unit_first).alias("__gr"),  # the pair's rank in its unit, from 0
        (i - pl.when(pl.col("__np")).then(i).forward_fill()).alias("__rr"),  # row in pair
    ]
    if _gaussian_weights(plan):
        # t = min(pairs of the unit, L0), the keys the unit keeps; its exact weight by look-up
        unit_last = pl.when(pl.col("__nu").shift(-1, fill_value=True)).then(p).backward_fill()
        t = (unit_last - unit_first + 1).clip(0, l0)
        w = weights(l0)
        weight = t.replace_strict(list(range(1, l0 + 1)), w[1:], return_dtype=pl.Int64)
        rank.append(pl.when(pl.col("__np")).then(weight).otherwise(0).alias(WEIGHT))
    else:
        rank.append(pl.lit(0, dtype=pl.Int64).alias(WEIGHT))
    rows = rows.with_columns(rank).filter((pl.col("__gr") < l0) & (pl.col("__rr") < lmax))
    return rows.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias(ROWS),
        *(pl.col(c).sum() for c in values),
        pl.col("__np").sum().cast(pl.Int64).alias(UNITS),
        pl.col(WEIGHT).sum(),
    )


def _clip(pl: Any, total: Any, clip: tuple[int, int] | None) -> Any:
    """A unit's total in a group clamped to its ``unit_total`` (integer units), if it has one."""
    if clip is None:
        return total
    return total.clip(pl.lit(clip[0], dtype=pl.Int64), pl.lit(clip[1], dtype=pl.Int64))


def sort_is_faster() -> bool:
    """Whether the installed Polars runs :func:`sorted_totals` faster than the group-by plan.

    Measured on 10^7 rows, 10^6 units, ~5,000 keys (``benchmarks/frame.py``): Polars 1.x sorts
    in ~2 s and its group-by per pair plus window takes ~5 s; Polars 2.x runs the group-by plan
    on its default engine in ~4 s and the multi-column sort alone in 3.5–5 s.
    """
    version = getattr(polars(), "__version__", "0")
    major = version.split(".")[0]
    return major.isdigit() and int(major) < 2


def bound(
    prep: Any,
    layout: Layout,
    plan: NoisePlan,
    bounding: Bounding,
    *,
    streaming: bool = False,
    sort: bool | None = None,
    seeds: Sequence[int] | None = None,
    occurrence: bool = False,
) -> tuple[Any, Any]:
    """Steps 2–5: returns (per-key totals, per-(key, bucket) counts or None), both lazy.

    ``prep`` from :func:`prepare`; with ``defer=True`` there, ``seeds`` (and ``occurrence``)
    are prepare's, and the deferred hashes are computed here for the rows that reach the
    selection only.

    A unit with at most ``L0`` (unit, key) pairs, at most ``L∞`` rows in each and at most
    ``L1`` rows in all keeps every row whatever the hashes: with an ``L1`` cap, or without keys
    and with ``L∞ > 1``, such units are summed from their pairs' totals and only the other
    units' rows go through the selection (the same rows kept). Which units
    those are is decided per unit from its own rows only.

    The selection's totals without buckets or an ``L1`` cap come from :func:`sorted_totals`
    when ``sort`` is true (default: in memory, where :func:`sort_is_faster`), else from the
    group-by plan, which the streaming engine runs without holding every row. Both keep the
    same rows.
    """
    pl = polars()
    values = [m.measure for m in plan.measures if m.measure.kind == "value"]
    buckets = [m.measure for m in plan.measures if m.measure.kind == "bucket"]
    # Set apart where the selection is costliest: an L1 cap (rows listed, exploded, ranked per
    # unit) or one group with L∞ > 1 (every row sorted by hash for a cap that typical units
    # do not reach). Elsewhere (a packed min per pair, or keys whose pairs are sorted anyway)
    # it would cost more than it saves where most units exceed a bound: a choice from the
    # query's bounds alone, never from the data.
    useful = bounding.max_rows_per_unit is not None or (
        layout.keys == (ALL,) and bounding.max_rows > 1
    )

    def hashed(rows: Any) -> Any:
        if seeds is None:  # prepared with every hash
            return rows
        return add_hashes(rows, layout, seeds, occurrence=occurrence)

    if not useful or buckets or any(plan.of(m).pair_clip is not None for m in values):
        return _bound(hashed(prep), layout, plan, bounding, streaming=streaming, sort=sort)
    if not streaming:
        # read twice below (the pairs, and the rows beyond a bound): prepared once, in memory,
        # as the in-memory engine holds the rows anyway
        prep = prep.collect().lazy()
    unit, keys = layout.unit, list(layout.keys)
    names = [m.name for m in values]
    pairs = whole_units(prep, layout, bounding, names)[0]
    if not streaming:
        pairs = pairs.collect().lazy()  # read twice: the units beyond a bound, and the others
    selected = pairs.filter(~pl.col(WHOLE)).select(unit)
    # a null unit is one unit, as group_by forms it: the joins must match nulls, or its rows
    # would be dropped on either side of the split
    others, _ = _bound(
        hashed(prep.join(selected, on=unit, how="semi", nulls_equal=True)), layout, plan,
        bounding, streaming=streaming, sort=sort,
    )  # fmt: skip
    kept = pairs.filter(pl.col(WHOLE))
    zero = pl.lit(0, dtype=pl.Int64)
    if _gaussian_weights(plan):  # every pair of a whole unit is kept: t is its pairs
        l0 = bounding.max_groups
        w = weights(l0)
        weight = pl.col(NPAIRS).replace_strict(list(range(1, l0 + 1)), w[1:], return_dtype=pl.Int64)
    else:
        weight = zero
    sums = [
        pl.col(ROWS).sum(), *(pl.col(n).sum() for n in names), pl.len().cast(pl.Int64).alias(UNITS)
    ]  # fmt: skip
    weigh = weight.sum().cast(pl.Int64).alias(WEIGHT)
    if layout.keys == (ALL,):  # one constant key: summed without a group-by (none if empty)
        mine = kept.select(*sums, weigh, pl.first(ALL)).filter(pl.col(UNITS) > 0)
    elif _gaussian_weights(plan):
        # a pair's weight is a function of its unit's pairs t: summed per (key, t) first, then
        # weighed on that small table (a look-up on every pair costs Polars more than the
        # extra group-by key)
        per_t = kept.group_by([*keys, NPAIRS]).agg(sums)
        per_t = per_t.with_columns((pl.col(UNITS) * weight).alias(WEIGHT))
        mine = per_t.group_by(keys).agg(pl.col(c).sum() for c in (ROWS, *names, UNITS, WEIGHT))
    else:
        mine = kept.group_by(keys).agg(*sums, weigh)
    order = others.collect_schema().names()
    cast = [pl.col(c).cast(pl.Int64) for c in (ROWS, *names, UNITS, WEIGHT)]
    # a null key is a group of its own, NaN one group: group_by's equality, as in one pass
    both = pl.concat([f.select(*keys, *cast) for f in (others, mine)])
    return both.group_by(keys).agg(pl.all().sum()).select(order), None


def whole_units(
    prep: Any, layout: Layout, bounding: Bounding, names: Sequence[str] = ()
) -> tuple[Any, Any]:
    """(each (unit, key) pair's rows and sums of ``names``, with its unit's number of pairs
    :data:`NPAIRS` and whether every bound keeps all the unit's rows, ``__whole``; the same
    two per unit), both lazy."""
    pl = polars()
    unit, keys = layout.unit, list(layout.keys)
    per_pair = [pl.len().cast(pl.Int64).alias(ROWS), *(pl.col(n).sum() for n in names)]
    if layout.keys == (ALL,):  # no group-by: a unit's one pair holds all its rows
        # grouped by the unit alone (a constant second key costs Polars twice the time)
        pairs = prep.group_by(unit).agg(per_pair)
        pairs = pairs.with_columns(pl.lit(0, dtype=prep.collect_schema()[ALL]).alias(ALL))
        npairs = pl.lit(1, dtype=pl.Int64)
        most = total = pl.col(ROWS)
    else:
        pairs = prep.group_by([unit, *keys]).agg(per_pair)
        # the unit's figures on each of its pairs, by windows (a group-by per unit and a join
        # back would cost a second hash of every pair); a window's groups are group_by's
        npairs = pl.len().cast(pl.Int64).over(unit)
        most, total = pl.col(ROWS).max().over(unit), pl.col(ROWS).sum().over(unit)
    l1 = bounding.max_rows_per_unit
    # a test implied by the L1 test is left out (a window less): a unit's pairs and its
    # largest pair are at most its rows (the choice is the bounds', the flags the same)
    whole = pl.lit(True)
    if l1 is None or bounding.max_groups < l1:
        whole = whole & (npairs <= bounding.max_groups)
    if l1 is None or bounding.max_rows < l1:
        whole = whole & (most <= bounding.max_rows)
    if l1 is not None:
        whole = whole & (total <= l1)
    pairs = pairs.with_columns(npairs.alias(NPAIRS), whole.alias(WHOLE))
    flags = pairs.group_by(unit).agg(pl.col(NPAIRS).first(), pl.col(WHOLE).first())
    return pairs, flags


def _bound(
    prep: Any,
    layout: Layout,
    plan: NoisePlan,
    bounding: Bounding,
    *,
    streaming: bool = False,
    sort: bool | None = None,
) -> tuple[Any, Any]:
    """:func:`bound`'s selection, on every unit given."""
    pl = polars()
    unit, keys = layout.unit, list(layout.keys)
    values = [m.measure for m in plan.measures if m.measure.kind == "value"]
    buckets = [m.measure for m in plan.measures if m.measure.kind == "bucket"]
    lmax = bounding.max_rows
    row_path = bool(buckets) or bounding.max_rows_per_unit is not None
    clips = {m.name: c for m in values if (c := plan.of(m).pair_clip) is not None}
    if sort is None:
        sort = not streaming and sort_is_faster() and not clips  # (sums per pair: the plan)
    if not row_path and sort and not clips:
        return sorted_totals(prep, layout, plan, bounding), None
    listed = [H, *(m.name for m in values), *(m.name for m in buckets)]
    per_pair: list[Any] = [pl.col(G).first(), pl.len().clip(0, lmax).cast(pl.Int64).alias(ROWS)]
    if lmax == 1 and not row_path:
        # One row per (unit, key): the row with the smallest hash, by a plain min over
        # ``hash_top32 · 2^32 + (t + 2^31)`` (|t| ≤ 2^30 fits the low half). Rows whose hashes
        # share the top 32 bits (chance 2^-32 per pair of rows) fall back to the smaller value:
        # still a function of the unit's own rows only.
        per_pair += [
            _clip(pl, pack_min(pl.col(H), pl.col(m.name)), clips.get(m.name)).alias(m.name)
            for m in values
        ]
    else:
        # Rows sorted by hash; an aggregation keeps the order of rows within each group, so
        # head(L∞) is the L∞ smallest hashes (rows with equal hashes are equal).
        prep = prep.sort(H)
        if row_path:
            per_pair += [pl.col(c).head(lmax) for c in listed]
        else:
            per_pair += [
                _clip(pl, pl.col(m.name).head(lmax).sum(), clips.get(m.name)).alias(m.name)
                for m in values
            ]
    pairs = prep.group_by([unit, *keys]).agg(per_pair)
    l0 = bounding.max_groups
    keep = pl.col(G).rank("ordinal").over(unit) <= l0
    if _gaussian_weights(plan):
        # keys kept per unit t = min(keys, L0), from the same window as the L0 cap; then exact
        # integer weights floor(2^20/√t) by table look-up
        w = weights(l0)
        t = pl.len().over(unit).clip(0, l0).cast(pl.Int64)
        pairs = pairs.with_columns(keep.alias("__keep"), t.alias("__t")).filter(pl.col("__keep"))
        weight = pl.col("__t").replace_strict(list(range(1, l0 + 1)), w[1:], return_dtype=pl.Int64)
        pairs = pairs.with_columns(weight.alias(WEIGHT)).drop("__keep", "__t")
    else:
        if layout.keys != (ALL,):  # without keys a unit has one pair, which L0 >= 1 keeps
            pairs = pairs.filter(keep)
        pairs = pairs.with_columns(pl.lit(0, dtype=pl.Int64).alias(WEIGHT))
    if not row_path:
        totals = pairs.group_by(keys).agg(
            pl.col(ROWS).sum(),
            *(pl.col(m.name).sum() for m in values),
            pl.len().cast(pl.Int64).alias(UNITS),
            pl.col(WEIGHT).sum(),
        )
        return totals, None
    per_key = pairs.group_by(keys).agg(pl.len().cast(pl.Int64).alias(UNITS), pl.col(WEIGHT).sum())
    rows = pairs.drop(ROWS).explode(listed)
    if bounding.max_rows_per_unit is not None:
        rows = rows.filter(pl.col(H).rank("ordinal").over(unit) <= bounding.max_rows_per_unit)
    if clips:
        # each unit's total per group, of the rows every other bound kept, clamped
        rows = rows.with_columns(
            _clip(pl, pl.col(n).sum().over([unit, *keys]), c).alias(n) for n, c in clips.items()
        )
        first = pl.int_range(pl.len()).over([unit, *keys]) == 0
        rows = rows.with_columns(
            pl.when(first).then(pl.col(n)).otherwise(0).alias(n) for n in clips
        )
    totals = rows.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias(ROWS), *(pl.col(m.name).sum() for m in values)
    )
    # a null key value is a group of its own: the join matches nulls as group_by does
    totals = per_key.join(totals, on=keys, how="left", nulls_equal=True)
    fill = [pl.col(c).fill_null(0) for c in (ROWS, *(m.name for m in values))]
    totals = totals.with_columns(fill)
    if not buckets:
        return totals, None
    long = pl.concat(
        [
            rows.filter(pl.col(m.name).is_not_null())
            .group_by([*keys, m.name])
            .agg(pl.len().cast(pl.Int64).alias("__count"))
            .select(
                *keys,
                pl.lit(m.name).alias("__measure"),
                pl.col(m.name).cast(pl.Int64).alias("__bucket"),
                "__count",
            )
            for m in buckets
        ]
    )
    return totals, long
