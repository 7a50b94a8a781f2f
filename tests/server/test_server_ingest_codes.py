"""Registration codes text columns with Arrow: the same codes as the per-cell cleaning policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from dpkit.server._ingest import read_source
from dpkit.server._schema import DatasetSchema, clean_column_mask

CATS = ["a", "b", "c"]
CITY = ["b", None, "x", "a", "", "c", "b", "x", None, "a"]
USER = ["u2", "u1", None, "u2", "", "u3", "u1", "u9", "u3", "u2"]


def _schema(unit_missing: str = "drop", city_missing: str = "other") -> DatasetSchema:
    return DatasetSchema.from_dict({
        "name": "t", "privacy_unit": "user", "columns": [
            {"name": "user", "type": "id", "missing": unit_missing},
            {"name": "city", "type": "category", "categories": CATS, "missing": city_missing},
            {"name": "v", "type": "float", "bounds": [0, 1]},
        ]})  # fmt: skip


def _expected(schema: DatasetSchema, user: list[object]) -> dict[str, np.ndarray]:
    """The per-cell policy (:func:`clean_column_mask`) with the rows a drop policy removes."""
    u, u_bad = clean_column_mask(schema.columns[0], user)
    c, c_bad = clean_column_mask(schema.columns[1], CITY)
    drop = np.zeros(len(CITY), bool)
    for col, bad in ((schema.columns[0], u_bad), (schema.columns[1], c_bad)):
        if col.policy == "drop":
            drop |= bad
    return {"user": u[~drop], "city": c[~drop]}


@pytest.mark.parametrize("fmt", ["parquet", "parquet-chunks", "csv"])
@pytest.mark.parametrize("city_missing", ["other", "drop"])
def test_text_codes_match_the_cleaning_policy(tmp_path: Path, fmt: str, city_missing: str) -> None:
    schema = _schema(city_missing=city_missing)
    table = pa.table({"user": USER, "city": CITY, "v": [0.5] * len(CITY)})
    path = tmp_path / ("t.csv" if fmt == "csv" else "t.parquet")
    if fmt == "csv":
        pacsv.write_csv(table, path)
    else:  # several row groups: one dictionary per chunk
        pq.write_table(table, path, row_group_size=3 if fmt == "parquet-chunks" else None)
    got = read_source(path, schema)
    # a CSV cell cannot tell an empty text from a missing one: both are missing there
    user = ["" if v is None else v for v in USER] if fmt == "csv" else USER
    city = ["" if v is None else v for v in CITY] if fmt == "csv" else CITY
    assert clean_column_mask(schema.columns[1], city)[0].tolist() == (
        clean_column_mask(schema.columns[1], CITY)[0].tolist()
    )
    want = _expected(schema, user)
    assert got.columns["user"].tolist() == want["user"].tolist()
    assert got.columns["city"].tolist() == want["city"].tolist()
    assert got.columns["city"].dtype == np.int64 and got.columns["user"].dtype == np.int64


def test_integer_ids_and_categories_stored_as_numbers(tmp_path: Path) -> None:
    """An integer id is coded by Arrow too; an integer column declared categorical keeps the
    per-cell path (its values are compared as text)."""
    schema = DatasetSchema.from_dict({
        "name": "t", "privacy_unit": "user", "columns": [
            {"name": "user", "type": "id"},
            {"name": "k", "type": "category", "categories": ["1", "2"]},
        ]})  # fmt: skip
    user, k = [7, 3, 7, 9, 3], [1, 2, 5, 1, None]
    pq.write_table(pa.table({"user": user, "k": k}), tmp_path / "t.parquet")
    got = read_source(tmp_path / "t.parquet", schema)
    assert got.columns["user"].tolist() == clean_column_mask(schema.columns[0], user)[0].tolist()
    assert got.columns["user"].tolist() == [0, 1, 0, 2, 1]
    assert got.columns["k"].tolist() == [0, 1, 2, 0, 2]
