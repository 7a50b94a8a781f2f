"""The column store's manifest (``data.json``) is outside the data file's checksum: a manifest
whose rows or offsets were changed must be refused, never mapped as another layout (a column
read from another column's bytes, only the first rows, or columns of different lengths)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.errors import DataError
from dpkit.server import DatasetSchema, Table
from dpkit.server._store import MANIFEST, load_table, store_table

SCHEMA = DatasetSchema.from_dict({"name": "t", "columns": [
    {"name": "x", "type": "float", "bounds": [0, 10]},
    {"name": "y", "type": "float", "bounds": [0, 10]}]})  # fmt: skip
ONE = DatasetSchema.from_dict({"name": "t", "columns": [
    {"name": "x", "type": "float", "bounds": [0, 10]}]})  # fmt: skip


def _second(key: str, value: Callable[[Any], Any]) -> Callable[[dict[str, Any]], None]:
    return lambda m: m["columns"][1].update({key: value(m["columns"][1][key])})


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "fewer rows": lambda m: m.update(rows=50),
    "rows -1 (NumPy: the rest of the file)": lambda m: m.update(rows=-1),
    "rows true": lambda m: m.update(rows=True),
    "y read from x's bytes": _second("offset", lambda _: 0),
    "y's offset as a float": _second("offset", float),
    "y one value later": _second("offset", lambda o: o + 8),
}


def _stored(tmp_path: Path, schema: DatasetSchema) -> Path:
    cols = {"x": np.arange(100.0) / 10, "y": np.full(100, 7.0)}
    store_table(tmp_path, Table(schema, {c.name: cols[c.name] for c in schema.columns}))
    assert load_table(tmp_path, schema).rows == 100
    return tmp_path / "t" / MANIFEST


@pytest.mark.parametrize("name", list(EDITS))
def test_a_changed_layout_in_the_manifest_is_refused(tmp_path: Path, name: str) -> None:
    path = _stored(tmp_path, SCHEMA)
    manifest = json.loads(path.read_text())
    EDITS[name](manifest)
    path.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="register the dataset again"):
        load_table(tmp_path, SCHEMA)


def test_fewer_rows_of_a_single_column_are_refused(tmp_path: Path) -> None:
    # one column: its offset stays 0, only the file's size tells the rows apart
    path = _stored(tmp_path, ONE)
    manifest = json.loads(path.read_text())
    manifest["rows"] = 99
    path.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="register the dataset again"):
        load_table(tmp_path, ONE)


@pytest.mark.parametrize("text", ["{", "[]"])
def test_a_malformed_manifest_is_refused_as_a_changed_file(tmp_path: Path, text: str) -> None:
    # a DataError (the worker marks this dataset out of service), not a bare JSON error
    _stored(tmp_path, SCHEMA).write_text(text)
    with pytest.raises(DataError, match="register the dataset again"):
        load_table(tmp_path, SCHEMA)
