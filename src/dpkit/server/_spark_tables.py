"""Datasets backed by a Spark table: registered with the same public schema, answered by Spark
jobs, noised in the service.

An admin registers such a dataset with ``"spark"`` in place of ``"source"``::

    {"name": "visits", "spark": {"parquet": "visits.parquet"}, "columns": [...], ...}
    {"name": "visits", "spark": {"table": "warehouse.visits"}, "columns": [...], ...}

``parquet``: a Parquet file or folder inside the import directory (on a cluster, a directory
every executor reads at the same path: a shared file system); ``table``: a table of the
session's catalog (Hive metastore, Unity Catalog, Glue). Nothing is copied: the service keeps
the source (``spark.json``) and the schema in its data directory, and every query reads the
table through the *cleaning view*, Spark SQL expressions that give each cell the value the
file ingestion of :mod:`dpkit.server._schema` gives it: numbers clamped into their bounds, a
missing one filled (or its row dropped, ``missing = "drop"``), ``int`` columns rounded half to
even, a category coded by its index among the declared categories or ``k`` ("other"). So no
stored value can make a query fail, and a Spark-backed dataset answers what a registered copy
of the same file answers, noise included, for the same seed (the row-unit statistics, group-by
and the synthesizer are each the library's Spark path, bit-identical to its NumPy/Polars path).

Two differences, both public: an ``id`` column (the privacy unit) is the source's own value,
not a code of order of first appearance (a Spark table has no row order), so the rows a
contribution bound keeps are chosen by another hash than a file-registered copy's (a ``sql``
query reads it as an integer code per distinct id, :class:`_Collected`); and the
statistics with no Spark path (``cov``, ``corr``, ``quantiles``, ``sql``) read the columns
they need to the service's memory first (:func:`query_view`). ``local`` columns are refused.

The table must not change while registered (the service does not snapshot it): answers about
a changed table are still private, but no longer about the data the admin registered.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.server._files import private_dir, private_file
from dpkit.server._ingest import MIN_ROWS
from dpkit.server._schema import MISSING, Column, DatasetSchema, Table
from dpkit.server._spark_jobs import SparkJobs
from dpkit.server._store import MANIFEST

__all__ = [
    "SPARK_FORMAT",
    "SPARK_NATIVE",
    "SparkColumns",
    "is_spark_table",
    "load_spark_table",
    "query_view",
    "spark_source",
    "store_spark_source",
]

SPARK_FORMAT = "spark"
"""The ``format`` of a Spark-backed dataset's manifest (``data.json``): no data file."""
SOURCE_FILE = "spark.json"
SPARK_NATIVE = frozenset(
    {"count", "sum", "mean", "var", "std", "histogram", "group_by", "synthesize"}
)
"""Query types whose exact aggregates Spark computes where the data are; the others read the
columns they need to the service first."""
_TEXT = ("string", "varchar", "char")
_NUMBER = ("byte", "short", "integer", "long", "float", "double", "boolean")


def spark_source(import_dir: Path, raw: object) -> dict[str, str]:
    """Validate a registration's ``"spark"`` field: ``{"parquet": path}`` inside the import
    directory, or ``{"table": name}`` of the session's catalog.

    Examples
    --------
    >>> from pathlib import Path
    >>> spark_source(Path("imports"), {"table": "warehouse.visits"})
    {'table': 'warehouse.visits'}
    >>> spark_source(Path("imports"), {"parquet": "../etc"})
    Traceback (most recent call last):
    ...
    dpkit.errors.DataError: spark parquet must be inside the import directory (no '..').
    """
    if not isinstance(raw, Mapping) or len(raw) != 1 or not set(raw) <= {"parquet", "table"}:
        raise DataError('spark must be {"parquet": "file.parquet"} or {"table": "db.table"}.')
    kind, value = next(iter(raw.items()))
    if not isinstance(value, str) or not 0 < len(value) <= 255 or "\0" in value:
        raise DataError("spark's parquet or table must be a non-empty name.")
    if kind == "table":
        parts = value.split(".")
        if not 1 <= len(parts) <= 3 or not all(p.isidentifier() for p in parts):
            raise DataError("spark table must be a name such as db.table (letters, digits, _).")
        return {"table": value}
    base = import_dir.resolve()
    path = (base / value).resolve()
    if base not in path.parents:
        raise DataError("spark parquet must be inside the import directory (no '..').")
    if not path.exists():
        raise DataError("spark parquet not found in the import directory.")
    return {"parquet": str(path)}


def _read(session: Any, source: Mapping[str, str]) -> Any:
    if "table" in source:
        return session.table(source["table"])
    return session.read.parquet(source["parquet"])


def _type_name(field: Any) -> str:
    return str(field.dataType.typeName())


def _cleaned(f: Any, col: Column, kind: str) -> tuple[Any, Any]:
    """The cleaned cell of ``col`` as a Spark expression, and the expression of "no place in
    the domain" (what a ``drop`` policy drops); the rules of :func:`clean_column_mask`."""
    c = f.col(col.name)
    if col.type == "category":
        assert col.categories is not None
        other = len(col.categories)
        text = c if kind in _TEXT else c.cast("string")
        if kind == "boolean":  # Python's str(True), as the file path compares it; Spark's "true"
            text = f.when(c, f.lit("True")).when(~c, f.lit("False"))
        pairs = [v for i, cat in enumerate(col.categories) for v in (f.lit(cat), f.lit(i))]
        code = f.try_element_at(f.create_map(*pairs), text)  # null where undeclared
        return f.coalesce(code, f.lit(other)).cast("long"), code.isNull()
    if col.type == "id":
        if kind in ("float", "double"):
            # as the file path codes them: NaN is a missing id (no two NaN are the same person),
            # -0.0 and 0.0 one id (equal numbers; their texts "-0.0" and "0.0" would split a unit)
            text = f.when(c == f.lit(0.0), f.lit("0.0")).otherwise(c.cast("string"))
            return text, c.isNull() | f.isnan(c)
        text = c if kind in _TEXT else c.cast("string")
        return text, c.isNull() | (text == f.lit(""))
    assert col.bounds is not None and col.fill is not None
    x = _parsed(f, c) if kind in _TEXT else c.cast("double")
    bad = x.isNull() | f.isnan(x)
    lo, hi = f.lit(col.bounds[0]), f.lit(col.bounds[1])
    value = f.when(bad, f.lit(col.fill)).otherwise(f.least(f.greatest(x, lo), hi))
    if col.type == "int":
        value = f.rint(value)
    return value.cast("double"), bad


# The file path's text numbers (dpkit.server._ingest._parse_numbers): trimmed of the characters
# of dpkit.server._ingest.WHITESPACE, then only this grammar (its NUMBER) is a number. Spark's own
# cast alone reads more ("1d", "INF", "0x1p3", "-infinity") and trims fewer (no-break space...).
_SPACE = (  # Java regex escapes, as Spark's rlike and regexp_replace read them
    r"\t\n\x0B\f\r\x1C-\x20\x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
)
_NUMBER_TEXT = (
    r"^[+-]?([0-9]+\.?[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|inf|Infinity|nan|NaN)$"
)


def _parsed(f: Any, c: Any) -> Any:
    """A text cell as the file path parses it: a double, or null (then filled)."""
    text = f.regexp_replace(c, f"^[{_SPACE}]+|[{_SPACE}]+$", "")
    # NaN in any spelling is missing either way; what is left of the grammar is what Spark's
    # cast reads ("inf" and "Infinity" with a sign, decimal digits), so the cast inside the
    # when never fails, ANSI mode or not
    ok = text.rlike(_NUMBER_TEXT) & ~f.lower(text).contains("nan")
    return f.when(ok, text.cast("double"))


def cleaned_frame(raw: Any, schema: DatasetSchema) -> tuple[Any, Any]:
    """The cleaning view of a Spark table (one Spark DataFrame, lazy), and the expression that
    is true on a row with a missing id where the unit refuses one (checked at registration).

    Refused from the table's schema (no job): a missing column, a ``local`` column, a column
    whose Spark type holds no value of the declared type (dates, structs…).
    """
    from pyspark.sql import functions as f

    types = {fl.name: _type_name(fl) for fl in raw.schema.fields}
    exprs, drop, refuse = [], f.lit(False), f.lit(False)
    for col in schema.columns:
        if col.type == "local":
            raise DataError(f"column {col.name}: local reports cannot be backed by Spark.")
        kind = types.get(col.name)
        if kind is None:
            raise DataError(f"the Spark table has no column {col.name}.")
        allowed = _TEXT + _NUMBER if col.type in ("category", "id") else _NUMBER + _TEXT
        if kind not in allowed and not kind.startswith("decimal"):
            raise DataError(f"column {col.name} is stored as {kind} in the Spark table; it "
                            f"cannot hold a {col.type} column.")  # fmt: skip
        value, bad = _cleaned(f, col, kind)
        exprs.append(value.alias(col.name))
        if col.policy == "drop":
            drop = drop | bad
        elif col.type == "id":
            refuse = refuse | bad
    return raw.where(~drop).select(*exprs), raw.where(~drop).where(refuse)


def store_spark_source(
    jobs: SparkJobs, data_dir: Path, import_dir: Path, spec: Mapping[str, Any]
) -> DatasetSchema:
    """Check a Spark-backed registration and write its files (no data), atomically.

    One Spark job counts the cleaned rows and the rows without a unit; as for files, the admin
    (who sees the data) is told when the table has too few rows or a missing id.
    """
    schema = DatasetSchema.from_dict(spec)
    source = spark_source(import_dir, spec.get("spark"))
    raw = _read(jobs.session(), source)
    frame, unowned = cleaned_frame(raw, schema)
    from pyspark.sql import functions as f

    row = (
        frame.agg(f.count(f.lit(1)).alias("n"))
        .crossJoin(unowned.agg(f.count(f.lit(1)).alias("m")))
        .first()
    )
    if row["m"]:
        raise DataError(
            f"the privacy unit {schema.privacy_unit} has missing values; every row must "
            'belong to a unit: assign those rows, or declare missing = "drop".'
        )
    if row["n"] < MIN_ROWS:
        raise DataError(f"a dataset needs at least {MIN_ROWS} rows to be registered.")
    files = sorted(raw.inputFiles()) if "parquet" in source else []
    folder, tmp = data_dir / schema.name, data_dir / f".{schema.name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    private_dir(tmp)
    manifest = {"format": SPARK_FORMAT, "source": source, "files": len(files)}
    for name, content in ((SOURCE_FILE, source), (MANIFEST, manifest)):
        with private_file(tmp / name) as out:
            out.write(json.dumps(content).encode())
    with private_file(tmp / "schema.json") as out:  # last: the folder is complete with it
        out.write(json.dumps(schema.to_dict()).encode())
    if folder.exists():
        old = data_dir / f".{schema.name}.old"
        os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old)  # a worker's mapping of an older file stays valid until unmapped
    else:
        os.replace(tmp, folder)
    return schema


def is_spark_folder(data_dir: Path, name: str) -> bool:
    """Whether the stored dataset ``name`` is backed by Spark (its manifest says so)."""
    try:
        manifest = json.loads((data_dir / name / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == SPARK_FORMAT


def load_spark_table(jobs: SparkJobs, data_dir: Path, schema: DatasetSchema) -> Table:
    """The registered Spark-backed dataset, as a table of lazy Spark columns (no job)."""
    source = json.loads((data_dir / schema.name / SOURCE_FILE).read_text())
    try:
        frame, _ = cleaned_frame(_read(jobs.session(), source), schema)
    except DataError:
        raise
    except Exception as exc:  # the table is gone or unreadable: this dataset is out of service
        raise DataError(
            f"the Spark table of dataset {schema.name} cannot be read ({type(exc).__name__}); "
            "register it again."
        ) from exc
    return Table(schema, cast(Mapping[str, npt.NDArray[Any]], SparkColumns(frame, schema)))


class SparkColumns(Mapping[str, Any]):
    """A Spark-backed dataset's cleaned columns: each one a one-column Spark DataFrame (what
    :mod:`dpkit.stats` reads on Spark); :meth:`frame` gives several (group-by, synthesis)."""

    def __init__(self, frame: Any, schema: DatasetSchema) -> None:
        self._frame = frame
        self._names = [c.name for c in schema.columns]
        self.ids = frozenset(c.name for c in schema.columns if c.type == "id")

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        return self._frame.select(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def frame(self, names: list[str]) -> Any:
        """The cleaned columns ``names`` as one Spark DataFrame."""
        return self._frame.select(*names)


class _Collected(Mapping[str, Any]):
    """Columns read from Spark to the service on first use, as NumPy arrays (the statistics
    with no Spark path); within the query's job group, so under its time limit."""

    def __init__(self, spark: SparkColumns) -> None:
        self._spark = spark
        self._arrays: dict[str, npt.NDArray[Any]] = {}

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        if name not in self._arrays:
            frame = self._spark[name]
            if hasattr(frame, "toArrow"):  # Spark 4
                values = np.asarray(frame.toArrow().column(0).to_numpy())
            else:  # pragma: no cover - Spark 3.5
                values = frame.toPandas().iloc[:, 0].to_numpy()
            if name in self._spark.ids:
                # the unit as the file path stores it, an int64 code per distinct id (what
                # dpkit.server._queries_sql reads): the source's texts, cast to integers, would
                # fail on the first id that is not one (a data-dependent error) and merge "7"
                # with "07"; coded by Arrow (no fixed-width copy, whose size one long id would
                # set); a missing id was refused or dropped at registration
                import pyarrow as pa  # type: ignore[import-untyped]
                import pyarrow.compute as pc  # type: ignore[import-untyped]

                coded = pc.dictionary_encode(pa.array(values, type=pa.large_string())).indices
                values = np.asarray(pc.fill_null(coded, MISSING).to_numpy(False), np.int64)
            values.flags.writeable = False
            self._arrays[name] = values
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._spark)

    def __len__(self) -> int:
        return len(self._spark)


def is_spark_table(table: Table) -> bool:
    """Whether ``table`` is backed by Spark."""
    return isinstance(table.columns, SparkColumns)


def query_view(table: Table, statistic: str) -> Table:
    """The table a query of type ``statistic`` computes on: Spark columns where its aggregates
    run on Spark, columns read to the service otherwise (same values, same answer)."""
    if statistic in SPARK_NATIVE or not isinstance(table.columns, SparkColumns):
        return table
    return Table(table.schema, _Collected(table.columns), table.memo)
