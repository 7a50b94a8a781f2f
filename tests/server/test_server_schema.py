"""Public schemas, cleaning at ingestion, the dummy table and the query registry (no HTTP)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.errors import DataError, PrivacyParameterError
from dpkit.server import DatasetSchema, Prepared, QueryRegistry, stats_registry
from dpkit.server._ingest import load_table, read_source, resolve_source, store_table
from dpkit.server._registry import Answer, Meter
from dpkit.server._schema import Table, clean_column, dummy_table
from dpkit.stats import mean

SCHEMA = {
    "name": "survey",
    "columns": [
        {"name": "age", "type": "float", "bounds": [0, 100]},
        {"name": "kids", "type": "int", "bounds": [0, 10], "fill": 0},
        {"name": "sex", "type": "category", "categories": ["f", "m"]},
    ],
}


def test_cleaning_policy_numeric() -> None:
    col = DatasetSchema.from_dict(SCHEMA).column("age")
    raw: list[Any] = [10.0, None, math.nan, math.inf, -math.inf, -5.0, 250.0, "x", True, "42"]
    out = clean_column(col, raw)
    # missing, NaN, text and booleans become the public fill (the middle of the bounds); ±inf
    # and out-of-range values are clamped; parsable text is a number.
    assert out.tolist() == [10.0, 50.0, 50.0, 100.0, 0.0, 0.0, 100.0, 50.0, 50.0, 42.0]
    kids = DatasetSchema.from_dict(SCHEMA).column("kids")
    assert clean_column(kids, [1.4, None, 12]).tolist() == [1.0, 0.0, 10.0]


def test_cleaning_policy_categorical() -> None:
    col = DatasetSchema.from_dict(SCHEMA).column("sex")
    assert clean_column(col, ["f", "m", None, "x", 3]).tolist() == [0, 1, 2, 2, 2]


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "../etc", "columns": SCHEMA["columns"]},
        {"name": "a b", "columns": SCHEMA["columns"]},
        {"name": "survey", "columns": []},
        {"name": "survey", "columns": [{"name": "x;drop", "bounds": [0, 1]}]},
        {"name": "survey", "columns": [{"name": "x", "bounds": [1, 0]}]},
        {"name": "survey", "columns": [{"name": "x", "bounds": [0, math.nan]}]},
        {"name": "survey", "columns": [{"name": "x", "type": "category", "categories": []}]},
        {"name": "survey", "columns": [{"name": "x", "bounds": [0, 1], "fill": 2}]},
        {"name": "survey", "columns": [{"name": "x", "bounds": [0, 1]}], "privacy_unit": "user"},
        {"name": "survey", "columns": [{"name": "x", "bounds": [0, 1]}] * 2},
    ],
)
def test_bad_schemas_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(DataError):
        DatasetSchema.from_dict(bad)


def test_csv_ingestion_store_and_load(tmp_path: Path) -> None:
    imports = tmp_path / "imports"
    imports.mkdir()
    (imports / "s.csv").write_text(
        "age,kids,sex,ignored\n30,2,f,a\n,x,m,b\nNaN,3,?,c\n1e9,-1,m,d\n abc ,4,,e\n"
    )
    schema = DatasetSchema.from_dict(SCHEMA)
    table = read_source(resolve_source(imports, "s.csv"), schema)
    assert table.columns["age"].tolist() == [30.0, 50.0, 50.0, 100.0, 50.0]
    assert table.columns["kids"].tolist() == [2.0, 0.0, 3.0, 0.0, 4.0]
    assert table.columns["sex"].tolist() == [0, 1, 2, 1, 2]
    store_table(tmp_path / "data", table)
    store_table(tmp_path / "data", table)  # replacing a stored dataset
    again = load_table(tmp_path / "data", schema)
    for name in ("age", "kids", "sex"):
        assert np.array_equal(again.columns[name], table.columns[name])


def test_parquet_ingestion(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.table({"age": [1.0, None, 300.0], "kids": [1, 2, None], "sex": ["m", None, "f"]})
    pq.write_table(t, tmp_path / "s.parquet")
    table = read_source(tmp_path / "s.parquet", DatasetSchema.from_dict(SCHEMA))
    assert table.columns["age"].tolist() == [1.0, 50.0, 100.0]
    assert table.columns["kids"].tolist() == [1.0, 2.0, 0.0]
    assert table.columns["sex"].tolist() == [1, 2, 0]


def test_missing_column_and_tiny_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("age,sex\n1,f\n2,m\n")
    with pytest.raises(DataError, match="header"):
        read_source(tmp_path / "a.csv", DatasetSchema.from_dict(SCHEMA))
    (tmp_path / "b.csv").write_text("age,kids,sex\n1,1,f\n")
    with pytest.raises(DataError, match="at least"):
        read_source(tmp_path / "b.csv", DatasetSchema.from_dict(SCHEMA))


@pytest.mark.parametrize(
    "source", ["../secret.csv", "/etc/passwd", "sub/../../secret.csv", "a\0b.csv", "x.txt", ""]
)
def test_source_paths_cannot_escape_the_import_directory(tmp_path: Path, source: str) -> None:
    (tmp_path / "secret.csv").write_text("age\n1\n")
    imports = tmp_path / "imports"
    (imports / "sub").mkdir(parents=True)
    with pytest.raises(DataError):
        resolve_source(imports, source)


def test_symlink_out_of_the_import_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.csv").write_text("age\n1\n")
    imports = tmp_path / "imports"
    imports.mkdir()
    (imports / "link.csv").symlink_to(tmp_path / "secret.csv")
    with pytest.raises(DataError):
        resolve_source(imports, "link.csv")


def test_dummy_table_is_public_and_follows_the_schema() -> None:
    schema = DatasetSchema.from_dict(SCHEMA)
    a, b = dummy_table(schema, 500), dummy_table(schema, 500)
    assert np.array_equal(a.columns["age"], b.columns["age"])  # depends on the schema only
    assert a.columns["age"].min() >= 0 and a.columns["age"].max() <= 100
    assert set(np.unique(a.columns["sex"]).tolist()) <= {0, 1}
    assert np.all(a.columns["kids"] == np.rint(a.columns["kids"]))


def _tables() -> tuple[DatasetSchema, Table]:
    schema = DatasetSchema.from_dict(SCHEMA)
    return schema, dummy_table(schema, 300)


def test_registry_prices_every_stats_query() -> None:
    schema, dummy = _tables()
    reg = stats_registry()
    cases = {
        "count": {"epsilon": 0.5},
        "sum": {"column": "age", "epsilon": 0.5},
        "mean": {"column": "age", "epsilon": 0.5, "delta": 1e-7},
        "var": {"column": "age", "epsilon": 0.5, "ddof": 1},
        "std": {"column": "age", "epsilon": 0.5, "bounds": [10, 90]},
        "cov": {"columns": ["age", "kids"], "epsilon": 0.5},
        "corr": {"columns": ["age", "kids"], "epsilon": 0.5},
        "quantiles": {"column": "age", "q": [0.1, 0.5], "epsilon": 0.5},
        "histogram": {"column": "sex", "epsilon": 0.5},
    }
    assert sorted(cases) == reg.names()
    for name, params in cases.items():
        p = reg.prepare(name, params, schema, dummy)
        assert (p.epsilon, p.delta) == (params["epsilon"], params.get("delta", 0.0))
        answer = p.compute(dummy, 1, Meter(p.epsilon, p.delta))
        assert answer.value is not None


@pytest.mark.parametrize(
    ("name", "params", "error"),
    [
        ("mean", {"column": "age", "epsilon": 0.0}, PrivacyParameterError),
        ("mean", {"column": "age", "epsilon": -1}, PrivacyParameterError),
        ("mean", {"column": "age", "epsilon": math.nan}, PrivacyParameterError),
        ("mean", {"column": "age", "epsilon": math.inf}, PrivacyParameterError),
        ("mean", {"column": "age", "epsilon": "1"}, PrivacyParameterError),
        ("mean", {"column": "age", "epsilon": 1, "delta": 1.0}, PrivacyParameterError),
        ("mean", {"column": "age", "epsilon": 1, "epsilom": 1}, DataError),
        ("mean", {"column": "sex", "epsilon": 1}, DataError),
        ("mean", {"column": "nope", "epsilon": 1}, DataError),
        ("mean", {"column": "../age", "epsilon": 1}, DataError),
        ("mean", {"column": "age", "epsilon": 1, "bounds": [5, 1]}, DataError),
        ("mean", {"column": "age", "epsilon": 1, "alpha": 2}, DataError),
        ("quantiles", {"column": "age", "epsilon": 1, "q": [1.5]}, DataError),
        ("quantiles", {"column": "age", "epsilon": 1, "delta": 1e-6}, DataError),
        ("histogram", {"column": "age", "epsilon": 1, "bins": [3, 2, 1]}, DataError),
        ("histogram", {"column": "age", "epsilon": 1, "bins": 10**9}, DataError),
        ("cov", {"columns": ["age"], "epsilon": 1}, DataError),
        ("median", {"column": "age", "epsilon": 1}, DataError),
    ],
)
def test_registry_refuses_bad_requests(name: str, params: dict[str, Any], error: type) -> None:
    schema, dummy = _tables()
    with pytest.raises(error):
        stats_registry().prepare(name, params, schema, dummy)


def test_registry_refuses_an_entry_that_spends_more_than_its_price() -> None:
    """A broken entry (prices ε but runs the mean at 4ε) is caught before anything is charged."""
    schema, dummy = _tables()
    reg = QueryRegistry()

    def prepare(params: Any, s: DatasetSchema) -> Prepared:
        eps = float(params["epsilon"])

        def compute(t: Table, rng: Any, meter: Meter) -> Answer:
            rel = mean(
                t.columns["age"], bounds=(0, 100), epsilon=4 * eps, accountant=meter, rng=rng
            )
            return Answer(rel.value)

        return Prepared("mean", eps, 0.0, compute)

    reg.register("broken", prepare)
    with pytest.raises(PrivacyParameterError, match="does not fit"):
        reg.prepare("broken", {"epsilon": 0.5}, schema, dummy)


def test_registry_refuses_an_entry_that_never_charges() -> None:
    schema, dummy = _tables()
    reg = QueryRegistry()
    reg.register(
        "leaky",
        lambda p, s: Prepared(
            "leaky", 1.0, 0.0, lambda t, rng, m: Answer(float(t.columns["age"].mean()))
        ),
    )
    with pytest.raises(PrivacyParameterError, match="without charging"):
        reg.prepare("leaky", {}, schema, dummy)
    with pytest.raises(ValueError):
        reg.register("leaky", lambda p, s: Prepared("x", 1.0, 0.0, lambda t, r, m: Answer(0)))
