"""Public table metadata: privacy units, contribution bounds, column bounds, types, key sets.

Everything a SQL query's privacy analysis needs is declared here, by the data holder, before any
query: it is *public* (an analyst may read it), and it is the only thing besides the query text
that decides whether a query is accepted. Nothing here is ever read from the data.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpkit.errors import DataError

__all__ = ["Catalog", "Column", "Table", "load_catalog"]

TYPES = ("int", "float", "string", "boolean", "date", "datetime", "unknown")
NUMERIC = ("int", "float", "boolean")


def _positive(value: object, name: str, table: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"table {table!r}: {name} must be a positive int.")
    return value


@dataclass(frozen=True)
class Column:
    """One column's public metadata.

    Parameters
    ----------
    name : str
        Its name in the table.
    type : {"int", "float", "string", "boolean", "date", "datetime", "unknown"}
        Aggregates (SUM, AVG, …) read only numeric columns (int, float, boolean).
    bounds : (float, float), optional
        The public range of its values: values outside are clamped to it before any expression
        or aggregate reads them. A numeric column without bounds can be counted, filtered and
        grouped by, not summed.
    nullable : bool
        Whether NULLs may occur (they are never refused: SQL aggregates skip them).
    keys : sequence, optional
        The public set of its values: GROUP BY this column releases exactly these keys (each
        with fresh noise; absent ones get noisy zeros), with no budget spent on selecting keys.
    """

    name: str
    type: str = "float"
    bounds: tuple[float, float] | None = None
    nullable: bool = False
    keys: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DataError("a column name must be a non-empty str.")
        if self.type not in TYPES:
            raise DataError(f"column {self.name!r}: type must be one of {list(TYPES)}.")
        if self.bounds is not None:
            try:
                lo, hi = (float(b) for b in self.bounds)
            except (TypeError, ValueError):
                raise DataError(f"column {self.name!r}: bounds must be two numbers.") from None
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise DataError(f"column {self.name!r}: bounds must be finite with lower < upper.")
            object.__setattr__(self, "bounds", (lo, hi))
        if self.keys is not None:
            keys = tuple(self.keys)
            if not keys or len(set(keys)) != len(keys):
                raise DataError(f"column {self.name!r}: keys must be a non-empty list, unique.")
            object.__setattr__(self, "keys", keys)

    @property
    def numeric(self) -> bool:
        return self.type in NUMERIC


@dataclass(frozen=True)
class Table:
    """One table's public metadata.

    Parameters
    ----------
    name : str
        The name queries use in ``FROM``.
    columns : sequence of Column
        Its columns (a query may read no other).
    privacy_unit : str, optional
        The column naming whom a row belongs to; neighbouring tables differ in all of one
        unit's rows. ``None`` with ``row_privacy=True``: each row is its own unit.
    row_privacy : bool
        Each row is its own unit (no unit column).
    max_groups : int
        L0: groups (keys) a unit may contribute to in one query.
    max_rows : int
        L∞: rows a unit may contribute to one group.
    max_rows_per_unit : int, optional
        L1: rows a unit may contribute in all.
    public : bool
        A public table (its content is not protected): private tables may be joined to it, and
        its columns' values may serve as public keys.
    """

    name: str
    columns: Sequence[Column] = ()
    privacy_unit: str | None = None
    row_privacy: bool = False
    max_groups: int = 1
    max_rows: int = 1
    max_rows_per_unit: int | None = None
    public: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DataError("a table name must be a non-empty str.")
        cols = tuple(self.columns)
        if not all(isinstance(c, Column) for c in cols):
            raise DataError(f"table {self.name!r}: columns must be dpkit.sql.Column objects.")
        names = [c.name.lower() for c in cols]
        if len(set(names)) != len(names):
            raise DataError(f"table {self.name!r}: column names must be unique.")
        object.__setattr__(self, "columns", cols)
        _positive(self.max_groups, "max_groups", self.name)
        _positive(self.max_rows, "max_rows", self.name)
        if self.max_rows_per_unit is not None:
            _positive(self.max_rows_per_unit, "max_rows_per_unit", self.name)
        if self.public:
            return
        if self.privacy_unit is None and not self.row_privacy:
            raise DataError(
                f"table {self.name!r}: declare its privacy_unit column, or row_privacy=True "
                "(each row its own unit), or public=True."
            )
        if self.privacy_unit is not None and self.row_privacy:
            raise DataError(
                f"table {self.name!r}: privacy_unit and row_privacy exclude each other."
            )
        if self.privacy_unit is not None and self.privacy_unit.lower() not in names:
            raise DataError(f"table {self.name!r}: its privacy_unit is not one of its columns.")

    def column(self, name: str) -> Column | None:
        """The column of that name (SQL identifiers are case-insensitive), or None."""
        for c in self.columns:
            if c.name.lower() == name.lower():
                return c
        return None


@dataclass(frozen=True)
class Catalog:
    """The tables SQL queries may read, with their public metadata.

    Examples
    --------
    >>> from dpkit.sql import Catalog, Column, Table
    >>> cat = Catalog([Table("visits", privacy_unit="user", max_groups=2, max_rows=3, columns=[
    ...     Column("user", "int"), Column("site", "string", keys=["north", "south"]),
    ...     Column("minutes", "float", bounds=(0, 120))])])
    >>> cat.table("VISITS").max_rows
    3
    """

    tables: tuple[Table, ...] = field(default_factory=tuple)

    def __init__(self, tables: Iterable[Table] = ()) -> None:
        ts = tuple(tables)
        if not all(isinstance(t, Table) for t in ts):
            raise DataError("a Catalog holds dpkit.sql.Table objects.")
        names = [t.name.lower() for t in ts]
        if len(set(names)) != len(names):
            raise DataError("table names in a catalog must be unique.")
        object.__setattr__(self, "tables", ts)

    def table(self, name: str) -> Table | None:
        """The table of that name (case-insensitive), or None."""
        for t in self.tables:
            if t.name.lower() == name.lower():
                return t
        return None

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Catalog:
        """A catalog from a mapping ``{"tables": {name: {...}}}`` (the TOML layout, see
        :func:`load_catalog`)."""
        tables = spec.get("tables")
        if not isinstance(tables, Mapping) or not tables:
            raise DataError("metadata needs a [tables.NAME] section per table.")
        return cls(_table(str(name), t) for name, t in tables.items())


_TABLE_KEYS = {
    "privacy_unit",
    "row_privacy",
    "max_groups",
    "max_rows",
    "max_rows_per_unit",
    "public",
    "columns",
}
_COLUMN_KEYS = {"type", "bounds", "lower", "upper", "nullable", "keys"}


def _table(name: str, spec: object) -> Table:
    if not isinstance(spec, Mapping):
        raise DataError(f"table {name!r}: its metadata must be a table of settings.")
    unknown = sorted(set(spec) - _TABLE_KEYS)
    if unknown:
        raise DataError(
            f"table {name!r}: unknown setting(s) {unknown}; known: {sorted(_TABLE_KEYS)}."
        )
    cols = spec.get("columns", {})
    if not isinstance(cols, Mapping):
        raise DataError(f"table {name!r}: columns must map names to settings.")
    return Table(
        name,
        columns=tuple(_column(name, str(c), s) for c, s in cols.items()),
        privacy_unit=spec.get("privacy_unit"),
        row_privacy=bool(spec.get("row_privacy", False)),
        max_groups=spec.get("max_groups", 1),
        max_rows=spec.get("max_rows", 1),
        max_rows_per_unit=spec.get("max_rows_per_unit"),
        public=bool(spec.get("public", False)),
    )


def _column(table: str, name: str, spec: object) -> Column:
    if isinstance(spec, str):
        return Column(name, spec)
    if not isinstance(spec, Mapping):
        raise DataError(f"table {table!r}, column {name!r}: settings must be a table or a type.")
    unknown = sorted(set(spec) - _COLUMN_KEYS)
    if unknown:
        raise DataError(f"table {table!r}, column {name!r}: unknown setting(s) {unknown}.")
    bounds: Sequence[float] | None = spec.get("bounds")
    if bounds is None and ("lower" in spec or "upper" in spec):
        bounds = (spec.get("lower"), spec.get("upper"))  # type: ignore[assignment]
    return Column(
        name,
        str(spec.get("type", "float")),
        bounds=None if bounds is None else tuple(bounds),  # type: ignore[arg-type]
        nullable=bool(spec.get("nullable", False)),
        keys=None if spec.get("keys") is None else tuple(spec["keys"]),
    )


def load_catalog(path: str | Path) -> Catalog:
    """Read a catalog from a TOML file, or from SmartNoise SQL's YAML (``.yaml``/``.yml``).

    TOML layout::

        [tables.pums]
        privacy_unit = "pid"        # or row_privacy = true, or public = true
        max_groups = 1              # L0
        max_rows = 1                # L∞, rows per unit and group
        # max_rows_per_unit = 5     # L1
        [tables.pums.columns]
        pid = "int"
        age = { type = "int", bounds = [0, 100] }
        sex = { type = "string", keys = ["0", "1"] }
        income = { type = "float", lower = 0, upper = 500000, nullable = true }
    """
    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml"):
        from dpkit.sql._smartnoise import read_smartnoise_yaml

        return read_smartnoise_yaml(p)
    try:
        spec = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read the metadata file ({type(exc).__name__}).") from None
    return Catalog.from_dict(spec)
