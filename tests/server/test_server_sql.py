"""POST /v1/sql and Curator.sql() against a real service: metadata from the registered schema,
the price is the plan's cost (dry run), the answer a table with intervals, refusals free."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.client import Curator, RemoteTable
from dpkit.errors import DataError

REGIONS = ["north", "south", "east", "west"]
VISITS = {
    "name": "visits",
    "source": "visits.csv",
    "total_epsilon": 100.0,
    "total_delta": 1e-3,
    "privacy_unit": "user",
    "columns": [
        {"name": "user", "type": "id"},
        {"name": "region", "type": "category", "categories": REGIONS},
        {"name": "spend", "type": "float", "bounds": [0, 100]},
    ],
}


def _write(folder: Path) -> None:
    gen = np.random.default_rng(5)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "visits.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "region", "spend"])
        for u in range(400):
            region = REGIONS[u % 4] if u % 50 else "atlantis"  # 8 users in (other)
            for _ in range(int(gen.integers(1, 5))):
                w.writerow([f"u{u:04d}", region, f"{20.0 + 15.0 * (u % 4):.1f}"])


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    _write(server.root / "imports")
    server.admin("POST", "/v1/admin/datasets", VISITS)
    a = server.admin("POST", "/v1/admin/analysts", {"name": "sam"})
    grant = {"analyst": a["id"], "dataset": "visits", "epsilon": 20.0, "delta": 1e-4}
    server.admin("PUT", "/v1/admin/budgets", grant)
    with Curator(server.url, a["key"]) as c:
        yield c


def _spent(c: Curator) -> float:
    return float(next(b for b in c.budget() if b["dataset"] == "visits")["spent_epsilon"])


def test_sql_on_the_service(client: Curator) -> None:
    sql = "SELECT region, COUNT(*) AS n, AVG(spend) AS s FROM visits GROUP BY region"
    price = client.sql("visits", sql, epsilon=1.0, max_rows=4, dry_run=True)
    assert price["epsilon"] == pytest.approx(1.0)
    before = _spent(client)
    t = client.sql("visits", sql, epsilon=1.0, max_rows=4)
    assert isinstance(t, RemoteTable)
    assert t.frame.columns == ["region", "n", "n_lo", "n_hi", "s", "s_lo", "s_hi"]
    # the categories plus (other): a public key set from the schema
    assert t.frame["region"].to_list() == sorted([*REGIONS, "(other)"])
    north = t.frame.filter(t.frame["region"] == "north")["s"][0]
    assert abs(north - 20.0) < 10
    assert _spent(client) == pytest.approx(before + 1.0)


def test_bigquery_dialect_takes_its_budget_from_options(client: Curator) -> None:
    sql = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, delta=1e-6, "
        "privacy_unit_column=user) region, AVG(spend, contribution_bounds_per_group => (0, 100)) "
        "AS s FROM visits GROUP BY region"
    )
    before = _spent(client)
    t = client.sql("visits", sql)
    assert set(t.frame["region"].to_list()) <= {*REGIONS, "(other)"}
    assert _spent(client) == pytest.approx(before + 0.5)


def test_refusals_are_free(client: Curator) -> None:
    before = _spent(client)
    bad_queries = [
        "SELECT MIN(spend) FROM visits",
        "SELECT user, COUNT(*) FROM visits GROUP BY user",
        "SELECT COUNT(*) FROM visits WHERE spend > (SELECT AVG(spend) FROM visits)",
    ]
    for bad in bad_queries:
        with pytest.raises(DataError):
            client.sql("visits", bad, epsilon=1.0)
    assert _spent(client) == before


def test_refusals_never_echo_the_query(server: Any, client: Curator) -> None:
    mark = "zq9xmark"
    queries = [
        f"SELECT COUNT(*) FROM {mark}",
        f"SELECT SUM({mark}) FROM visits",
        f"SELECT {mark}(spend) FROM visits",
        f"SELECT COUNT(*) FROM visits v WHERE {mark}.spend > 1",
        f"SELECT COUNT(*) FROM visits WHERE region = '{mark}' AND spend > (SELECT 1)",
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, {mark}=2) COUNT(*) FROM visits",
        f"SELECT {mark} FROM",
    ]
    for q in queries:
        r = server.http.post("/v1/sql", json={"dataset": "visits", "sql": q, "epsilon": 1.0},
                             headers={"Authorization": f"Bearer {client_key(client)}"})  # fmt: skip
        assert r.status_code == 400
        assert mark not in r.text


def client_key(c: Curator) -> str:
    return str(c._http.headers["Authorization"]).removeprefix("Bearer ")
