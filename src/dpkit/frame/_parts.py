"""Disjoint parts of a query's privacy units, for parallel composition (``Query.partition_by``).

Each unit is put in one part by construction: the part of the first key, in the order the
caller gave the keys, that any of the unit's rows carries in the partition column; the unit's
rows with another key are dropped from every part. Which part a unit is in, and which of its
rows are kept, depend on that unit's rows only, so adding or removing one unit changes one part
and no other: the condition of parallel composition (McSherry 2009, "Privacy integrated
queries"), made true by the code rather than promised by the caller. Rows whose key is not
among the keys are in no part. The keys are public (given, never read from the data).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dpkit.accounting import DisjointParts, Neighbouring
from dpkit.errors import DataError
from dpkit.frame._engine import polars
from dpkit.frame._table import RESERVED, UNIT_ID, Table, check_unreserved, schema_names

if TYPE_CHECKING:
    from dpkit.accounting import Accountant

__all__ = ["Partitions"]

_PART = f"{RESERVED}part"  # the row's key's position among the keys (null: in no part)
_HOME = f"{RESERVED}home"  # the unit's part: the smallest position over its rows


def _check_keys(keys: object) -> tuple[Hashable, ...]:
    if isinstance(keys, str | bytes):
        raise DataError("keys must be a sequence of the partition column's values.")
    try:
        out: tuple[Hashable, ...] = tuple(keys)  # type: ignore[arg-type]
    except TypeError:
        raise DataError("keys must be a sequence of the partition column's values.") from None
    if not out:
        raise DataError("partition_by needs at least one key.")
    if any(k is None for k in out):
        raise DataError("partition keys may not be None.")
    seen: set[tuple[type, object]] = set()
    for k in out:
        try:
            seen.add((type(k), k))  # by type and value: 1 and True are different keys
        except TypeError:
            raise DataError("partition keys must be hashable values.") from None
    if len(seen) != len(out):
        raise DataError("partition keys must be distinct.")
    return out


class Partitions(DisjointParts):
    """A query's units split into disjoint parts by a public key column (see the module).

    Made by :meth:`dpkit.frame.Query.partition_by`; pass it to
    :meth:`dpkit.accounting.Accountant.parallel`, which returns each part as a
    :class:`~dpkit.frame.Query` whose releases are paid from that part's budget.
    """

    def __init__(
        self, table: Table, column: str, keys: object, query: Callable[[Table], Any]
    ) -> None:
        if table.spark:
            raise DataError(
                "partition_by runs on Polars frames; on Spark, filter by the key with Spark "
                "and charge each part in full."
            )
        if not isinstance(column, str):
            raise DataError("partition_by needs a column name (str).")
        check_unreserved([column], "partition_by")
        if column not in schema_names(table.data, "partition_by"):
            raise DataError("partition_by names a column the table does not have.")
        self._table = table
        self._query = query  # a Query of a table (given by Query: this module cannot import it)
        self._column = column
        self._keys = _check_keys(keys)
        pl = polars()
        col = pl.col(column)
        position: Any = pl.lit(None, dtype=pl.Int64)
        for i in reversed(range(len(self._keys))):  # the first matching key wins
            position = pl.when(col.eq(pl.lit(self._keys[i]))).then(pl.lit(i)).otherwise(position)
        # keys the column cannot be compared with fail on every row: refuse them now, before
        # Accountant.parallel charges (from the column's type on an empty frame, not the data)
        dtype = table.data.collect_schema()[column]
        try:
            pl.DataFrame(schema={column: dtype}).lazy().select(position).collect()
        except Exception:
            raise DataError(
                "partition_by keys cannot be compared with the partition column's type."
            ) from None
        lf = table.data.with_columns(position.alias(_PART))
        # each unit's part is a function of that unit's rows only (a window over its rows)
        self._data = lf.with_columns(pl.col(_PART).min().over(UNIT_ID).alias(_HOME))

    @property
    def keys(self) -> tuple[Hashable, ...]:
        return self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._keys)

    @property
    def neighbouring(self) -> Neighbouring:
        """The table's relation: its releases declare it (a replace-one table is refused)."""
        return self._table.neighbouring

    def bind(self, key: Hashable, accountant: Accountant) -> Any:
        """Part ``key`` as a :class:`~dpkit.frame.Query` whose releases ``accountant`` pays."""
        matches = [i for i, k in enumerate(self._keys) if type(k) is type(key) and k == key]
        if not matches:
            raise DataError("no part has this key.")
        pl = polars()
        i = matches[0]
        rows = self._data.filter((pl.col(_HOME) == i) & (pl.col(_PART) == i)).drop(_PART, _HOME)
        step = f"part {i + 1} of {len(self._keys)} by {self._column}"
        return self._query(replace(self._table.derive(rows, step), accountant=accountant))
