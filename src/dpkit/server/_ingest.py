"""Reading an admin's CSV or Parquet file into a cleaned :class:`Table`, and storing it.

Only the admin registers data, from a file under the configured import directory; the path is
resolved and must stay inside that directory (no ``..``, no symbolic link out of it). Cleaning
follows the policy each column declares (``missing``: fill, map to ``(other)``, or drop the
row; :mod:`dpkit.server._schema`), so that no stored value can make a query fail. Cleaned
columns are stored once, as one column file per dataset in the service's data directory, which
every worker maps read-only (:mod:`dpkit.server._store`).

The file is read with Polars (already the engine of the service's ``group_by`` and ``sql``
queries), with the rules the service has always applied, so that the same file gives the same
stored values bit for bit: a CSV file is read as text only (an empty field is an empty text, not
a null; no text such as ``NA`` is taken for a null), numeric columns are parsed by one fixed
grammar, categories are coded against the declared list, and ids are numbered in order of first
appearance.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.server._csv_rows import csv_records
from dpkit.server._schema import MISSING, Column, DatasetSchema, Table, clean_column_mask
from dpkit.server._store import load_table, store_table

__all__ = ["load_table", "read_source", "resolve_source", "store_table"]

MIN_ROWS = 2
"""Registration refuses fewer rows: the statistics need a non-empty array, and the admin (who
sees the data) is the one told, before any analyst can query it."""


def resolve_source(import_dir: Path, source: object) -> Path:
    """The file ``source`` names inside ``import_dir``; :class:`DataError` if it escapes it."""
    if not isinstance(source, str) or not source or "\0" in source or len(source) > 255:
        raise DataError("source must be a relative file name inside the import directory.")
    base = import_dir.resolve()
    path = (base / source).resolve()
    if base not in path.parents:
        raise DataError("source must be a file inside the import directory (no '..').")
    if path.suffix.lower() not in (".csv", ".parquet"):
        raise DataError("source must be a .csv or .parquet file.")
    if not path.is_file():
        raise DataError("source file not found in the import directory.")
    return path


def read_source(path: Path, schema: DatasetSchema) -> Table:
    """Read the schema's columns from a CSV or Parquet file and clean them."""
    try:
        import polars as pl
    except ImportError as exc:  # pragma: no cover - the server extra installs it
        raise ImportError("reading datasets needs polars: pip install 'dpkit[server]'") from exc
    names = [c.name for c in schema.columns]
    csv = path.suffix.lower() == ".csv"
    # blank lines skipped, lines of another length refused (its own message), as always
    blank_before_header, records = csv_records(path) if csv else (0, None)
    try:
        if csv:
            # Every column is read as text, then parsed by the cleaning policy: a stray value in a
            # numeric column must become missing, not fail the whole file or change its type.
            frame = pl.read_csv(
                path,
                columns=names,
                infer_schema=False,  # all text
                null_values=None,
                raise_if_empty=True,
                truncate_ragged_lines=False,
                skip_lines=blank_before_header,
                **_empty_is_text(pl),
            )
            assert records is not None
            if len(records) != frame.height:
                raise ValueError
            if not bool(np.all(records)):
                frame = frame.filter(pl.Series(records))
        else:
            frame = pl.read_parquet(path, columns=names)
        if frame.columns != names or frame.height != _column_lengths(frame):
            raise ValueError
    except (pl.exceptions.PolarsError, ValueError, KeyError, OSError) as exc:
        raise DataError(
            "could not read the file with the schema's columns; check that the file has a "
            "header naming every column of the schema."
        ) from exc
    cols: dict[str, Any] = {}
    drop = np.zeros(frame.height, dtype=bool)
    for col in schema.columns:
        series = frame.get_column(col.name)
        text = col.type in ("category", "id")  # read as values, not parsed as numbers
        if text and series.dtype in (pl.Categorical, pl.Enum):  # (a numeric one is refused)
            series = series.cast(pl.String)
        if not text and series.dtype == pl.String:
            series = _parse_numbers(pl, series)
        if not text and not _numeric_type(pl, series.dtype):
            # Lists, structs, dates…: refused with a clear message, not a bare error (a date
            # would otherwise become nanoseconds since 1970, clamped to the bounds).
            raise DataError(
                f"column {col.name} is stored as {series.dtype} in the file; a numeric column "
                "must hold numbers (or text that is parsed as numbers)."
            )
        coded = _coded(pl, col, series) if text else None
        if coded is not None:
            cols[col.name], bad = coded
        else:
            if text or series.dtype == pl.Decimal:
                # Python objects: a decimal becomes the float nearest to it (float(Decimal))
                values: Any = series.to_list()
                if not text:
                    values = np.asarray(values, dtype=np.float64)
            else:
                values = np.asarray(series.to_numpy(), dtype=np.float64)
            cols[col.name], bad = clean_column_mask(col, values)
        if col.policy == "drop":
            drop |= bad
        elif col.type == "id" and bool(np.any(bad)):
            # Told to the admin, who sees the data: a row without an owner cannot be bounded.
            raise DataError(
                f"column {col.name} (the privacy unit) has missing values; every row must "
                'belong to a unit: assign those rows, or declare missing = "drop".'
            )
    if bool(np.any(drop)):  # the rows a column's policy drops, decided before any query
        cols = {name: values[~drop] for name, values in cols.items()}
    out = Table(schema, cols)
    if out.rows < MIN_ROWS:
        raise DataError(f"a dataset needs at least {MIN_ROWS} rows to be registered.")
    return out


def _empty_is_text(pl: Any) -> dict[str, Any]:
    """The option that reads an empty field as an empty text, not a null (an empty id is then
    missing, an empty category undeclared, as they always were): renamed in Polars 2."""
    params = inspect.signature(pl.read_csv).parameters
    if "empty_string_is_null" in params:
        return {"empty_string_is_null": False}
    return {"missing_utf8_is_empty_string": True}  # pragma: no cover - Polars 1


def _column_lengths(frame: Any) -> int:
    lengths = {len(s) for s in frame.get_columns()}
    return lengths.pop() if len(lengths) == 1 else -1


def _coded(
    pl: Any, col: Column, series: Any
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None:
    """The codes :func:`clean_column_mask` gives a text (or integer id) column, computed by
    Polars instead of one Python object per cell; ``None`` for other column types (cleaned per
    cell).

    The same codes, cell for cell: a category is its index among the declared categories, else
    ``k`` (null, undeclared); an id is numbered in order of first appearance, a null or empty id
    being :data:`MISSING`. Per cell in Python this was most of the time of registering a large
    categorical file.
    """
    t = series.dtype
    if col.type == "category" and t == pl.String:
        assert col.categories is not None
        other = len(col.categories)
        codes = series.replace_strict(
            pl.Series(col.categories, dtype=pl.String),
            pl.Series(range(other), dtype=pl.Int64),
            default=other,
            return_dtype=pl.Int64,
        ).fill_null(other)
        out = codes.to_numpy().astype(np.int64, copy=False)
        return out, out == other
    if col.type == "id" and (t == pl.String or t.is_integer()):
        if t == pl.String:  # an empty id is missing, like a null one
            series = series.set(series == "", None)
        seen = series.drop_nulls().unique(maintain_order=True)  # in order of first appearance
        ids = series.replace_strict(
            seen, pl.Series(range(len(seen)), dtype=pl.Int64), default=MISSING,
            return_dtype=pl.Int64,
        ).fill_null(MISSING)  # fmt: skip
        out = ids.to_numpy().astype(np.int64, copy=False)
        return out, out == MISSING
    return None


def _numeric_type(pl: Any, t: Any) -> bool:
    return bool(t.is_numeric() or t == pl.Boolean or t == pl.Null)


NUMBER = (
    r"^[+-]?([0-9]+\.?[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?"
    r"|inf|Infinity|nan|NaN)$"
)
"""The text a numeric cell may hold (after trimming white space): decimal or exponent notation,
``inf``, ``Infinity``, ``nan``, ``NaN``, with a sign; anything else is missing (ASCII digits
only)."""


WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)
"""What is trimmed around a number: Unicode's white space and the ASCII separators 0x1C-0x1F
(Python's ``str.isspace``, and what the service trimmed before; Polars' default set lacks the
separators)."""


def _parse_numbers(pl: Any, series: Any) -> Any:
    """Text to float64, with unparsable or empty cells as null (then filled by the policy)."""
    text = series.str.strip_chars(WHITESPACE)
    kept = text.set(~text.str.contains(NUMBER).fill_null(False), None)
    return kept.cast(pl.Float64, strict=True)
