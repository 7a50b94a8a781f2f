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
(``_bounding.sorted_totals``: in memory, on Polars 1.x where it is the faster plan) or as a
group-by per pair (a packed ``min`` for ``L∞ = 1``, a sort by hash then ``head`` otherwise) and
a window per unit (the streaming engine, Polars 2.x, buckets and ``L1``).

A unit within every bound (at most ``L0`` pairs, ``L∞`` rows in each, ``L1`` rows in all) keeps
all its rows whatever the hashes: it is summed from its pairs' totals, and only the other units'
rows are hashed (the pair hash always, the row hash where no value was rounded with it), sorted
and ranked (``_bounding.bound``).

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
from dpkit.frame._calibrate import NoisePlan
from dpkit.frame._engine import polars
from dpkit.frame._rowhash import hash_key, hash_series

__all__ = [
    "ALL",
    "WORKING",
    "Layout",
    "add_hashes",
    "bucket_column",
    "check_working",
    "missing_rows",
    "pack_min",
    "prepare",
    "row_hashes",
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

    The row with the smallest top 32 bits of its hash, as ``_bounding.sorted_totals`` keeps the row
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
    and the row hash :data:`H` where no value is rounded with it); ``_bounding.bound`` adds them,
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
