"""The public schema of a dataset, and cleaning at ingestion.

The curator of Dwork, McSherry, Nissim & Smith 2006 keeps the data and answers queries about them;
analysts never see the data, so everything they can rely on (column names, types, bounds,
categories, the privacy unit) is declared by the admin in a *public schema*. Data are cleaned
against that schema once, when they are registered, so that no query can fail, or take a different
path, because of a private value after it has been charged (DESIGN.md, "Errors on private values").

Cleaning policy (documented in ``docs/server.md``), declared per column by its ``missing`` key:
what ingestion does with a cell that has no place in the column's domain:

* numeric columns: missing values (null, NaN, empty or unparsable cells) become the column's
  public ``fill`` value (the middle of the bounds unless given; ``missing = "fill"``, the
  default), or their row is dropped (``missing = "drop"``); ±inf and out-of-range values are
  always clamped to the bounds (what every bounded statistic does anyway);
* categorical columns: values are stored as codes ``0 … k−1`` of the declared categories; a
  missing or undeclared value gets code ``k`` ("other", ``missing = "other"``, the default),
  never a new category, or its row is dropped (``missing = "drop"``);
* a row is dropped only where a column declares ``missing = "drop"``: the registered dataset is
  then the file without those rows, decided by the admin, before any query.

Two column types serve the registry's newer entries (both additive: older schemas read the same):

* ``id``: an opaque identifier of the person a row belongs to (a user id), stored as integer
  codes. It may only be the dataset's ``privacy_unit`` (then one person may have many rows, and
  group-by queries bound each person's contribution, ``dpkit.frame``); registration refuses a
  file with a missing id (``missing = "refuse"``, the default: told to the admin, who sees the
  data), since every row must belong to someone, or drops those rows (``missing = "drop"``);
* ``local``: reports already randomized on users' devices (``dpkit.local``), declared with their
  ``protocol`` (``GRR`` or ``HR``: one integer report per row), the ``epsilon`` each report was
  made with, and the ``categories`` the users' true values are coded by. A missing or malformed
  report is stored as ``-1`` and left out of aggregations (it cannot be repaired without bias).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.server._memo import Memo
from dpkit.server._numbers import real

__all__ = [
    "LOCAL_PROTOCOLS",
    "MISSING",
    "NAME_PATTERN",
    "POLICIES",
    "Column",
    "DatasetSchema",
    "Table",
    "check_name",
    "clean_column",
    "clean_column_mask",
    "dummy_table",
]

NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}")
"""Dataset and column names: a letter, then letters, digits or underscores (at most 63).

Names reach file paths and SQL only as parameters, but a strict pattern also keeps path
traversal (``../x``), control characters and look-alike names out of the ledger and the logs.
"""

_TYPES = ("float", "int", "category", "id", "local")
_COLUMN_KEYS = {"name", "type", "bounds", "fill", "categories", "protocol", "epsilon", "missing"}
LOCAL_PROTOCOLS = ("GRR", "HR")
"""Local protocols whose report is one integer per user, so a column of a CSV file can hold it."""
MISSING = -1
"""The stored code of a missing id or of a missing or malformed local report."""
POLICIES = {
    "float": ("fill", "drop"),
    "int": ("fill", "drop"),
    "category": ("other", "drop"),
    "id": ("refuse", "drop"),
    "local": ("keep", "drop"),
}
"""Per column type, what ingestion may do with a cell that has no place in the column's domain
(its ``missing`` key; the first is the default). ``keep`` (local reports): stored as invalid
and left out of aggregations."""


def check_name(value: object, what: str) -> str:
    """Return ``value`` if it is a valid name, else raise :class:`DataError` (not echoing it)."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise DataError(
            f"{what} must be a name of 1 to 63 letters, digits or underscores starting with a "
            "letter."
        )
    return value


def _finite(value: object, what: str) -> float:
    return real(value, what)


@dataclass(frozen=True)
class Column:
    """One public column: its name, type and either bounds (numeric) or categories."""

    name: str
    type: str
    bounds: tuple[float, float] | None = None
    categories: tuple[str, ...] | None = None
    fill: float | None = None
    protocol: str | None = None
    epsilon: float | None = None
    """For a ``local`` column: the protocol and the ε with which each report was randomized."""
    missing: str = ""
    """What ingestion does with a cell that has no place in the domain (:data:`POLICIES`);
    empty: the type's default."""

    @property
    def policy(self) -> str:
        """The ingestion policy in force (``missing``, or the type's default)."""
        return self.missing or POLICIES[self.type][0]

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Column:
        """Validate a column specification (from TOML or JSON)."""
        if not isinstance(spec, Mapping):
            raise DataError("each column must be a table with name, type and bounds/categories.")
        name = check_name(spec.get("name"), "column name")
        if set(spec) - _COLUMN_KEYS:  # a misspelt key (say, "mising") must not be ignored
            raise DataError(
                f"column {name}: unknown key(s) ({len(set(spec) - _COLUMN_KEYS)}); a column has "
                f"{', '.join(sorted(_COLUMN_KEYS))}."
            )
        kind = spec.get("type", "float")
        if kind not in _TYPES:
            raise DataError(f"column {name}: type must be one of {', '.join(_TYPES)}.")
        missing = spec.get("missing", POLICIES[kind][0])
        if missing not in POLICIES[kind]:
            raise DataError(
                f"column {name}: missing must be one of {', '.join(POLICIES[kind])} for a "
                f"{kind} column."
            )
        # stored only when it is not the default, so that older schemas read the same
        missing = "" if missing == POLICIES[kind][0] else missing
        if kind == "id":
            return cls(name, kind, missing=missing)
        if kind in ("category", "local"):
            cats = spec.get("categories")
            if not isinstance(cats, list | tuple) or not cats:
                raise DataError(f"column {name}: categorical columns need a list of categories.")
            if not all(isinstance(c, str) and 0 < len(c) <= 200 for c in cats):
                raise DataError(f"column {name}: categories must be non-empty strings.")
            if len(set(cats)) != len(cats) or len(cats) > 10_000:
                raise DataError(f"column {name}: categories must be distinct (at most 10,000).")
            if kind == "local":
                return replace(_local_column(name, tuple(cats), spec), missing=missing)
            return cls(name, kind, categories=tuple(cats), missing=missing)
        b = spec.get("bounds")
        if not isinstance(b, list | tuple) or len(b) != 2:
            raise DataError(f"column {name}: numeric columns need bounds = [low, high].")
        lo, hi = _finite(b[0], f"column {name} bounds"), _finite(b[1], f"column {name} bounds")
        if not lo < hi:
            raise DataError(f"column {name}: bounds must satisfy low < high.")
        if not math.isfinite(hi - lo):
            # the dummy's uniform draw (and every width-based scale) overflows; refused here,
            # before the dataset is stored, or each start of the service would fail on it
            raise DataError(f"column {name}: bounds are too far apart (high - low overflows).")
        fill = spec.get("fill")
        f = (lo + hi) / 2 if fill is None else _finite(fill, f"column {name} fill")
        if not lo <= f <= hi:
            raise DataError(f"column {name}: fill must lie within the bounds.")
        if kind == "int":
            f = float(round(f))
        return cls(name, kind, bounds=(lo, hi), fill=f, missing=missing)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the column (public)."""
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.bounds is not None:
            out["bounds"] = list(self.bounds)
            out["fill"] = self.fill
        if self.categories is not None:
            out["categories"] = list(self.categories)
        if self.protocol is not None:
            out["protocol"] = self.protocol
            out["epsilon"] = self.epsilon
        if self.missing:
            out["missing"] = self.missing
        return out

    def oracle(self) -> Any:
        """The :mod:`dpkit.local` frequency oracle of a ``local`` column."""
        from dpkit.local import GRR, HadamardResponse

        assert self.categories is not None and self.epsilon is not None
        cls = GRR if self.protocol == "GRR" else HadamardResponse
        return cls(epsilon=self.epsilon, k=len(self.categories))

    @property
    def report_range(self) -> int:
        """Number of possible reports of a ``local`` column (valid reports are 0 … this − 1)."""
        oracle = self.oracle()
        return int(getattr(oracle, "K", oracle.k))


def _local_column(name: str, cats: tuple[str, ...], spec: Mapping[str, Any]) -> Column:
    protocol = spec.get("protocol")
    if protocol not in LOCAL_PROTOCOLS:
        raise DataError(
            f"column {name}: a local column needs protocol = one of {', '.join(LOCAL_PROTOCOLS)}."
        )
    eps = _finite(spec.get("epsilon"), f"column {name} epsilon")
    if len(cats) < 2 or not 0 < eps <= 50:
        raise DataError(f"column {name}: a local column needs 2+ categories and 0 < epsilon <= 50.")
    col = Column(name, "local", categories=cats, protocol=str(protocol), epsilon=eps)
    col.oracle()  # the protocol calibrates (or refuses) now, at registration
    return col


@dataclass(frozen=True)
class DatasetSchema:
    """The public description of a dataset: name, columns and privacy unit."""

    name: str
    columns: tuple[Column, ...]
    privacy_unit: str = "row"

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> DatasetSchema:
        """Validate a dataset specification (from TOML or JSON)."""
        if not isinstance(spec, Mapping):
            raise DataError("a dataset specification must be a JSON object / TOML table.")
        name = check_name(spec.get("name"), "dataset name")
        cols = spec.get("columns")
        if not isinstance(cols, list | tuple) or not cols or len(cols) > 1000:
            raise DataError(f"dataset {name}: give 1 to 1000 columns.")
        columns = tuple(Column.from_dict(c) for c in cols)
        if len({c.name for c in columns}) != len(columns):
            raise DataError(f"dataset {name}: column names must be distinct.")
        unit = spec.get("privacy_unit", "row")
        ids = [c.name for c in columns if c.type == "id"]
        if unit != "row" and (not isinstance(unit, str) or unit not in ids):
            raise DataError(
                f"dataset {name}: privacy_unit must be 'row' (one row per person) or the name of "
                "a column of type 'id' (whose rows belong to one person)."
            )
        if [u for u in ids if u != unit] or (ids and unit == "row"):
            # An id column named "row" would read as the keyword "row" (one row per person): the
            # row-level statistics would then run on a dataset whose people have several rows.
            raise DataError(
                f"dataset {name}: an 'id' column can only be the privacy_unit (and cannot be "
                "named 'row', which means one row per person)."
            )
        return cls(name, columns, unit)

    def column(self, name: object) -> Column:
        """The column called ``name``; :class:`DataError` if there is none."""
        check_name(name, "column")
        for c in self.columns:
            if c.name == name:
                return c
        raise DataError(f"dataset {self.name} has no column of that name; see its schema.")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the schema (public)."""
        return {
            "name": self.name,
            "privacy_unit": self.privacy_unit,
            "columns": [c.to_dict() for c in self.columns],
        }


def _missing_id(v: object) -> bool:
    """A missing id: null, empty text, or a float NaN (a Parquet float column, or "NaN" in a CSV
    column of numbers). NaN must not become an id: no two NaN are equal, so each of its rows
    would count as a person of its own, whoever they belong to."""
    return v is None or v == "" or (isinstance(v, float) and math.isnan(v))


def clean_column(col: Column, values: Sequence[Any] | npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Clean one column's raw values by the policy of this module (never raises on a value)."""
    return clean_column_mask(col, values)[0]


def clean_column_mask(
    col: Column, values: Sequence[Any] | npt.NDArray[Any]
) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """The cleaned column, and which of its cells had no place in the domain (missing or
    unparsable values, undeclared categories, malformed reports): the cells a ``"drop"``
    policy removes with their rows. Out-of-range numbers are not among them: they are clamped.
    Never raises on a value."""
    if col.type == "id":
        codes: dict[Any, int] = {}
        ids = np.fromiter(
            (MISSING if _missing_id(v) else codes.setdefault(v, len(codes)) for v in values),
            dtype=np.int64,
            count=len(values),
        )
        return ids, ids == MISSING
    if col.type == "local":
        x = np.asarray(values, dtype=np.float64)
        ok = np.isfinite(x) & (x == np.rint(x)) & (x >= 0) & (x < col.report_range)
        return np.where(ok, np.nan_to_num(x), MISSING).astype(np.int64), ~ok
    if col.type == "category":
        assert col.categories is not None
        index = {c: i for i, c in enumerate(col.categories)}
        other = len(col.categories)
        cats = np.fromiter(
            (index.get(v if isinstance(v, str) else str(v), other) if v is not None else other
             for v in values),
            dtype=np.int64,
            count=len(values),
        )  # fmt: skip
        return cats, cats == other
    assert col.bounds is not None and col.fill is not None
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        out = values.astype(np.float64)
    else:
        out = np.empty(len(values), dtype=np.float64)
        for i, v in enumerate(values):
            try:
                out[i] = float(v) if v is not None and not isinstance(v, bool) else math.nan
            except (TypeError, ValueError, OverflowError):
                out[i] = math.nan
    bad = np.isnan(out)
    out[bad] = col.fill
    np.clip(out, col.bounds[0], col.bounds[1], out=out)
    if col.type == "int":
        np.rint(out, out=out)
    return out, bad


@dataclass(frozen=True)
class Table:
    """Cleaned columns of one dataset, all of the same length (held only by the service)."""

    schema: DatasetSchema
    columns: Mapping[str, npt.NDArray[Any]]
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)
    """Deterministic, noise-free results computed from this table (:mod:`._memo`)."""

    @property
    def rows(self) -> int:
        """Number of rows (private: never returned to an analyst)."""
        return len(next(iter(self.columns.values())))


def dummy_table(schema: DatasetSchema, rows: int = 1000) -> Table:
    """Public synthetic data with the schema, for free test queries.

    Values are uniform within the bounds / over the categories, from a seed derived from the
    dataset's name only: they carry no information about the real data.
    """
    seed = int.from_bytes(schema.name.encode()[:16].ljust(16, b"\0"), "little")
    gen = np.random.default_rng(seed)
    cols: dict[str, npt.NDArray[Any]] = {}
    for c in schema.columns:
        if c.type == "id":  # about three rows per unit, so that bounding has work to do
            cols[c.name] = gen.integers(0, max(1, rows // 3), rows)
        elif c.type == "local":
            cols[c.name] = gen.integers(0, c.report_range, rows)
        elif c.type == "category":
            assert c.categories is not None
            cols[c.name] = gen.integers(0, len(c.categories), rows)
        else:
            assert c.bounds is not None
            v = gen.uniform(c.bounds[0], c.bounds[1], rows)
            cols[c.name] = np.rint(v) if c.type == "int" else v
    for values in cols.values():
        # read-only like the stored columns (mapped read-only): a query type that would write
        # into its input fails on the dummy, at pricing, not on the real table after its charge
        values.flags.writeable = False
    return Table(schema, cols)
