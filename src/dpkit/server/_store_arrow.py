"""Reading a dataset stored by the previous version of the store (one Arrow IPC file), once, to
convert it (:func:`dpkit.server._store.upgrade_stored`). PyArrow is not a dependency of the
service any more: without it such a dataset is refused, and the admin registers it again."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.server._schema import DatasetSchema

__all__ = ["read_arrow_columns"]


def read_arrow_columns(
    path: Path, manifest: dict[str, Any], schema: DatasetSchema
) -> dict[str, npt.NDArray[Any]] | None:
    """The schema's columns of an Arrow file written by the previous store, copied into memory
    with their stored dtypes (float64, int64: the same values bit for bit); ``None`` if pyarrow
    is not installed, or the file is not the one its manifest describes (then the dataset is
    refused when loaded, as a changed file is)."""
    from dpkit.server._store import file_digest, stored_dtype

    try:
        pa = importlib.import_module("pyarrow")
        importlib.import_module("pyarrow.ipc")
    except ImportError:
        return None
    digest, size = file_digest(path)
    if digest != manifest.get("sha256") or size != manifest.get("bytes"):
        return None
    arrow = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    out: dict[str, npt.NDArray[Any]] = {}
    for col in schema.columns:
        if col.name not in arrow.column_names:
            return None
        values = np.asarray(arrow.column(col.name).to_numpy())
        if values.dtype != stored_dtype(col.type):
            return None
        out[col.name] = values.copy()
    return out
