"""Empirical audits (dpkit.audit) of group_by as the service computes it: through the registry
entry, its price and its meter, on neighbouring tables that differ by one *person* with several
rows; and the same person counted as several units (a schema without its privacy unit) is caught.
Also seeded, in-process answers checked against the exact bounded values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpkit.audit import epsilon_lower_bound
from dpkit.errors import DataError
from dpkit.server import DatasetSchema, default_registry
from dpkit.server._registry import Meter
from dpkit.server._schema import Table, dummy_table

EPS = 1.0
TRIALS = 700  # per table; the count's distributions differ by 4 noise scales at 4ε (see below)
COLUMNS = [
    {"name": "user", "type": "id"},
    {"name": "region", "type": "category", "categories": ["a", "b"]},
    {"name": "x", "type": "float", "bounds": [0, 1]},
]


def _schema(unit: str) -> DatasetSchema:
    cols = COLUMNS if unit == "user" else COLUMNS[1:]
    return DatasetSchema.from_dict({"name": "t", "privacy_unit": unit, "columns": cols})


def _pair(schema: DatasetSchema) -> tuple[Table, Table]:
    """20 users with one row each, and the same table plus one user with 4 rows in region a."""
    users = np.arange(20.0)
    region = np.zeros(20)
    d0 = {"user": users, "region": region, "x": np.ones(20)}
    d1 = {k: np.concatenate([v, [20.0] * 4 if k == "user" else [v[0]] * 4]) for k, v in d0.items()}
    keep = [c.name for c in schema.columns]
    return (Table(schema, {k: d0[k] for k in keep}), Table(schema, {k: d1[k] for k in keep}))


def _served(schema: DatasetSchema, params: dict[str, Any]) -> Any:
    prepared = default_registry().prepare("group_by", params, schema, dummy_table(schema, 60))

    def mechanism(table: Table, rng: Any) -> float:
        answer = prepared.compute(table, rng, Meter(prepared.epsilon, prepared.delta))
        return float(answer.value[0]["count"])  # region "a"

    return mechanism


def test_group_by_protects_a_person_with_several_rows() -> None:
    schema = _schema("user")
    params = {"by": ["region"], "max_groups": 1, "max_rows": 4, "epsilon": EPS}
    res = epsilon_lower_bound(_served(schema, params), *_pair(schema), trials=TRIALS, rng=1)
    assert res.epsilon <= EPS, res


def test_a_person_counted_as_several_units_is_caught() -> None:
    """Negative control: declared with one row per person, the 4 rows of the added person move
    the count by 4 under noise calibrated for 1, i.e. an actual ε of 4; the audit refutes ε = 1.
    """
    schema = _schema("row")
    params = {"by": ["region"], "epsilon": EPS}
    res = epsilon_lower_bound(_served(schema, params), *_pair(schema), trials=TRIALS, rng=2)
    assert res.epsilon > EPS, res


@pytest.mark.parametrize("seed", [3, 4])
def test_seeded_answers_match_the_exact_bounded_values(seed: int) -> None:
    schema = _schema("user")
    gen = np.random.default_rng(seed)
    users = np.repeat(np.arange(300.0), 5)  # 300 users, 5 rows each, all in one region
    region = np.repeat(gen.integers(0, 3, 300), 5).astype(np.float64)  # 2 is (other)
    x = np.repeat(gen.uniform(0, 1, 300), 5)
    table = Table(schema, {"user": users, "region": region, "x": x})
    params = {"by": ["region"], "max_groups": 1, "max_rows": 2, "epsilon": 2.0,
              "aggregations": [{"stat": "count"}, {"stat": "sum", "column": "x"},
                               {"stat": "count_units"}]}  # fmt: skip
    prepared = default_registry().prepare("group_by", params, schema, dummy_table(schema, 60))
    rows = prepared.compute(table, gen, Meter(2.0, 0.0)).value
    assert [r["region"] for r in rows] == ["a", "b", "(other)"]
    for code, r in enumerate(rows):
        mine = region[::5] == code
        exact = {"count": 2 * mine.sum(), "units": mine.sum(), "sum_x": 2 * x[::5][mine].sum()}
        for name, value in exact.items():
            # 3 widths of the 95% interval are about 18 discrete Laplace scales: p ≈ 1.5e-8.
            assert abs(r[name] - value) <= 3 * (r[f"{name}_hi"] - r[f"{name}_lo"]), (name, r)


def test_int_keys_default_to_their_integers_or_are_listed() -> None:
    schema = DatasetSchema.from_dict({"name": "t", "columns": [
        {"name": "kids", "type": "int", "bounds": [0, 3]},
        {"name": "year", "type": "int", "bounds": [0, 20_000]},
        {"name": "age", "type": "int", "bounds": [0, 9_999]},
    ]})  # fmt: skip
    reg, dummy = default_registry(), dummy_table(schema, 200)
    out = reg.prepare("group_by", {"by": ["kids"], "epsilon": 1.0}, schema, dummy)
    assert [r["kids"] for r in out.compute(dummy, 0, Meter(1.0, 0.0)).value] == [0, 1, 2, 3]
    with pytest.raises(DataError, match="more than 10000 integer values"):
        reg.prepare("group_by", {"by": ["year"], "epsilon": 1.0}, schema, dummy)
    listed = {"by": ["year"], "keys": [1999, 2000], "epsilon": 1.0}
    rows = reg.prepare("group_by", listed, schema, dummy).compute(dummy, 0, Meter(1.0, 0.0))
    assert [r["year"] for r in rows.value] == [1999, 2000]
    for bad in ([20_001], [1.5], ["1999"], [True]):
        with pytest.raises(DataError, match="must be an integer from 0 to 20000"):
            reg.prepare("group_by", {**listed, "keys": bad}, schema, dummy)
    with pytest.raises(DataError, match="combinations"):
        reg.prepare("group_by", {"by": ["kids", "age"], "keys": None, "epsilon": 1.0},
                    schema, dummy)  # fmt: skip
