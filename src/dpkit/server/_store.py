"""A registered dataset on disk: one Arrow file, written once, memory-mapped by every worker.

At registration the cleaned columns are written to ``<data_dir>/<name>/data.arrow``, an
uncompressed Arrow IPC file (one record batch; numeric columns as ``float64``, codes of
categories, ids and local reports as ``int64``), with ``data.json`` (its SHA-256, size and
rows, and the provenance of the source file: name, size, SHA-256) and ``schema.json``, written
last. Each worker process of the service then *maps* the file read-only instead of loading it:
a column is a NumPy view on the mapping (``pyarrow.memory_map``, zero-copy), so its pages are
read from disk on first use, only for the columns a query reads, and are held once, in the
operating system's page cache, however many workers map them. Polars frames for ``group_by``
and ``sql`` queries are built on the same views (zero-copy for ``float64`` and ``int64``).

Why not Polars' own ``scan_ipc``: with Polars 2.1 a scan copies the columns it reads into the
process's memory (measured: +80 MB of anonymous memory per 10-million-row column read, kept
by the allocator), so N workers would again hold up to N copies of what they read.

What the service trusts: the files are written once by the service itself, in its private
data directory (folders 0700), and made read-only (0400); a replacement is a new file in a new
folder, swapped in atomically, never a write into a mapped file (a worker still mapping the old
one keeps reading it until it loads the new version). Every worker checks the file's SHA-256
against ``data.json`` when it maps a version, so a file corrupted or replaced between
registration and loading is refused instead of answered from. Bytes changed *in place* in a
mapped file after that check (possible only for the service's own account or root, which can
also rewrite the ledger) are outside this model: queries would see them, and a truncated file
would stop the worker (SIGBUS).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.server._files import private_dir, private_file
from dpkit.server._schema import DatasetSchema, Table

__all__ = [
    "DATA_FILE",
    "MANIFEST",
    "READ_ONLY_MODE",
    "ArrowColumns",
    "file_digest",
    "load_table",
    "store_table",
    "upgrade_stored",
]

DATA_FILE = "data.arrow"
"""The dataset's columns, an uncompressed Arrow IPC file (written once, then read-only)."""
MANIFEST = "data.json"
"""The data file's SHA-256, size and rows, and the source file's provenance."""
READ_ONLY_MODE = 0o400
"""The data file's mode: the service reads it and never writes it again."""
_CHUNK = 1 << 20


def _pyarrow() -> Any:
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.ipc  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - the server extra installs it
        raise ImportError("storing datasets needs pyarrow: pip install 'dpkit[server]'") from exc
    return pa


def file_digest(path: Path) -> tuple[str, int]:
    """``(sha256 hex, size in bytes)`` of a file, read in 1 MiB blocks (not mapped)."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def _stored_dtype(kind: str) -> Any:
    """float and int columns are cleaned to float64; codes (category, id, local) to int64."""
    return np.float64 if kind in ("float", "int") else np.int64


def _write_arrow(path: Path, table: Table) -> None:
    pa = _pyarrow()
    arrays = [
        pa.array(np.ascontiguousarray(table.columns[c.name], dtype=_stored_dtype(c.type)))
        for c in table.schema.columns
    ]
    names = [c.name for c in table.schema.columns]
    batch = pa.RecordBatch.from_arrays(arrays, names=names)
    with private_file(path) as out:
        # uncompressed, one record batch: each column is one contiguous, 64-byte aligned buffer
        # in the file, which a mapping hands to NumPy without a copy
        with pa.ipc.new_file(out, batch.schema) as writer:
            writer.write_batch(batch)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(path, READ_ONLY_MODE)


def store_table(data_dir: Path, table: Table, *, source: Path | None = None) -> dict[str, Any]:
    """Write the cleaned columns atomically (a crash leaves the old version or the new one).

    Returns the manifest written with them (``data.json``): the data file's SHA-256, size and
    rows, and, when ``source`` is given, the source file's name, size and SHA-256.
    """
    folder = data_dir / table.schema.name
    tmp = data_dir / f".{table.schema.name}.tmp"
    private_dir(tmp)  # the data are private: 0700 folders, 0600 files, whatever the umask
    for leftover in tmp.iterdir():  # an earlier attempt's files (read-only ones included)
        leftover.unlink()
    _write_arrow(tmp / DATA_FILE, table)
    digest, size = file_digest(tmp / DATA_FILE)
    manifest: dict[str, Any] = {"format": "arrow-ipc", "file": DATA_FILE, "sha256": digest,
                                "bytes": size, "rows": table.rows}  # fmt: skip
    if source is not None:
        src_digest, src_size = file_digest(source)
        manifest["source"] = {"name": source.name, "bytes": src_size, "sha256": src_digest}
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


class ArrowColumns(Mapping[str, npt.NDArray[Any]]):
    """A dataset's columns as read-only NumPy views on its memory-mapped Arrow file.

    A view is made on first access (no data are read until a query touches them); the mapping
    lives as long as any view on it, so a table replaced while a query reads it stays valid.
    """

    def __init__(self, arrow: Any) -> None:
        self._arrow = arrow
        self._views: dict[str, npt.NDArray[Any]] = {}

    @property
    def arrow(self) -> Any:
        """The underlying ``pyarrow.Table`` (its buffers are the file's mapping)."""
        return self._arrow

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        view = self._views.get(name)
        if view is None:
            if name not in self._arrow.column_names:
                raise KeyError(name)
            col = self._arrow.column(name)
            if col.num_chunks == 1:
                view = col.chunk(0).to_numpy(zero_copy_only=True)
            else:  # pragma: no cover - the service writes one record batch
                view = col.to_numpy()
            view.flags.writeable = False
            self._views[name] = view  # (two threads may both make it: the same view)
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrow.column_names)

    def __len__(self) -> int:
        return int(self._arrow.num_columns)


def load_table(data_dir: Path, schema: DatasetSchema) -> Table:
    """Map a stored dataset read-only, after checking its file against its manifest.

    Raises :class:`DataError` if the file's SHA-256 or size is not the one recorded when it was
    written (the admin is told to register the dataset again), or its columns are not the
    schema's.
    """
    pa = _pyarrow()
    folder = data_dir / schema.name
    manifest = json.loads((folder / MANIFEST).read_text())
    digest, size = file_digest(folder / DATA_FILE)
    if digest != manifest.get("sha256") or size != manifest.get("bytes"):
        raise DataError(
            f"the stored file of dataset {schema.name} does not match its checksum; it was "
            "changed outside the service: register the dataset again."
        )
    arrow = pa.ipc.open_file(pa.memory_map(str(folder / DATA_FILE), "r")).read_all()
    expected = [(c.name, np.dtype(_stored_dtype(c.type))) for c in schema.columns]
    found = [(f.name, np.dtype(f.type.to_pandas_dtype())) for f in arrow.schema]
    if found != expected:
        raise DataError(f"the stored file of dataset {schema.name} does not have its schema's "
                        "columns: register the dataset again.")  # fmt: skip
    return Table(schema, ArrowColumns(arrow))


def upgrade_stored(data_dir: Path, schema: DatasetSchema) -> bool:
    """Rewrite a dataset stored by an older version (one ``.npy`` file per column) as one Arrow
    file with its manifest (call it under the data directory's exclusive lock). Returns whether
    there was anything to rewrite; the data are the same, so the dataset's version is kept."""
    folder = data_dir / schema.name
    if not (folder / "schema.json").exists() or (folder / MANIFEST).exists():
        return False
    cols = {c.name: np.load(folder / f"{c.name}.npy", allow_pickle=False) for c in schema.columns}
    store_table(data_dir, Table(schema, cols))
    return True
