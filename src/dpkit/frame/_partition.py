"""Bounding in passes over partitions of the privacy units, for inputs larger than memory.

Every contribution bound (rows per (unit, key) ``L∞``, keys per unit ``L0``, rows per unit
``L1``) looks at one unit's rows only: which of a unit's rows survive is a function of that unit's
rows and the hash key, never of other units (the stability argument of Wilson et al. 2020,
"Differentially private SQL with bounded user contribution", §3, and of Amin et al. 2019). So if
the units are split into disjoint partitions, *all rows of a unit in one partition*, bounding each
partition on its own keeps exactly the rows that bounding the whole table keeps, and the bounded
aggregates of the whole table are the sums of the partitions' aggregates. Every aggregate is an
integer (row and unit counts, fixed-point sums, selection weights, bucket counts), so those sums
are exact and the result is bit-identical to one pass, for any number of partitions.

A unit's partition is ``hash(unit) mod P`` with dpkit's row hash keyed by the release's secret
key. The partition count ``P`` is configuration: it changes only how much memory and time a
release takes, never a released value, so it cannot depend on or reveal anything about the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpkit.frame._engine import polars
from dpkit.frame._rowhash import hash_key, hash_series

__all__ = ["combine", "unit_partition"]

_SALT = 0x7061727469746E73  # the partition key's second half (a constant: the seed is secret)


def unit_partition(lf: Any, unit: str | Sequence[str], seed: int, part: int, parts: int) -> Any:
    """The rows of ``lf`` whose unit falls in partition ``part`` of ``parts`` (row-wise).

    ``unit`` is the unit column, or the columns whose values every row of a unit shares (where
    each row is its own unit: the row's content, so that identical rows share a partition)."""
    pl = polars()
    if parts == 1:
        return lf
    cols = [unit] if isinstance(unit, str) else list(unit)
    h = hash_series(cols, hash_key(seed, _SALT)).reinterpret(signed=False)
    return lf.filter(h % pl.lit(parts, dtype=pl.UInt64) == pl.lit(part, dtype=pl.UInt64))


def combine(
    totals: Sequence[Any], buckets: Sequence[Any] | None, keys: Sequence[str]
) -> tuple[Any, Any]:
    """Exact integer sums, per key (and per key and bucket), of the partitions' aggregates."""
    pl = polars()
    if len(totals) == 1:
        return totals[0], None if buckets is None else buckets[0]
    # a key absent from every partition stays absent, as in one pass
    out = pl.concat(totals).group_by(list(keys)).agg(pl.all().sum())
    if buckets is None:
        return out, None
    by = [*keys, "__measure", "__bucket"]
    return out, pl.concat(buckets).group_by(by).agg(pl.col("__count").sum())
