"""A registered dataset on disk: one column file, written once, memory-mapped by every worker.

At registration the cleaned columns are written to ``<data_dir>/<name>/data.bin``: each column's
values, one after another, as raw little-endian ``float64`` (numeric columns) or ``int64``
(codes of categories, ids and local reports), each starting at a 64-byte boundary. Beside it,
``data.json`` (the manifest) records the layout (each column's name, dtype and offset), the
file's SHA-256, size and rows, and the provenance of the source file (name, size, SHA-256);
``schema.json`` is written last. Each worker process of the service then *maps* the file
read-only instead of loading it: a column is a NumPy view on the mapping (``mmap`` with
``numpy.frombuffer``, zero-copy), so its pages are read from disk on first use, only for the
columns a query reads, and are held once, in the operating system's page cache, however many
workers map them. Polars frames for ``group_by`` and ``sql`` queries are built on the same
views (zero-copy for ``float64`` and ``int64``). Only NumPy and the standard library are needed
to write and read it.

Why not Polars' own readers: a Polars scan of an Arrow or Parquet file copies the columns it
reads into the process's memory (measured with Polars 2.1: +80 MB of anonymous memory per
10-million-row column read, kept by the allocator), so N workers would hold up to N copies.

What the service trusts: the files are written once by the service itself, in its private
data directory (folders 0700), and made read-only (0400); a replacement is a new file in a new
folder, swapped in atomically, never a write into a mapped file (a worker still mapping the old
one keeps reading it until it loads the new version). Every worker checks the file's SHA-256
against ``data.json`` when it maps a version (reading the descriptor it then maps), and the
manifest's rows and offsets against the one layout the service writes (the manifest is outside
the checksum), so a file or manifest corrupted or replaced between registration and loading is
refused instead of answered from. Bytes changed *in place* in a
mapped file after that check (possible only for the service's own account or root, which can
also rewrite the ledger) are outside this model: queries would see them, and a truncated file
would stop the worker (SIGBUS).

Datasets stored by older versions are converted once, at start, under the data directory's
exclusive lock, with the same values (:func:`upgrade_stored`): one ``.npy`` file per column, or
one Arrow IPC file (``data.arrow``, which needs PyArrow to read; without it such a dataset is
refused with a message telling the admin to register it again).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.server._files import private_dir, private_file
from dpkit.server._schema import DatasetSchema, Table

__all__ = [
    "DATA_FILE",
    "FORMAT",
    "LEGACY_ARROW_FILE",
    "MANIFEST",
    "READ_ONLY_FILES",
    "READ_ONLY_MODE",
    "MappedColumns",
    "file_digest",
    "load_table",
    "store_table",
    "stored_dtype",
    "upgrade_stored",
]

DATA_FILE = "data.bin"
"""The dataset's columns, raw little-endian values at 64-byte aligned offsets (read-only)."""
FORMAT = "dpkit-columns-1"
"""The manifest's ``format`` of :data:`DATA_FILE` (its layout is in the manifest)."""
MANIFEST = "data.json"
"""The data file's layout, SHA-256, size and rows, and the source file's provenance."""
READ_ONLY_MODE = 0o400
"""The data file's mode: the service reads it and never writes it again."""
LEGACY_ARROW_FILE = "data.arrow"
"""The data file of the previous format (an Arrow IPC file), converted at start."""
READ_ONLY_FILES = frozenset({DATA_FILE, LEGACY_ARROW_FILE})
"""The files the service writes once and only reads (mode 0400)."""
_ALIGN = 64  # each column starts on a cache line (and on any SIMD width NumPy or Polars uses)
_CHUNK = 1 << 20


def file_digest(path: Path) -> tuple[str, int]:
    """``(sha256 hex, size in bytes)`` of a file, read in 1 MiB blocks (not mapped)."""
    with open(path, "rb") as f:
        return _digest(f)


def _digest(f: BinaryIO) -> tuple[str, int]:
    h, size = hashlib.sha256(), 0
    while block := f.read(_CHUNK):
        h.update(block)
        size += len(block)
    return h.hexdigest(), size


def stored_dtype(kind: str) -> np.dtype[Any]:
    """float and int columns are cleaned to float64; codes (category, id, local) to int64.
    Little-endian on disk whatever the machine, so a data directory can move between them."""
    return np.dtype("<f8") if kind in ("float", "int") else np.dtype("<i8")


def _layout(schema: DatasetSchema, rows: int) -> tuple[list[dict[str, Any]], int]:
    """Each column's name, dtype and offset in the data file, and the file's size: one column
    after another, each at the next 64-byte boundary. The one layout the service writes, so the
    one it reads: a manifest whose rows or offsets were changed (a column read from another's
    bytes, or only the first rows) is refused, not mapped."""
    layout: list[dict[str, Any]] = []
    offset = 0
    for c in schema.columns:
        dtype = stored_dtype(c.type)
        offset += -offset % _ALIGN
        layout.append({"name": c.name, "dtype": dtype.str, "offset": offset})
        offset += rows * dtype.itemsize
    return layout, offset


def _write_columns(path: Path, table: Table) -> list[dict[str, Any]]:
    layout, _ = _layout(table.schema, table.rows)
    offset = 0
    with private_file(path) as out:
        for c, place in zip(table.schema.columns, layout, strict=True):
            values = np.ascontiguousarray(table.columns[c.name], dtype=stored_dtype(c.type))
            out.write(b"\0" * (place["offset"] - offset))
            out.write(values.data)  # the array's own buffer: no copy
            offset = place["offset"] + values.nbytes
        out.flush()
        os.fsync(out.fileno())
    os.chmod(path, READ_ONLY_MODE)
    return layout


def store_table(data_dir: Path, table: Table, *, source: Path | None = None) -> dict[str, Any]:
    """Write the cleaned columns atomically (a crash leaves the old version or the new one).

    Returns the manifest written with them (``data.json``): the data file's layout, SHA-256,
    size and rows, and, when ``source`` is given, the source file's name, size and SHA-256.
    """
    return _store(data_dir, table, _source_of(source) if source is not None else None)


def _source_of(source: Path) -> dict[str, Any]:
    src_digest, src_size = file_digest(source)
    return {"name": source.name, "bytes": src_size, "sha256": src_digest}


def _store(data_dir: Path, table: Table, source: dict[str, Any] | None) -> dict[str, Any]:
    folder = data_dir / table.schema.name
    tmp = data_dir / f".{table.schema.name}.tmp"
    private_dir(tmp)  # the data are private: 0700 folders, 0600 files, whatever the umask
    for leftover in tmp.iterdir():  # an earlier attempt's files (read-only ones included)
        leftover.unlink()
    layout = _write_columns(tmp / DATA_FILE, table)
    digest, size = file_digest(tmp / DATA_FILE)
    manifest: dict[str, Any] = {"format": FORMAT, "file": DATA_FILE, "sha256": digest,
                                "bytes": size, "rows": table.rows, "columns": layout}  # fmt: skip
    if source is not None:
        manifest["source"] = source
    with private_file(tmp / MANIFEST) as out:
        out.write(json.dumps(manifest).encode())
    with private_file(tmp / "schema.json") as out:  # last: the folder is complete with it
        out.write(json.dumps(table.schema.to_dict()).encode())
    if folder.exists():
        old = data_dir / f".{table.schema.name}.old"
        os.replace(folder, old)
        os.replace(tmp, folder)
        # unlinked, not overwritten: a worker still mapping the old file keeps reading it
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    else:
        os.replace(tmp, folder)
    return manifest


class MappedColumns(Mapping[str, npt.NDArray[Any]]):
    """A dataset's columns as read-only NumPy views on its memory-mapped data file.

    The views are made when the file is mapped (no data are read until a query touches them);
    the mapping lives as long as any view on it, so a table replaced while a query reads it
    stays valid.
    """

    def __init__(self, views: dict[str, npt.NDArray[Any]]) -> None:
        self._views = views

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        return self._views[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._views)

    def __len__(self) -> int:
        return len(self._views)


def _changed(name: str) -> DataError:
    return DataError(
        f"the stored file of dataset {name} does not match its checksum; it was changed "
        "outside the service: register the dataset again."
    )


def load_table(data_dir: Path, schema: DatasetSchema) -> Table:
    """Map a stored dataset read-only, after checking its file against its manifest.

    Raises :class:`DataError` if the file's SHA-256 or size is not the one recorded when it was
    written (the admin is told to register the dataset again), if its columns are not the
    schema's, or if it is in an older format that could not be converted.
    """
    folder = data_dir / schema.name
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (ValueError, OSError):  # malformed (or unreadable): not the one the service wrote
        manifest = None
    if not isinstance(manifest, dict):
        raise _changed(schema.name)
    if manifest.get("format") != FORMAT:
        raise DataError(
            f"dataset {schema.name} was stored by an older version of dpkit in a format this "
            "installation cannot read (an Arrow file; converting it needs pyarrow): register "
            "the dataset again."
        )
    rows, layout = manifest.get("rows"), manifest.get("columns")
    expected = [(c.name, stored_dtype(c.type).str) for c in schema.columns]
    if (
        not isinstance(layout, list)
        or [(c.get("name"), c.get("dtype")) if isinstance(c, dict) else None for c in layout]
        != expected
    ):
        raise DataError(f"the stored file of dataset {schema.name} does not have its schema's "
                        "columns: register the dataset again.")  # fmt: skip
    if type(rows) is not int or rows < 0:
        raise _changed(schema.name)
    # The manifest is outside the checksum: its rows and offsets must be the one layout the
    # service writes (never a column read from another's bytes, or only its first rows), and
    # the views are made from that layout, not from the manifest's numbers.
    places, end = _layout(schema, rows)
    if [(c.get("offset"), type(c.get("offset"))) for c in layout] != [
        (p["offset"], int) for p in places
    ]:
        raise _changed(schema.name)
    with open(folder / DATA_FILE, "rb") as f:
        # the file checked is the file mapped (one descriptor), whatever is renamed meanwhile
        digest, size = _digest(f)
        if digest != manifest.get("sha256") or size != manifest.get("bytes") or size != end:
            raise _changed(schema.name)
        # read-only: the views' buffers refuse writes, and the pages are the page cache's
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    views: dict[str, npt.NDArray[Any]] = {}
    for p in places:
        views[p["name"]] = np.frombuffer(mapped, np.dtype(p["dtype"]), rows, p["offset"])
    return Table(schema, MappedColumns(views))


def upgrade_stored(data_dir: Path, schema: DatasetSchema) -> bool:
    """Rewrite a dataset stored by an older version as one column file with its manifest (call
    it under the data directory's exclusive lock): one ``.npy`` file per column (no manifest),
    or one Arrow file (needs pyarrow; left as it is without it, and then refused by
    :func:`load_table`). Returns whether it was rewritten; the values are the same, so the
    dataset's version is kept."""
    folder = data_dir / schema.name
    if not (folder / "schema.json").exists():
        return False
    if not (folder / MANIFEST).exists():
        cols = {
            c.name: np.load(folder / f"{c.name}.npy", allow_pickle=False) for c in schema.columns
        }
        store_table(data_dir, Table(schema, cols))
        return True
    manifest = json.loads((folder / MANIFEST).read_text())
    if manifest.get("format") != "arrow-ipc":
        return False
    from dpkit.server._store_arrow import read_arrow_columns

    cols_or_none = read_arrow_columns(folder / LEGACY_ARROW_FILE, manifest, schema)
    if cols_or_none is None:  # no pyarrow, or a changed file: refused when loaded
        return False
    _store(data_dir, Table(schema, cols_or_none), manifest.get("source"))
    return True
