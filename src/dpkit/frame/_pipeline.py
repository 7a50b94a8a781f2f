"""Contribution bounding and exact bounded aggregates, as one lazy Polars plan.

Steps (each bound public; the order of the issue and of Amin et al. 2019, "Bounding user
contributions", and Wilson et al. 2020, "Differentially private SQL with bounded user
contribution"):

1. *prepare* (row-wise, so it runs per batch on any engine): drop rows with a null/NaN in an
   aggregated column (under ``missing="raise"`` the query has refused such rows before this);
   clamp and map each value to its per-row integer (fixed point, a bucket); hash every row and
   every (unit, key) pair with secret 64-bit keys;
2. *rows per (unit, key)* ``L∞``: keep the ``L∞`` rows with the smallest row hash;
3. *keys per unit* ``L0``: keep the ``L0`` (unit, key) pairs with the smallest pair hash;
4. *rows per unit* ``L1`` (optional): keep the ``L1`` surviving rows with the smallest row hash;
5. exact integer sums per key (and per (key, bucket)).

Steps 2, 3 and 5 without buckets or ``L1`` run either as one sort and running counts
(:func:`sorted_totals`: in memory, on Polars 1.x where it is the faster plan) or as a group-by per
pair (a packed ``min`` for ``L∞ = 1``, a sort by hash then ``head`` otherwise) and a window per
unit (the streaming engine, Polars 2.x, buckets and ``L1``).

A unit within every bound (at most ``L0`` pairs, ``L∞`` rows in each, ``L1`` rows in all) keeps
all its rows whatever the hashes: it is summed from its pairs' totals, and only the other units'
rows are hashed (the pair hash always, the row hash where no value was rounded with it), sorted
and ranked (:func:`bound`).

Which rows survive depends only on that unit's own rows and the key — never on data order or on
other units — so adding or removing one unit changes the bounded table by that unit's bounded
rows only (stability), whatever the hash. The hash is dpkit's own (AES-CMAC over a canonical
encoding, :mod:`dpkit.frame._rowhash`), the same on every engine and version; its key is drawn
from dpkit's secure generator for each release so that nobody can predict, or choose data to
steer, which rows are kept (the guarantee holds for every key). Rows with equal hashes are
equal in every hashed column, so ties cannot change a result.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpkit.errors import DataError
from dpkit.frame._aggs import Measure
from dpkit.frame._calibrate import Bounding, NoisePlan
from dpkit.frame._engine import polars
from dpkit.frame._rowhash import hash_key, hash_series
from dpkit.frame._selection import weights

__all__ = [
    "ALL",
    "WORKING",
    "Layout",
    "add_hashes",
    "bound",
    "bucket_column",
    "check_working",
    "missing_rows",
    "pack_min",
    "prepare",
    "row_hashes",
    "sort_is_faster",
    "sorted_totals",
]

ALL = "__all"  # the constant key of an aggregate without group-by
H, G, UNITS, ROWS, WEIGHT = "__h", "__g", "__units", "__rows", "__weight"
OCC = "__occ"  # a row's occurrence number among identical rows (each row its own unit)
NPAIRS = "__npairs"  # a unit's number of (unit, key) pairs
WHOLE = "__whole"  # whether every bound keeps all of a unit's rows
# Every column the bounding (on either engine) and the release write beside the keys and values:
# a key or value of one of these names would be overwritten, or taken for it (a key named ALL
# made a grouped query one without keys, whose L0 is never applied), so they are refused as
# names of keys and aggregated columns (:func:`check_working`), from the schema alone.
WORKING = frozenset(
    {ALL, H, G, UNITS, ROWS, WEIGHT, OCC, NPAIRS, WHOLE}
    | {"__nu", "__np", "__i", "__p", "__gr", "__rr", "__keep", "__t"}  # the selection's
    | {"__measure", "__bucket", "__count", "__missing"}  # buckets and the checks
    | {"__groups", "__most", "__rn"}  # the Spark engine's
)


@dataclass(frozen=True)
class Layout:
    """Column roles in a query."""

    unit: str
    keys: tuple[str, ...]
    values: tuple[str, ...]  # data columns read by aggregations


_LOW = 1 << 32
_HALF = 1 << 31


def pack_min(h: Any, t: Any) -> Any:
    """min over a group of ``(h // 2^32) · 2^32 + t + 2^31``, unpacked back to ``t``.

    The row with the smallest top 32 bits of its hash, as :func:`sorted_totals` keeps the row
    with the smallest hash; two rows of one pair sharing those bits (chance 2^-32 per pair of
    rows) give the smaller ``t`` here — still a function of the unit's own rows only."""
    # |t| < 2^31, so t + 2^31 fills the low half exactly: the packing is a mask and an or, the
    # unpacking a mask (the same integers as floor division, at a fraction of its cost)
    pl = polars()
    packed = (h & pl.lit(-_LOW, dtype=pl.Int64)) | (t + _HALF)
    return (packed.min() & pl.lit(_LOW - 1, dtype=pl.Int64)) - _HALF


def check_working(columns: Sequence[str], measures: Sequence[Measure]) -> None:
    """Refuse keys and aggregated ``columns`` named like a working column (:data:`WORKING`) or
    like a ``measures``' fixed-point column: from the query's names alone, before any charge."""
    taken = WORKING | {m.name for m in measures}
    # and the Spark engine's per-measure columns before rounding, __y0, __y1, ...
    if any(c in taken or re.fullmatch(r"__y[0-9]+", c) for c in columns):
        raise DataError(
            "a key or aggregated column is named like one of the bounding's working columns "
            "(such as '__all', '__h', '__rows', or a value's '__plain_...'); rename it."
        )


def missing_rows(values: Sequence[str]) -> Any:
    """The number of rows with a null or NaN in any of ``values`` (a Polars expression).

    The same test as the filter in :func:`prepare`, so that ``missing="raise"`` refuses exactly
    the tables from which ``"drop"`` would remove a row.
    """
    pl = polars()
    bad = [pl.col(c).is_null() | pl.col(c).cast(pl.Float64).is_nan() for c in values]
    return pl.any_horizontal(bad).sum()


def bucket_column(m: Measure) -> str:
    return m.name


def _row_int(pl: Any, m: Measure, k: int) -> Any:
    """The per-row integer of a value measure: f(clip(x)) · 2**k rounded, clipped to its range.

    Rounding is stochastic, ``floor(y + u)`` with ``u`` uniform in [0, 1) taken from the low 32
    bits of the row's keyed hash (the top bits order rows for bounding): unbiased, so the
    rounding error of a sum of n rows has mean 0 and sd ≤ √n/2 units (1/32 of the ≈2^20-unit
    noise even at the 2^32-row limit). Plain ``floor`` lost up to one unit per row, the same
    way on every row: a sum over 10^7 rows was biased by several noise widths, outside its
    interval.
    """
    assert m.bounds is not None and m.column is not None
    lo, hi = m.bounds
    x = pl.col(m.column).cast(pl.Float64).clip(lo, hi)
    if m.transform == "plain":
        f, flo, fhi = x, lo, hi
    else:
        mid = lo / 2 + hi / 2
        inv = 2.0 / (hi - lo) if math.isfinite(hi - lo) else 1.0 / (hi / 2 - lo / 2)
        f = (x - mid) * inv
        flo, fhi = -1.0, 1.0
        if m.transform == "square":
            f, flo = f * f, 0.0
    t_lo, t_hi = math.floor(math.ldexp(flo, k)), math.floor(math.ldexp(fhi, k))
    u = ((pl.col(H) & pl.lit(_LOW - 1, dtype=pl.Int64)).cast(pl.Float64) + 0.5) * 2.0**-32
    # The final clip makes the range (hence the sensitivity) exact whatever the float rounding.
    return (f * math.ldexp(1.0, k) + u).floor().cast(pl.Int64).clip(t_lo, t_hi)


def _bucket(pl: Any, m: Measure) -> Any:
    assert m.column is not None
    x = pl.col(m.column).cast(pl.Float64)
    if m.edges:
        e = m.edges
        inside = (x >= e[0]) & (x <= e[-1])
        idx = pl.sum_horizontal([(x >= v).cast(pl.Int64) for v in e[1:-1]]) if len(e) > 2 else 0
        return pl.when(inside).then(pl.lit(idx) if isinstance(idx, int) else idx).cast(pl.Int64)
    assert m.bounds is not None
    lo, hi = m.bounds
    leaves = m.branching**m.levels
    leaf = ((x.clip(lo, hi) - lo) * (leaves / (hi - lo))).floor().cast(pl.Int64)
    return leaf.clip(0, leaves - 1)


def prepare(
    lf: Any,
    layout: Layout,
    plan: NoisePlan,
    seeds: Sequence[int],
    *,
    own_unit: bool,
    occurrence: bool = False,
    defer: bool = False,
) -> Any:
    """Step 1: row-wise; the same function runs on each Arrow batch of the Spark engine.

    ``defer``: the hashes only the selection reads are left out (the pair hash :data:`G`,
    and the row hash :data:`H` where no value is rounded with it); :func:`bound` adds them,
    by :func:`add_hashes`, to the rows of units beyond a bound only. They are the same
    functions of the same columns either way, so the same rows are kept.

    Where each row is its own unit (``own_unit``: numbered here; ``occurrence``: numbered by the
    caller, with an :data:`OCC` column), the unit column (a row number given when the query was
    made, before any step) only tells rows apart (one row per unit: every bound keeps it). The
    row hash, which rounds the row's values, then takes the row's occurrence number among
    identical rows instead of its position: removing one row
    removes one (row, occurrence) and leaves every other row's hash and integers unchanged, for
    every hash key and whatever the data order (a position would renumber all later rows).
    """
    pl = polars()
    content = [*layout.keys, *layout.values]
    if own_unit:
        lf = lf.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over(content).alias(OCC))
    if layout.values:
        ok = [pl.col(c).is_not_null() for c in layout.values]
        ok += [pl.col(c).cast(pl.Float64).is_nan().not_() for c in layout.values]
        lf = lf.filter(pl.all_horizontal(ok))
    occ = own_unit or occurrence
    # first: value measures round with the row hash
    hashes = row_hashes(layout, seeds, occurrence=occ)
    late = defer and not layout.values  # H reads the values: computed now where there are any
    lf = lf.with_columns(hashes if not defer else [] if late else hashes[:1])
    cols: list[Any] = []
    for mn in plan.measures:
        m = mn.measure
        if m.kind == "value":
            cols.append(_row_int(pl, m, mn.exponent).alias(m.name))
        elif m.kind == "bucket":
            cols.append(_bucket(pl, m).alias(m.name))
    keep = [layout.unit, *layout.keys]
    if defer:  # what add_hashes reads: the occurrence number, if H is still to come
        keep += [OCC] if late and occ else []
        keep += [] if late else [H]
    else:
        keep += [H, G]
    lf = lf.with_columns(cols).select([*keep, *(c.meta.output_name() for c in cols)])
    return lf.with_columns(
        _canonical(pl, k, t)
        for k, t in lf.collect_schema().items()
        if k in layout.keys and t.is_float()
    )


def row_hashes(layout: Layout, seeds: Sequence[int], *, occurrence: bool) -> list[Any]:
    """Step 1's two keyed hashes, as Polars expressions: :data:`H` of the row (its unit, or its
    :data:`OCC` number where each row is its own unit, its keys and values) and :data:`G` of
    its (unit, key) pair; each under its own key from ``seeds``."""
    s = [int(v) for v in seeds]
    hashed = [OCC if occurrence else layout.unit, *layout.keys, *layout.values]
    return [
        hash_series(hashed, hash_key(s[0], s[3])).alias(H),
        hash_series([layout.unit, *layout.keys], hash_key(s[1], s[3])).alias(G),
    ]


def add_hashes(lf: Any, layout: Layout, seeds: Sequence[int], *, occurrence: bool) -> Any:
    """The hashes :func:`prepare` deferred (``defer=True``), added to ``lf``'s rows: :data:`G`,
    and :data:`H` where it is not there; :data:`OCC` is then dropped."""
    names = lf.collect_schema().names()
    hashes = row_hashes(layout, seeds, occurrence=occurrence)
    lf = lf.with_columns(hashes[1:] if H in names else hashes)
    return lf.drop(OCC) if OCC in names else lf


def _canonical(pl: Any, key: str, dtype: Any) -> Any:
    """A float key with one sign of zero and one NaN: −0.0 and 0.0 (and NaNs) are one group,
    and its released label must not be the sign or payload some person's row happened to have
    (the label a group keeps is the first row's, in hash or data order)."""
    c = pl.col(key)
    zero, nan = pl.lit(0.0, dtype=dtype), pl.lit(float("nan"), dtype=dtype)
    return pl.when(c == 0).then(zero).when(c.is_nan()).then(nan).otherwise(c).alias(key)


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
