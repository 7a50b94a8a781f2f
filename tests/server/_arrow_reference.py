"""The service's reading of CSV and Parquet files as it was when PyArrow read them (before the
column store needed only NumPy and Polars): the reference the new reading is compared with,
value for value, in test_server_ingest_reference.py. Kept verbatim apart from its name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.server._ingest import MIN_ROWS
from dpkit.server._schema import MISSING, Column, DatasetSchema, Table, clean_column_mask

__all__ = ["read_source_arrow", "store_table_arrow"]


def read_source_arrow(path: Path, schema: DatasetSchema) -> Table:
    """Read the schema's columns from a CSV or Parquet file and clean them."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.csv as pacsv  # type: ignore[import-untyped]
        import pyarrow.parquet as pq  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - the server extra installs it
        raise ImportError("reading datasets needs pyarrow: pip install 'dpkit[server]'") from exc
    names = [c.name for c in schema.columns]
    try:
        if path.suffix.lower() == ".csv":
            # Every column is read as text, then parsed by the cleaning policy: a stray value in a
            # numeric column must become missing, not fail the whole file or change its type.
            # Categories are read dictionary-encoded: each distinct text is held (and coded) once.
            coded = pa.dictionary(pa.int32(), pa.string())
            types = {c.name: coded if c.type == "category" else pa.string() for c in schema.columns}
            opts = pacsv.ConvertOptions(column_types=types, include_columns=names)
            table = pacsv.read_csv(path, convert_options=opts)
        else:
            cats = [c.name for c in schema.columns if c.type == "category"]
            table = pq.read_table(path, columns=names, read_dictionary=cats)
    except (pa.ArrowInvalid, KeyError, OSError) as exc:
        raise DataError(
            "could not read the file with the schema's columns; check that the file has a "
            "header naming every column of the schema."
        ) from exc
    cols: dict[str, Any] = {}
    drop = np.zeros(table.num_rows, dtype=bool)
    for col in schema.columns:
        arr = table.column(col.name)
        text = col.type in ("category", "id")  # read as values, not parsed as numbers
        if not text and pa.types.is_string(arr.type):
            arr = _parse_numbers(arr)
        if not text and not _numeric_type(pa, arr.type):
            # Lists, structs, dates…: refused with a clear message, not a bare error (a date
            # would otherwise become nanoseconds since 1970, clamped to the bounds).
            raise DataError(
                f"column {col.name} is stored as {arr.type} in the file; a numeric column must "
                "hold numbers (or text that is parsed as numbers)."
            )
        coded = _coded(pa, col, arr) if text else None
        if coded is not None:
            cols[col.name], bad = coded
        else:
            if text:
                values: Any = arr.to_pylist()
            else:
                values = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)
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


def _coded(
    pa: Any, col: Column, arr: Any
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None:
    """The codes :func:`clean_column_mask` gives a text (or integer id) column, computed by Arrow
    instead of one Python object per cell; ``None`` for other column types (cleaned per cell).

    The same codes, cell for cell: a category is its index among the declared categories, else
    ``k`` (null, undeclared); an id is numbered in order of first appearance, a null or empty id
    being :data:`MISSING` (Arrow's dictionary encoding numbers values in that order too). Per
    cell in Python this was most of the time of registering a large categorical file.
    """
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    t = arr.type
    if pa.types.is_dictionary(t):
        t = t.value_type
        if col.type != "category":
            arr = arr.cast(t)
    is_text = pa.types.is_string(t) or pa.types.is_large_string(t)
    if col.type == "category" and is_text:
        assert col.categories is not None
        declared = pa.array(col.categories, type=t)
        chunks = arr.chunks if hasattr(arr, "chunks") else [arr]
        codes = np.concatenate(
            [_category_codes(pa, pc, declared, c) for c in chunks] or [np.zeros(0, np.int64)]
        )
        other = len(col.categories)
        return codes, codes == other
    if col.type == "id" and (is_text or pa.types.is_integer(t)):
        if is_text:  # an empty id is missing, like a null one
            arr = pc.if_else(pc.equal(arr, ""), pa.scalar(None, t), arr)
        encoded = pc.dictionary_encode(arr).combine_chunks()
        ids = pc.fill_null(encoded.indices, MISSING).to_numpy(zero_copy_only=False)
        ids = np.asarray(ids).astype(np.int64)
        return ids, ids == MISSING
    return None


def _category_codes(pa: Any, pc: Any, declared: Any, chunk: Any) -> npt.NDArray[np.int64]:
    """One chunk's category codes; a dictionary-encoded chunk (as Parquet stores text columns)
    is coded once per distinct value, then gathered by its indices."""
    other = len(declared)
    if pa.types.is_dictionary(chunk.type):
        found = pc.index_in(chunk.dictionary, value_set=declared)
        per_value = np.append(np.asarray(pc.fill_null(found, other)), other).astype(np.int64)
        indices = pc.fill_null(chunk.indices, len(chunk.dictionary))  # null: the "other" slot
        return per_value[np.asarray(indices).astype(np.intp)]
    found = pc.index_in(chunk, value_set=declared)
    return np.asarray(pc.fill_null(found, other)).astype(np.int64)


def _numeric_type(pa: Any, t: Any) -> bool:
    return bool(
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
        or pa.types.is_null(t) or pa.types.is_decimal(t)
    )  # fmt: skip


def _parse_numbers(arr: Any) -> Any:
    """Text to float64, with unparsable or empty cells as null (then filled by the policy)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(arr)
    ok = pc.match_substring_regex(
        text, r"^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|Infinity|nan|NaN)$"
    )
    kept = pc.if_else(ok, text, pa.scalar(None, pa.string()))
    return pc.cast(kept, pa.float64())


def store_table_arrow(data_dir: Path, table: Table, *, source: Path | None = None) -> None:
    """A dataset folder as the Arrow store left it: ``data.arrow`` (one uncompressed record
    batch), ``data.json`` (format ``arrow-ipc``) and ``schema.json``."""
    import json
    import os

    import pyarrow as pa
    import pyarrow.ipc

    from dpkit.server._files import private_dir, private_file
    from dpkit.server._store import file_digest, stored_dtype

    folder = private_dir(data_dir / table.schema.name)
    arrays = [
        pa.array(np.ascontiguousarray(table.columns[c.name], dtype=stored_dtype(c.type)))
        for c in table.schema.columns
    ]
    batch = pa.RecordBatch.from_arrays(arrays, names=[c.name for c in table.schema.columns])
    with private_file(folder / "data.arrow") as out, pa.ipc.new_file(out, batch.schema) as w:
        w.write_batch(batch)
    os.chmod(folder / "data.arrow", 0o400)
    digest, size = file_digest(folder / "data.arrow")
    manifest: dict[str, Any] = {"format": "arrow-ipc", "file": "data.arrow", "sha256": digest,
                                "bytes": size, "rows": table.rows}  # fmt: skip
    if source is not None:
        src_digest, src_size = file_digest(source)
        manifest["source"] = {"name": source.name, "bytes": src_size, "sha256": src_digest}
    (folder / "data.json").write_text(json.dumps(manifest))
    (folder / "schema.json").write_text(json.dumps(table.schema.to_dict()))
