"""The group_by registry entry against a real service: a dataset whose privacy unit is a user id
column (several rows per user), answers within their error bars, the unit honoured, the cost
charged once, refusals free, dry runs, retries, other analysts' results hidden."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.client import Curator, RemoteTable
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.server import DatasetSchema
from dpkit.server._ingest import read_source

REGIONS = ["north", "south", "east", "west"]
USERS = 600
VISITS = {
    "name": "visits",
    "source": "visits.csv",
    "total_epsilon": 100.0,
    "total_delta": 1e-3,
    "privacy_unit": "user",
    "columns": [
        {"name": "user", "type": "id"},
        {"name": "region", "type": "category", "categories": REGIONS},
        {"name": "kids", "type": "int", "bounds": [0, 3]},
        {"name": "spend", "type": "float", "bounds": [0, 100]},
    ],
}


def write_visits(folder: Path) -> None:
    """600 users with 1 to 8 visits each, all in the user's home region, with the user's own
    spend on every visit (so the bounded aggregates do not depend on which visits are kept)."""
    gen = np.random.default_rng(3)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "visits.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "region", "kids", "spend"])
        for u in range(USERS):
            region = REGIONS[u % 4] if u % 50 else "atlantis"  # 12 users in (other)
            spend = 20.0 + 15.0 * (u % 4) + float(gen.uniform(-5, 5))
            for _ in range(int(gen.integers(1, 9))):
                w.writerow([f"u{u:04d}", region, u % 3, f"{spend:.3f}"])


@pytest.fixture(scope="module")
def truth(server: Any) -> dict[str, Any]:
    write_visits(server.root / "imports")
    server.admin("POST", "/v1/admin/datasets", VISITS)
    cols = read_source(server.root / "imports" / "visits.csv", DatasetSchema.from_dict(VISITS))
    frame = pl.DataFrame({k: np.asarray(v) for k, v in cols.columns.items()})
    per_user = frame.group_by("user").agg(
        pl.col("region").first(), pl.len().alias("rows"), pl.col("spend").first()
    )
    return {"rows": frame.height, "users": per_user}


def _grant(server: Any, name: str, epsilon: float, delta: float = 1e-4) -> tuple[str, str]:
    a = server.admin("POST", "/v1/admin/analysts", {"name": name})
    for ds in ("visits", "survey"):
        grant = {"analyst": a["id"], "dataset": ds, "epsilon": epsilon, "delta": delta}
        server.admin("PUT", "/v1/admin/budgets", grant)
    return a["id"], a["key"]


@pytest.fixture(scope="module")
def key(server: Any, truth: Any) -> str:
    return _grant(server, "gina", 50.0)[1]


@pytest.fixture(scope="module")
def client(server: Any, key: str) -> Any:
    with Curator(server.url, key) as c:
        yield c


def _spent(c: Curator, dataset: str = "visits") -> float:
    return float(next(b for b in c.budget() if b["dataset"] == dataset)["spent_epsilon"])


def _post(server: Any, key: str, body: dict[str, Any]) -> Any:
    return server.http.post("/v1/query", json=body, headers={"Authorization": f"Bearer {key}"})


def test_answers_per_user_within_their_bars(client: Curator, truth: Any) -> None:
    before = _spent(client)
    t = client.group_by("visits", "region", dpf.count(), dpf.count_units(),
                        dpf.mean("spend", bounds=(0, 100)), epsilon=3.0, max_rows=3,
                        max_groups=1)  # fmt: skip
    assert isinstance(t, RemoteTable) and t.epsilon == 3.0 and t.statistic == "group_by"
    assert _spent(client) == pytest.approx(before + 3.0)
    frame = t.frame
    assert isinstance(frame, pl.DataFrame)
    # Every public key, in the schema's order, (other) included: keys do not depend on the data.
    assert frame["region"].to_list() == [*REGIONS, "(other)"]
    assert frame.columns[:4] == ["region", "count", "count_lo", "count_hi"]
    users = truth["users"]
    for code, row in enumerate(t.rows):
        mine = users.filter(pl.col("region") == code)
        kept = mine["rows"].clip(upper_bound=3)  # at most L∞ = 3 rows per user
        exact = {
            "count": int(kept.sum()),
            "units": mine.height,
            "mean_spend": float((kept * mine["spend"]).sum() / kept.sum()),
        }
        for name, value in exact.items():
            lo, hi = row[f"{name}_lo"], row[f"{name}_hi"]
            # 3 widths of the 95% interval: the discrete Laplace noise would have to exceed
            # about 18 of its scales, probability about e^-18 per cell.
            assert abs(row[name] - value) <= 3 * (hi - lo), (name, code, row)
    # The unit is the user, not the row: a count of rows would be about 2.7 times larger.
    assert sum(r["units"] for r in t.rows) < 0.5 * truth["rows"]


def test_a_persons_total_per_group_is_clamped(client: Curator, truth: Any) -> None:
    total = {"stat": "sum", "column": "spend", "unit_total": [0, 50]}
    t = client.group_by("visits", "region", total, epsilon=2.0, max_rows=3, max_groups=1)
    users = truth["users"]
    for code, row in enumerate(t.rows[: len(REGIONS)]):
        mine = users.filter(pl.col("region") == code)
        # each user's kept rows (at most 3) of spend, totalled and clamped to 50
        exact = float((mine["rows"].clip(upper_bound=3) * mine["spend"]).clip(0, 50).sum())
        # 3 widths of the 95% interval (as above): a miss has probability about e^-18
        assert abs(row["sum_spend"] - exact) <= 3 * (row["sum_spend_hi"] - row["sum_spend_lo"])


def test_two_keys_explicit_keys_and_json_aggregations(client: Curator, truth: Any) -> None:
    t = client.group_by(
        "visits", ["region", "kids"], {"stat": "sum", "column": "spend"},
        {"stat": "quantiles", "column": "spend", "q": [0.5]},
        keys=[["north", 0], ["north", 1], ["(other)", 2]], epsilon=2.0, max_rows=1, max_groups=1,
    )  # fmt: skip
    assert [(r["region"], r["kids"]) for r in t.rows] == [("north", 0), ("north", 1),
                                                          ("(other)", 2)]  # fmt: skip
    assert t.columns[:5] == ("region", "kids", "sum_spend", "sum_spend_lo", "sum_spend_hi")
    for r in t.rows:
        assert 0 <= r["q_spend_0.5"] <= 100 and r["q_spend_0.5_lo"] <= r["q_spend_0.5_hi"]


def test_private_key_selection_releases_only_keys_of_the_domain(client: Curator) -> None:
    t = client.group_by(
        "visits", "region", epsilon=2.0, delta=1e-6, keys="private", max_rows=1, max_groups=1
    )
    assert t.delta == pytest.approx(1e-6)
    # Each of the four home regions has 150 users; with ε = 1 for selection and δ = 1e-6 the
    # truncated geometric threshold is about 15, so all four are kept except with
    # probability far below 1e-9; (other) holds 12 users and may or may not be.
    released = [r["region"] for r in t.rows]
    assert set(REGIONS) <= set(released) <= {*REGIONS, "(other)"}


def test_dry_run_prices_without_charging(client: Curator) -> None:
    before = _spent(client)
    body = {
        "by": ["region"],
        "max_groups": 2,
        "max_rows": 1,
        "keys": "private",
        "epsilon": 1.5,
        "delta": 1e-6,
    }
    price = client.query("visits", "group_by", dry_run=True, **body)
    assert price["epsilon"] == pytest.approx(1.5) and price["delta"] == pytest.approx(1e-6)
    cells = price["accuracy"]["half_width"]  # each column's noise half-width, before release
    assert cells and all(h > 0 for h in cells.values()) and "noise intervals:" in repr(price)
    d = client.query("visits", "group_by", dummy=True, **{**body, "keys": None})
    assert d.raw["dummy"] is True and len(d.rows) == 5
    assert _spent(client) == before


def test_idempotent_retry_and_other_analysts(server: Any, client: Curator) -> None:
    before = _spent(client)
    bounds = {"max_rows": 1, "max_groups": 1}
    a = client.group_by("visits", "region", epsilon=0.5, idempotency_key="gb-1", **bounds)
    b = client.group_by("visits", "region", epsilon=0.5, idempotency_key="gb-1", **bounds)
    assert a.id == b.id and a.rows == b.rows and b.raw["replayed"]
    assert _spent(client) == pytest.approx(before + 0.5)
    again = client.result(a.id or "")
    assert isinstance(again, RemoteTable) and again.rows == a.rows
    _, other = _grant(server, "hugo", 1.0)
    r = server.http.get(f"/v1/results/{a.id}", headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 404


BAD: list[tuple[dict[str, Any], str]] = [
    ({"by": ["nope"]}, "no column"),
    ({"by": ["spend"]}, "group by categorical or int"),
    ({"by": ["user"]}, "group by categorical or int"),
    ({"by": []}, "by must be"),
    ({"by": ["region", "region"]}, "repeat"),
    ({"by": ["region"], "max_groups": 0}, "max_groups"),
    ({"by": ["region"], "max_groups": "2"}, "max_groups"),
    ({"by": ["region"], "max_groups": 2.5}, "max_groups"),
    ({"by": ["region"], "max_rows": 10**6}, "max_rows"),
    (
        {"by": ["region"], "max_rows": 1, "max_groups": 1, "max_rows_per_unit": -1},
        "max_rows_per_unit",
    ),
    ({"by": ["region"], "aggregations": [{"stat": "median"}]}, "stat in"),
    ({"by": ["region"], "aggregations": [{"stat": "mean", "column": "region"}]}, "numeric"),
    (
        {"by": ["region"], "aggregations": [{"stat": "sum", "column": "spend", "bounds": [5, 1]}]},
        "reversed",
    ),
    ({"by": ["region"], "aggregations": [{"stat": "count", "column": "spend"}]}, "unknown"),
    ({"by": ["region"], "aggregations": []}, "aggregations must be"),
    ({"by": ["region"], "keys": ["mars"]}, "not one of its categories"),
    ({"by": ["region"], "keys": ["north", "north"]}, "repeat"),
    ({"by": ["region"], "keys": "private"}, "delta > 0"),
    ({"by": ["region"], "epsilon": 0}, "epsilon"),
    ({"by": ["region"], "epsilon": -1}, "epsilon"),
    ({"by": ["region"], "delta": 1.0}, "delta"),
    ({"by": ["region"], "alpha": 2}, "alpha"),
    ({"by": ["region"], "epsilom": 1}, "unknown parameter 'epsilom' (did you mean 'epsilon'?)."),
    (
        {
            "by": ["region"],
            "max_rows": 2,
            "max_groups": 1,
            "aggregations": [{"stat": "sum", "column": "spend", "unit_total": [5, 10]}],
        },
        "contain 0",
    ),
    ({"by": ["region"], "max_groups": 1}, "choose max_rows:"),
    ({"by": ["region"], "max_rows": 1}, "choose max_groups:"),
    ({"by": ["region"]}, "choose max_rows and max_groups:"),
]


@pytest.mark.parametrize(("change", "words"), BAD)
def test_refusals_charge_nothing(
    server: Any, client: Curator, key: str, change: Any, words: str
) -> None:
    before = _spent(client)
    body = {"dataset": "visits", "query": "group_by", "epsilon": 1.0, **change}
    r = _post(server, key, body)
    assert r.status_code == 400, r.text
    assert words in r.json()["error"]["message"]
    assert "mars" not in r.text and "atlantis" not in r.text  # values are never echoed
    assert _spent(client) == before


def test_row_statistics_refuse_a_dataset_with_users(client: Curator) -> None:
    before = _spent(client)
    with pytest.raises(DataError, match="several rows per person"):
        client.mean("visits", "spend", epsilon=1.0)
    with pytest.raises(DataError, match="several rows per person"):
        client.count("visits", epsilon=1.0)
    with pytest.raises(PrivacyParameterError):
        client.group_by("visits", "region", epsilon=-1.0)
    assert _spent(client) == before


def test_a_row_dataset_groups_rows(client: Curator) -> None:
    t = client.group_by("survey", "sex", dpf.mean("age", bounds=(0, 100)), epsilon=2.0)
    assert [r["sex"] for r in t.rows] == ["f", "m", "(other)"]
    # about 1000 rows per sex, mean age near 54 (uniform 18..90, a few cells filled with 50)
    for r in t.rows[:2]:
        assert 40 < r["mean_age"] < 70


def test_client_sends_library_aggregations_as_json() -> None:
    from dpkit.client._curator import _aggregation
    from dpkit.server._dashboard import _num

    assert _aggregation(dpf.quantiles("x", [0.1], bounds=(0, 1))) == {
        "stat": "quantiles", "column": "x", "bounds": [0.0, 1.0], "q": [0.1]
    }  # fmt: skip
    assert _aggregation(dpf.count_units()) == {"stat": "count_units"}
    assert _aggregation({"stat": "sum", "column": "x"}) == {"stat": "sum", "column": "x"}
    with pytest.raises(DataError, match="alias"):
        _aggregation(dpf.mean("x", bounds=(0, 1), alias="m"))
    with pytest.raises(DataError, match="group_by answers"):
        _aggregation(dpf.histogram("x", bins=[0, 1]))
    with pytest.raises(DataError, match="aggregations must be"):
        _aggregation("count")
    # The dashboard shortens rows of a table answer as it does lists.
    row = {f"c{i}": float(i) for i in range(8)}
    assert _num([row]) == "[{c0: 0, c1: 1, c2: 2, c3: 3, c4: 4, c5: 5, …}]"
