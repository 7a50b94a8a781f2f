"""ρ budgets under concurrent charges, and the migration of an old ledger, on SQLite and on a real
PostgreSQL server: the same row locks (``SELECT … FOR UPDATE``) and write lock as ε budgets, so
racing charges never overspend ρ; an old ledger opens, migrates once and keeps its charges."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import BudgetExceededError
from dpkit.server._charges import Charge
from dpkit.server._ledger import Ledger
from dpkit.server._sql import MIGRATIONS

U = 10**12


def _url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        url: str = request.getfixturevalue("pg_db")
        return url
    return str(tmp_path / "l.db")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_racing_rho_charges_never_overspend(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    led = Ledger(_url(backend, tmp_path, request))
    try:
        led.migrate()
        led.add_dataset("t", {"name": "t"}, 0.0, 0.0, rho=1.3)
        analysts = ["a", "b"]
        for a in analysts:
            led.add_principal(a, a, "analyst", "h" + a)
            led.set_budget(a, "t", 0.0, 0.0, rho=1.0)
        # 2 × 15 charges of ρ = 0.1 race: each analyst's 1.0 admits 10, the dataset's 1.3
        # admits 13 in all; exactly 13 are charged whatever the interleaving
        ok: list[Charge] = []
        refused: list[BaseException] = []
        lock = threading.Lock()
        start = threading.Barrier(30)

        def one(a: str) -> None:
            start.wait()
            try:
                c = led.reserve(a, "t", {"query": "count"}, None, 0.0, rho=0.1)
                with lock:
                    ok.append(c)
            except BudgetExceededError as exc:
                with lock:
                    refused.append(exc)

        threads = [threading.Thread(target=one, args=(a,)) for a in analysts for _ in range(15)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(ok) == 13 and len(refused) == 17
        (ds,) = led.datasets()
        assert ds["spent_rho"] == 1.3
        spent = {b["analyst"]: b["spent_rho"] for b in led.budgets()}
        assert all(v <= 1.0 for v in spent.values()) and sum(spent.values()) == pytest.approx(1.3)
        assert led.check_consistency() == []
    finally:
        led.close()


def _make_old(led: Ledger) -> None:
    """The ledger schema as it was before ρ budgets (migrations 1 to 3), with data in it."""
    serial = "BIGSERIAL PRIMARY KEY" if led.postgres else "INTEGER PRIMARY KEY AUTOINCREMENT"
    with led._tx() as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for i, steps in enumerate(MIGRATIONS[:3], start=1):
            for step in steps:
                conn.execute(step.format(serial=serial))
            conn.execute(led._sql("INSERT INTO schema_version VALUES (?)"), (i,))
        q = led._sql
        conn.execute(q("INSERT INTO principals VALUES ('a1', 'ana', 'analyst', 'h', 0)"))
        conn.execute(
            q("INSERT INTO datasets (name, schema_json, total_epsilon, total_delta, "
              "spent_epsilon, created) VALUES ('t', '{}', ?, 0, ?, 0)"), (10 * U, U),
        )  # fmt: skip
        conn.execute(
            q("INSERT INTO budgets (analyst, dataset, epsilon, delta, spent_epsilon) "
              "VALUES ('a1', 't', ?, 0, ?)"), (2 * U, U),
        )  # fmt: skip
        conn.execute(
            q("INSERT INTO charges (id, analyst, dataset, request_json, epsilon, delta, status, "
              "created) VALUES ('c1', 'a1', 't', '{}', ?, 0, 'reserved', 0)"), (U,),
        )  # fmt: skip


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_old_ledger_migrates_and_refunds_its_old_charges(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    led = Ledger(_url(backend, tmp_path, request))
    try:
        _make_old(led)
        assert led.migrate() == 4
        old: Any = led.charge("c1")
        assert old.epsilon == 1.0 and old.rho is None and old.status == "reserved"
        led.fail("c1", refund=True)  # an old charge is refunded in ε, as before
        (b,) = led.budgets()
        assert b["spent_epsilon"] == 0.0 and "rho" not in b
        assert led.datasets()[0]["spent_epsilon"] == 0.0
        # the old (ε, δ) budget keeps working; an unspent one may be declared in ρ now
        led.reserve("a1", "t", {"query": "count"}, 2.0, 0.0, rho=2.0)
        with pytest.raises(BudgetExceededError):
            led.reserve("a1", "t", {"query": "count"}, 1e-6, 0.0)
        assert led.check_consistency() == []
    finally:
        led.close()
