"""The local_frequencies registry entry against a real service: a dataset column of reports
randomized on users' devices (dpkit.local), aggregated for free (post-processing) into the same
estimates as the library's, recorded in the ledger at zero cost; refusals, retries, other
analysts; and the schema's new column types refused or accepted at registration."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.client import Curator, PermissionDeniedError, RemoteFrequencies
from dpkit.errors import DataError
from dpkit.local import GRR, HadamardResponse
from dpkit.server import Answer, DatasetSchema, Meter, Prepared, QueryRegistry
from dpkit.server._schema import Column, dummy_table
from dpkit.stats import count

PAGES = ["home", "news", "mail", "maps", "shop", "docs"]
USERS = 20_000
TELEMETRY = {
    "name": "telemetry",
    "source": "telemetry.csv",
    "total_epsilon": 10.0,
    "columns": [
        {"name": "page", "type": "local", "protocol": "GRR", "epsilon": 1.0,
         "categories": PAGES},
        {"name": "page_hr", "type": "local", "protocol": "HR", "epsilon": 2.0,
         "categories": PAGES},
        {"name": "age", "type": "float", "bounds": [0, 100]},
    ],
}  # fmt: skip
DIRTY = {3: "", 10: "x", 20: "7", 30: "2.5", 40: "-1"}  # row -> a bad GRR report


def write_reports(folder: Path) -> dict[str, Any]:
    """Reports as devices would send them (seeded here), with a few malformed GRR cells."""
    gen = np.random.default_rng(11)
    weights = np.array([0.4, 0.25, 0.15, 0.1, 0.07, 0.03])
    values = gen.choice(len(PAGES), size=USERS, p=weights)
    grr = GRR(epsilon=1.0, k=len(PAGES)).randomize(values, rng=12).values
    hr = HadamardResponse(epsilon=2.0, k=len(PAGES)).randomize(values, rng=13).values
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "telemetry.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["page", "page_hr", "age"])
        for i in range(USERS):
            w.writerow([DIRTY.get(i, str(grr[i])), hr[i], 40])
    valid = np.ones(USERS, dtype=bool)
    valid[list(DIRTY)] = False
    return {"values": values, "grr": grr, "hr": hr, "valid": valid}


@pytest.fixture(scope="module")
def truth(server: Any) -> dict[str, Any]:
    out = write_reports(server.root / "imports")
    server.admin("POST", "/v1/admin/datasets", TELEMETRY)
    return out


def _grant(server: Any, name: str) -> tuple[str, str]:
    a = server.admin("POST", "/v1/admin/analysts", {"name": name})
    grant = {"analyst": a["id"], "dataset": "telemetry", "epsilon": 1.0}
    server.admin("PUT", "/v1/admin/budgets", grant)
    return a["id"], a["key"]


@pytest.fixture(scope="module")
def key(server: Any, truth: Any) -> str:
    return _grant(server, "lena")[1]


@pytest.fixture(scope="module")
def client(server: Any, key: str) -> Any:
    with Curator(server.url, key) as c:
        yield c


def _spent(c: Curator) -> float:
    return float(c.budget()[0]["spent_epsilon"])


def test_frequencies_are_the_library_estimates_and_free(
    server: Any, client: Curator, truth: Any
) -> None:
    before = _spent(client)
    f = client.local_frequencies("telemetry", "page")
    assert isinstance(f, RemoteFrequencies) and f.labels == tuple(PAGES)
    assert f.protocol == "GRR" and f.local_epsilon == 1.0 and f.raw["epsilon"] == 0.0
    assert f.n == USERS - len(DIRTY)  # malformed reports are left out; n is revealed exactly
    # The same numbers as the library's aggregator on the valid reports (post-processing only).
    oracle = GRR(epsilon=1.0, k=len(PAGES))
    est = oracle.estimate(oracle.reports(truth["grr"][truth["valid"]]))
    np.testing.assert_allclose(f.counts, est.counts, rtol=1e-12)
    np.testing.assert_allclose(f.ci()[1] - f.counts, est.ci(0.05), rtol=1e-9)
    # Against the true values: within 5 standard deviations (the interval is ±1.96 sd), a
    # normal tail of 6e-7 per category; the reports are seeded, so this is deterministic.
    exact = np.bincount(truth["values"][truth["valid"]], minlength=len(PAGES))
    sd = (f.ci()[1] - f.ci()[0]) / (2 * 1.96)
    assert np.all(np.abs(f.counts - exact) <= 5 * sd)
    assert _spent(client) == before
    (charge,) = [r for r in client.results() if r["id"] == f.id]
    assert charge["epsilon"] == 0.0 and charge["status"] == "released"


def test_hadamard_reports_and_alpha(client: Curator, truth: Any) -> None:
    f = client.local_frequencies("telemetry", "page_hr", alpha=0.1)
    assert f.protocol == "HR" and f.n == USERS and f.alpha == 0.1
    exact = np.bincount(truth["values"], minlength=len(PAGES))
    sd = (f.ci(0.1)[1] - f.ci(0.1)[0]) / (2 * 1.645)
    assert np.all(np.abs(f.counts - exact) <= 5 * sd)
    assert abs(float(f.frequencies.sum()) - 1) < 0.05
    with pytest.raises(DataError, match="alpha"):
        f.ci(0.05)


def test_dry_run_retry_budget_and_other_analysts(server: Any, client: Curator) -> None:
    price = client.query("telemetry", "local_frequencies", column="page", dry_run=True)
    assert price["epsilon"] == 0.0 and price["delta"] == 0.0
    a = client.local_frequencies("telemetry", "page", idempotency_key="lf-1")
    b = client.local_frequencies("telemetry", "page", idempotency_key="lf-1")
    assert a.id == b.id and b.raw["replayed"]
    assert isinstance(client.result(a.id or ""), RemoteFrequencies)
    _, other = _grant(server, "mona")
    r = server.http.get(f"/v1/results/{a.id}", headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 404
    # Free, but not open: a dataset is read only by analysts the admin granted it to.
    stranger = server.admin("POST", "/v1/admin/analysts", {"name": "nils"})
    with pytest.raises(PermissionDeniedError), Curator(server.url, stranger["key"]) as c:
        c.local_frequencies("telemetry", "page")


BAD: list[tuple[dict[str, Any], str]] = [
    ({"query": "local_frequencies", "column": "page", "epsilon": 1.0}, "costs no budget"),
    ({"query": "local_frequencies", "column": "age"}, "needs a local column"),
    ({"query": "local_frequencies", "column": "nope"}, "no column"),
    ({"query": "local_frequencies", "column": "page", "alpha": 0}, "alpha"),
    ({"query": "local_frequencies", "column": "page", "colour": 1}, "unknown parameter"),
    ({"query": "histogram", "column": "page", "epsilon": 1.0}, "local reports"),
    ({"query": "mean", "column": "page", "epsilon": 1.0}, "numeric column"),
    ({"query": "group_by", "by": ["page"], "epsilon": 1.0}, "group by categorical or int"),
]


@pytest.mark.parametrize(("body", "words"), BAD)
def test_refusals_charge_nothing(
    server: Any, client: Curator, key: str, body: dict[str, Any], words: str
) -> None:
    before = (_spent(client), len(client.results(1000)))
    r = server.http.post(
        "/v1/query", json={"dataset": "telemetry", **body},
        headers={"Authorization": f"Bearer {key}"},
    )  # fmt: skip
    assert r.status_code == 400, r.text
    assert words in r.json()["error"]["message"]
    assert (_spent(client), len(client.results(1000))) == before


@pytest.mark.parametrize(
    ("column", "words"),
    [
        ({"protocol": "OUE"}, "protocol"),
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"categories": ["only"]}, "2+ categories"),
    ],
)
def test_bad_local_columns_are_refused_at_registration(
    server: Any, truth: Any, column: dict[str, Any], words: str
) -> None:
    spec = {**TELEMETRY, "name": "bad", "columns": [{**TELEMETRY["columns"][0], **column}]}
    r = server.http.post(
        "/v1/admin/datasets", json=spec, headers={"Authorization": f"Bearer {server.admin_key}"}
    )
    assert r.status_code == 400 and words in r.json()["error"]["message"], r.text


def test_id_columns_at_registration(server: Any) -> None:
    (server.root / "imports" / "ids.csv").write_text("user,x\na,1\n,2\nb,3\n")
    spec = {"name": "ids", "source": "ids.csv", "total_epsilon": 1.0, "privacy_unit": "user",
            "columns": [{"name": "user", "type": "id"},
                        {"name": "x", "type": "float", "bounds": [0, 5]}]}  # fmt: skip
    headers = {"Authorization": f"Bearer {server.admin_key}"}
    r = server.http.post("/v1/admin/datasets", json=spec, headers=headers)
    assert r.status_code == 400 and "missing values" in r.json()["error"]["message"]
    r = server.http.post("/v1/admin/datasets", json={**spec, "privacy_unit": "row"},
                         headers=headers)  # fmt: skip
    assert r.status_code == 400 and "only be the privacy_unit" in r.json()["error"]["message"]
    r = server.http.post("/v1/admin/datasets", json={**spec, "privacy_unit": "x"},
                         headers=headers)  # fmt: skip
    assert r.status_code == 400 and "type 'id'" in r.json()["error"]["message"]
    (server.root / "imports" / "ids.csv").write_text("user,x\na,1\nb,2\na,3\n")
    assert server.admin("POST", "/v1/admin/datasets", spec)["privacy_unit"] == "user"


def test_schemas_stay_backward_compatible() -> None:
    old = {"name": "age", "type": "float", "bounds": [0.0, 100.0], "fill": 50.0}
    assert Column.from_dict(old).to_dict() == {"name": "age", "type": "float",
                                               "bounds": [0.0, 100.0], "fill": 50.0}  # fmt: skip
    spec = {**TELEMETRY["columns"][0]}  # type: ignore[dict-item]
    assert Column.from_dict(spec).to_dict() == {**spec, "epsilon": 1.0}
    schema = DatasetSchema.from_dict(TELEMETRY)
    assert DatasetSchema.from_dict(schema.to_dict()) == schema


def test_free_entries_may_not_charge() -> None:
    schema = DatasetSchema.from_dict(
        {"name": "t", "columns": [{"name": "x", "type": "float", "bounds": [0, 1]}]}
    )

    def cheat(params: Any, sch: Any) -> Prepared:
        def compute(t: Any, rng: Any, meter: Meter) -> Answer:
            return Answer(float(count(t.columns["x"], epsilon=1.0, accountant=meter, rng=rng)))

        return Prepared("cheat", 0.0, 0.0, compute, free=True)

    reg = QueryRegistry()
    reg.register("cheat", cheat)
    with pytest.raises(Exception, match="tried to charge"):
        reg.prepare("cheat", {}, schema, dummy_table(schema, 10))
    with pytest.raises(Exception, match="may not charge"):
        count(np.ones(3), epsilon=1.0, accountant=Meter(0.0, 0.0))


def test_free_and_grouped_queries_on_postgres(make_server: Any, pg_db: str) -> None:
    """The zero-cost charge and a group-by go through the PostgreSQL ledger like any other."""
    srv = make_server(ledger=pg_db)
    write_reports(srv.root / "imports")
    srv.admin("POST", "/v1/admin/datasets", TELEMETRY)
    aid, key = _grant(srv, "olga")
    srv.admin("PUT", "/v1/admin/budgets", {"analyst": aid, "dataset": "survey", "epsilon": 1.0})
    with Curator(srv.url, key) as c:
        f = c.local_frequencies("telemetry", "page", idempotency_key="pg-1")
        assert (
            f.n == USERS - len(DIRTY)
            and c.local_frequencies("telemetry", "page", idempotency_key="pg-1").raw["replayed"]
        )
        t = c.group_by("survey", "sex", epsilon=0.5)
        assert [r["sex"] for r in t.rows] == ["f", "m", "(other)"]
        spent = {b["dataset"]: b["spent_epsilon"] for b in c.budget()}
        assert spent == {"telemetry": 0.0, "survey": pytest.approx(0.5)}
    ledger = srv.admin("GET", "/v1/admin/ledger")["charges"]
    assert sorted((ch["query"], ch["epsilon"]) for ch in ledger) == [
        ("group_by", 0.5), ("local_frequencies", 0.0)
    ]  # fmt: skip
