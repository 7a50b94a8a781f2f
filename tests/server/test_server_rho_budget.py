"""Budgets in zero-concentrated DP (ρ) in the service's ledger (:mod:`dpkit.server._rho`).

A ρ budget adds each charge's ρ exactly (zCDP composes by adding ρ: Bun & Steinke 2016, Lemma
2.3), pays an ε-DP query ρ = ε²/2 (their Proposition 1.4), and refuses an (ε, δ > 0) query (no
lossless conversion) with a message saying what to ask instead. Real curators over real SQLite
ledgers; the PostgreSQL ledger is exercised in test_server_rho_concurrency.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.server import ServerConfig
from dpkit.server._auth import Principal
from dpkit.server._ledger import Ledger
from dpkit.server._service import Curator

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning")

COLS = [{"name": "x", "type": "float", "bounds": [0, 10]}]


def _curator(tmp_path: Path, **total: float) -> tuple[Curator, Principal]:
    (tmp_path / "imp").mkdir(exist_ok=True)
    (tmp_path / "imp" / "t.csv").write_text("x\n" + "\n".join(str(i % 10) for i in range(200)))
    cfg = ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp", dummy_rows=50)  # fmt: skip
    cur = Curator(cfg)
    cur.start()
    spec: dict[str, Any] = {"name": "t", "source": "t.csv", "columns": COLS}
    spec.update(total or {"total_epsilon": 100.0})
    cur.register_dataset(spec)
    a = cur.add_analyst("ana")
    return cur, Principal(a["id"], "ana", "analyst")


def _budget(cur: Curator, who: Principal) -> dict[str, Any]:
    (b,) = cur.ledger.budgets(who.id)
    return b


def test_rho_charges_add_exactly_and_exhaust_at_the_cap(tmp_path: Path) -> None:
    cur, who = _curator(tmp_path, total_rho=10.0)
    try:
        cur.ledger.set_budget(who.id, "t", 0.0, 0.0, rho=0.5)
        b = _budget(cur, who)
        assert (b["rho"], b["spent_rho"], b["remaining_rho"]) == (0.5, 0.0, 0.5)
        # the (ε, δ) a remaining ρ implies, shown only (Canonne, Kamath & Steinke 2020)
        assert b["remaining_as"]["delta"] == 1e-6 and 5.0 < b["remaining_as"]["epsilon"] < 7.0
        # ten charges of ρ = 0.05 (no δ: priced in ρ alone) exhaust 0.5 exactly, none more
        q = {"query": "count", "dataset": "t", "rho": 0.05}
        for _ in range(10):
            out = cur.query(who, dict(q))
            assert out["rho"] == 0.05 and out["epsilon"] == 0.0
        assert _budget(cur, who)["spent_rho"] == 0.5
        with pytest.raises(BudgetExceededError, match=r"rho=0\.05 but .* rho=0 left") as e:
            cur.query(who, dict(q))
        assert e.value.remaining == {"rho": 0.0}
        assert len(cur.ledger.charges(who.id)) == 10
        assert cur.ledger.check_consistency() == []
    finally:
        cur.close()


def test_pure_epsilon_is_charged_epsilon_squared_over_two(tmp_path: Path) -> None:
    cur, who = _curator(tmp_path)
    try:
        cur.ledger.set_budget(who.id, "t", 0.0, 0.0, rho=0.25)
        q = {"query": "sum", "dataset": "t", "column": "x", "epsilon": 0.5}
        quote = cur.query(who, {**q, "dry_run": True})
        assert quote["rho"] == 0.125 and quote["epsilon"] == 0.5
        # two ε = 0.5 answers cost ρ = 2 · 0.125: exactly the cap; a third is refused
        for _ in range(2):
            assert cur.query(who, q)["rho"] == 0.125
        with pytest.raises(BudgetExceededError, match=r"rho=0\.125 but"):
            cur.query(who, q)
        b = _budget(cur, who)
        assert b["spent_epsilon"] == 0.0 and b["spent_rho"] == 0.25
        # the dataset's total is in (ε, δ): it was charged ε
        assert cur.ledger.datasets()[0]["spent_epsilon"] == 1.0
        assert cur.ledger.check_consistency() == []
    finally:
        cur.close()


def test_epsilon_delta_requests_are_refused_by_a_rho_budget(tmp_path: Path) -> None:
    cur, who = _curator(tmp_path)
    try:
        cur.ledger.set_budget(who.id, "t", 0.0, 0.0, rho=1.0)
        gauss = {"query": "mean", "dataset": "t", "column": "x", "epsilon": 1.0, "delta": 1e-6}
        assert cur.query(who, {**gauss, "dry_run": True})["rho"] is None
        with pytest.raises(PrivacyParameterError, match="no lossless conversion to rho"):
            cur.query(who, gauss)
        assert cur.ledger.charges(who.id) == [] and _budget(cur, who)["spent_rho"] == 0
    finally:
        cur.close()


def test_rho_without_delta_is_refused_by_an_epsilon_budget(tmp_path: Path) -> None:
    cur, who = _curator(tmp_path, total_epsilon=100.0, total_delta=1e-4)
    try:
        cur.ledger.set_budget(who.id, "t", 5.0, 1e-5)
        q = {"query": "histogram", "dataset": "t", "column": "x", "rho": 0.1}
        quote = cur.query(who, {**q, "dry_run": True})
        assert quote["epsilon"] is None and quote["rho"] == 0.1
        with pytest.raises(PrivacyParameterError, match="give delta with rho"):
            cur.query(who, q)
        # with a δ the (ε, δ) budget pays ε(δ) of the same noise, as before
        out = cur.query(who, {**q, "delta": 1e-6})
        assert out["epsilon"] > 0 and out["delta"] == 1e-6 and out["rho"] == 0.1
        assert _budget(cur, who)["spent_epsilon"] == out["epsilon"]
    finally:
        cur.close()


def test_a_dataset_total_in_rho_caps_all_analysts(tmp_path: Path) -> None:
    cur, who = _curator(tmp_path, total_rho=0.3)
    try:
        (ds,) = cur.ledger.datasets()
        assert (ds["total_rho"], ds["spent_rho"], ds["total_epsilon"]) == (0.3, 0.0, 0.0)
        b2 = cur.add_analyst("bob")
        bob = Principal(b2["id"], "bob", "analyst")
        cur.ledger.set_budget(who.id, "t", 0.0, 0.0, rho=0.2)
        cur.ledger.set_budget(bob.id, "t", 10.0, 1e-5)  # an (ε, δ) budget on a ρ total
        cur.query(who, {"query": "count", "dataset": "t", "rho": 0.2})
        # bob's ε = 0.3 query costs the total ρ = 0.045: fits (0.2 + 0.045 <= 0.3)
        cur.query(bob, {"query": "count", "dataset": "t", "epsilon": 0.3})
        with pytest.raises(BudgetExceededError, match="total rho budget"):
            cur.query(bob, {"query": "count", "dataset": "t", "epsilon": 0.4})
        with pytest.raises(PrivacyParameterError, match=r"dataset's total budget .* rho"):
            q = {"query": "mean", "dataset": "t", "column": "x", "epsilon": 0.1, "delta": 1e-6}
            cur.query(bob, q)
        (ds,) = cur.ledger.datasets()
        assert 0.245 <= ds["spent_rho"] <= 0.245 + 2e-12
        assert cur.ledger.check_consistency() == []
    finally:
        cur.close()


def test_a_failed_rho_charge_is_refunded_in_rho(tmp_path: Path) -> None:
    cur, who = _curator(tmp_path, total_rho=1.0)
    try:
        cur.ledger.set_budget(who.id, "t", 0.0, 0.0, rho=1.0)
        led = cur.ledger
        c = led.reserve(who.id, "t", {"query": "count", "dataset": "t"}, None, 0.0, rho=0.25)
        assert _budget(cur, who)["spent_rho"] == 0.25
        led.fail(c.id, refund=True)
        assert _budget(cur, who)["spent_rho"] == 0.0 and led.datasets()[0]["spent_rho"] == 0.0
        assert led.check_consistency() == []
    finally:
        cur.close()


def test_declaring_rho_budgets_is_validated(tmp_path: Path) -> None:
    cur, who = _curator(tmp_path, total_rho=10.0)
    try:
        led = cur.ledger
        with pytest.raises(DataError, match="not both"):
            led.set_budget(who.id, "t", 1.0, 0.0, rho=0.5)
        led.set_budget(who.id, "t", 0.0, 0.0, rho=0.5)
        cur.query(who, {"query": "count", "dataset": "t", "rho": 0.1})
        with pytest.raises(DataError, match="below what the analyst already spent"):
            led.set_budget(who.id, "t", 0.0, 0.0, rho=0.05)
        with pytest.raises(DataError, match="cannot change between"):
            led.set_budget(who.id, "t", 5.0, 0.0)
        led.set_budget(who.id, "t", 0.0, 0.0, rho=0.7)  # raised: fine
        assert _budget(cur, who)["remaining_rho"] == 0.6
        with pytest.raises(DataError, match="total_rho, not both"):
            cur.register_dataset({"name": "u", "source": "t.csv", "columns": COLS,
                                  "total_epsilon": 1.0, "total_rho": 1.0})  # fmt: skip
    finally:
        cur.close()


def _old_ledger(path: Path) -> None:
    """A ledger file as the code before ρ budgets made it: migrations 1-3 only, with a
    dataset, an analyst, a budget and a released charge."""
    from dpkit.server._sql import MIGRATIONS

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    serial = "INTEGER PRIMARY KEY AUTOINCREMENT"
    for i, steps in enumerate(MIGRATIONS[:3], start=1):
        for step in steps:
            conn.execute(step.format(serial=serial))
        conn.execute("INSERT INTO schema_version VALUES (?)", (i,))
    u = 10**12
    schema = '{"name": "t", "columns": [{"name": "x", "type": "float", "bounds": [0, 10]}]}'
    conn.execute("INSERT INTO principals VALUES ('a1', 'ana', 'analyst', 'h', 0)")
    conn.execute(
        "INSERT INTO datasets (name, schema_json, total_epsilon, total_delta, spent_epsilon, "
        "created) VALUES ('t', ?, ?, 0, ?, 0)", (schema, 10 * u, u // 2),
    )  # fmt: skip
    conn.execute(
        "INSERT INTO budgets (analyst, dataset, epsilon, delta, spent_epsilon) "
        "VALUES ('a1', 't', ?, 0, ?)", (2 * u, u // 2),
    )  # fmt: skip
    conn.execute(
        "INSERT INTO charges (id, analyst, dataset, request_json, epsilon, delta, status, "
        "result_json, created) VALUES ('c1', 'a1', 't', '{\"query\": \"count\"}', ?, 0, "
        "'released', '{\"value\": 3}', 0)", (u // 2,),
    )  # fmt: skip
    conn.commit()
    conn.close()


def test_an_old_ledger_is_migrated_and_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_ledger(path)
    led = Ledger(str(path))
    try:
        assert led.migrate() == 4
        assert led.migrate() == 4  # applied once
        (b,) = led.budgets()
        assert (b["epsilon"], b["spent_epsilon"], b["remaining_epsilon"]) == (2.0, 0.5, 1.5)
        assert "rho" not in b  # an (ε, δ) budget, as it was
        old = led.charge("c1")
        assert old is not None and old.epsilon == 0.5 and old.rho is None
        c = led.reserve("a1", "t", {"query": "count"}, 1.0, 0.0, rho=0.5)
        assert c.epsilon == 1.0 and led.budgets()[0]["spent_epsilon"] == 1.5
        with pytest.raises(BudgetExceededError):
            led.reserve("a1", "t", {"query": "count"}, 0.6, 0.0, rho=0.18)
        # and the admin may now declare the (unspent) budget of a new dataset in ρ
        led.add_dataset("u", {"name": "u"}, 0.0, 0.0, rho=1.0)
        led.set_budget("a1", "u", 0.0, 0.0, rho=0.5)
        led.reserve("a1", "u", {"query": "count"}, None, 0.0, rho=0.5)
        assert led.budgets("a1")[1]["remaining_rho"] == 0.0
        assert led.check_consistency() == []
    finally:
        led.close()


def test_a_ledger_file_of_the_previous_version_opens_and_works(tmp_path: Path) -> None:
    # tests/server/data/ledger_schema3.sql: the dump of a ledger file made by the service
    # before ρ budgets (one analyst with ε = 2, δ = 1e-6 on "survey"; a released charge of
    # ε = 0.5 and a reserved one of (0.25, 1e-7))
    path = tmp_path / "ledger.db"
    conn = sqlite3.connect(path)
    conn.executescript((Path(__file__).parent / "data" / "ledger_schema3.sql").read_text())
    conn.close()
    led = Ledger(str(path))
    try:
        assert led.migrate() == 4
        (b,) = led.budgets()
        assert (b["spent_epsilon"], b["spent_delta"]) == (0.75, 1e-7) and "rho" not in b
        (released,) = [c for c in led.charges() if c.status == "released"]
        assert released.result == {"value": 120, "ci": None, "alpha": 0.05, "labels": None}
        # the idempotency key of the old charge still replays it
        again = led.reserve("a1", "survey", released.request, 0.5, 0.0, "k1", 1)
        assert again.replayed and again.id == released.id
        (reserved,) = [c for c in led.charges() if c.status == "reserved"]
        led.fail(reserved.id, refund=True)
        assert led.budgets()[0]["spent_delta"] == 0.0
        led.reserve("a1", "survey", {"query": "count"}, 1.5, 0.0, rho=1.125)
        assert led.budgets()[0]["remaining_epsilon"] == 0.0
        assert led.check_consistency() == []
    finally:
        led.close()


def test_rho_budgets_over_http_with_the_client(make_server: Any) -> None:
    from dpkit.client import Curator as Client
    from tests.server.conftest import SURVEY

    srv = make_server(datasets=[{k: v for k, v in SURVEY.items() if "total" not in k}
                                | {"total_rho": 2.0}])  # fmt: skip
    with Client(srv.url, srv.admin_key) as admin:
        a = admin.admin("POST", "/v1/admin/analysts", {"name": "ana"})
        admin.set_budget(a["id"], "survey", rho=0.3)
        with pytest.raises(DataError, match="not both"):
            admin.set_budget(a["id"], "survey", epsilon=1.0, rho=0.3)
        (ds,) = admin.admin("GET", "/v1/admin/datasets")["datasets"]
        assert (ds["total_rho"], ds["spent_rho"]) == (2.0, 0.0)
    with Client(srv.url, a["key"]) as c:
        quote = c.mean("survey", "age", rho=0.1, dry_run=True)
        assert quote["rho"] == 0.1 and quote["epsilon"] is None
        assert repr(quote) == "Quote(rho=0.1)"  # a mean's interval needs expected_n
        q2 = c.sum("survey", "age", rho=0.1, dry_run=True)
        assert repr(q2).startswith("Quote(rho=0.1, 95% noise interval +/- ")
        rel = c.mean("survey", "age", rho=0.1)
        assert rel.rho == 0.1 and 0 <= rel.value <= 100
        assert repr(c.count("survey", epsilon=0.5, dry_run=True)).startswith(
            "Quote(epsilon=0.5, delta=0, rho=0.125"
        )
        with pytest.raises(PrivacyParameterError, match="no lossless conversion to rho"):
            c.mean("survey", "age", epsilon=0.5, delta=1e-6)
        c.count("survey", rho=0.2)  # exactly what is left
        with pytest.raises(BudgetExceededError, match="rho=0 left") as e:
            c.count("survey", rho=0.01)
        assert e.value.remaining == {"rho": 0.0}
        (b,) = c.budget()
        assert (b["rho"], b["spent_rho"], b["remaining_rho"]) == (0.3, 0.3, 0.0)
        assert b["remaining_as"] == {"epsilon": 0.0, "delta": 1e-6}


def test_a_rho_meter_holds_exactly_the_rho_charged() -> None:
    import numpy as np

    import dpkit.stats as st
    from dpkit.server._registry import Meter

    x = np.arange(50.0)
    # the release of the price fits; one of 1e-6 more does not (the discrete Gaussian's scale
    # is calibrated on a grid, so an event's exact ρ may sit a few 1e-9 below the ρ asked)
    for r in (0.1, 1 / 3, 2.5e-9):
        st.count(x, accountant=Meter(0.0, 0.0, rho=r), rho=r)
        with pytest.raises(BudgetExceededError):
            st.count(x, accountant=Meter(0.0, 0.0, rho=r), rho=r * (1 + 1e-6))
