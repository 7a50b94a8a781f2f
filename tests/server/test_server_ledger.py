"""The ledger on its own, on SQLite and on a real PostgreSQL: exact units, refusals, idempotency,
refunds, migrations and the consistency check."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import BudgetExceededError, DataError
from dpkit.server import Ledger, NoBudgetError
from dpkit.server._sql import cost_units, limit_units


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        led = Ledger(str(tmp_path / "ledger.db"))
    else:
        led = Ledger(request.getfixturevalue("pg_db"))
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_principal("a2", "bob", "analyst", "sha256:y")
    led.add_dataset("survey", {"name": "survey"}, 1.0, 1e-6)
    led.set_budget("a1", "survey", 1.0, 1e-6)
    yield led
    led.close()


def test_units_round_in_the_safe_direction() -> None:
    # 0.1 is 0.1000000000000000055… in binary: within the one definition's resolution (a relative
    # 2⁻⁵⁰, docs/accounting.md) it is the decimal 0.1, exactly 10^11 units as cost and budget
    assert cost_units(0.1) == 10**11 == limit_units(0.1)
    assert cost_units(0.1 + 1e-12) == 10**11 + 1 and limit_units(0.1 - 1e-12) == 10**11 - 1
    assert cost_units(1e-300) == 1  # a tiny cost is still charged
    assert limit_units(1e-300) == 0


def test_ten_charges_of_a_tenth_fit_a_budget_of_one_and_no_more(ledger: Ledger) -> None:
    # 0.1 as a double is 0.1000000000000000055…; the one budget arithmetic (shared with the
    # library's Accountant) takes it as the decimal 0.1 (10^11 units), so ten fit a budget of 1
    # (10^12 units) exactly and an eleventh, however small, is refused.
    for _ in range(10):
        ledger.reserve("a1", "survey", {"query": "count"}, 0.1, 0.0)
    with pytest.raises(BudgetExceededError, match="Nothing was charged"):
        ledger.reserve("a1", "survey", {"query": "count"}, 1e-12, 0.0)
    b = ledger.budgets("a1")[0]
    assert b["spent_epsilon"] == 1.0
    # 1/8 is exact in binary: eight of them fit a budget of 1 exactly.
    ledger.set_budget("a2", "survey", 1.0, 0.0)
    ledger.add_dataset("other", {"name": "other"}, 1.0, 0.0)
    ledger.set_budget("a2", "other", 1.0, 0.0)
    for _ in range(8):
        ledger.reserve("a2", "other", {"query": "count"}, 0.125, 0.0)
    with pytest.raises(BudgetExceededError):
        ledger.reserve("a2", "other", {"query": "count"}, 1e-12, 0.0)
    assert ledger.check_consistency() == []


def test_delta_and_dataset_total_are_enforced(ledger: Ledger) -> None:
    with pytest.raises(BudgetExceededError):
        ledger.reserve("a1", "survey", {"query": "mean"}, 0.1, 2e-6)
    ledger.set_budget("a2", "survey", 5.0, 1e-6)  # bob's budget is larger than the total
    ledger.reserve("a2", "survey", {"query": "mean"}, 0.7, 0.0)
    with pytest.raises(BudgetExceededError, match="total budget"):
        ledger.reserve("a1", "survey", {"query": "mean"}, 0.5, 0.0)
    assert ledger.budgets("a1")[0]["spent_epsilon"] == 0.0


def test_no_budget_and_unknown_dataset(ledger: Ledger) -> None:
    with pytest.raises(NoBudgetError):
        ledger.reserve("a2", "survey", {"query": "mean"}, 0.1, 0.0)
    with pytest.raises(NoBudgetError):
        ledger.reserve("a1", "nothing", {"query": "mean"}, 0.1, 0.0)
    with pytest.raises(DataError):
        ledger.set_budget("a1", "nothing", 1.0, 0.0)


def test_idempotency_key_charges_once(ledger: Ledger) -> None:
    first = ledger.reserve("a1", "survey", {"query": "mean", "e": 1}, 0.3, 0.0, "k1")
    again = ledger.reserve("a1", "survey", {"query": "mean", "e": 1}, 0.3, 0.0, "k1")
    assert again.replayed and again.id == first.id
    assert ledger.budgets("a1")[0]["spent_epsilon"] == pytest.approx(0.3, abs=1e-11)
    with pytest.raises(DataError, match="different request"):
        ledger.reserve("a1", "survey", {"query": "mean", "e": 2}, 0.3, 0.0, "k1")
    # The same key of another analyst is another request.
    ledger.set_budget("a2", "survey", 1.0, 0.0)
    other = ledger.reserve("a2", "survey", {"query": "mean", "e": 1}, 0.3, 0.0, "k1")
    assert other.id != first.id and not other.replayed


def test_release_fail_refund(ledger: Ledger) -> None:
    a = ledger.reserve("a1", "survey", {"query": "mean"}, 0.25, 0.0)
    ledger.release(a.id, {"value": 1.5, "ci": [1.0, 2.0]})
    b = ledger.reserve("a1", "survey", {"query": "mean"}, 0.25, 0.0)
    ledger.fail(b.id, refund=False)  # noise may have been drawn: stays charged
    c = ledger.reserve("a1", "survey", {"query": "mean"}, 0.25, 0.0)
    ledger.fail(c.id, refund=True)  # failed before any noise: refunded
    charged = {ch.id: ch.status for ch in ledger.charges("a1")}
    assert charged == {a.id: "released", b.id: "failed", c.id: "refunded"}
    assert ledger.budgets("a1")[0]["spent_epsilon"] == pytest.approx(0.5, abs=1e-11)
    got = ledger.charge(a.id)
    assert got is not None and got.result == {"value": 1.5, "ci": [1.0, 2.0]}
    assert ledger.check_consistency() == []


def test_budget_cannot_go_below_spent(ledger: Ledger) -> None:
    ledger.reserve("a1", "survey", {"query": "mean"}, 0.5, 0.0)
    with pytest.raises(DataError, match="below"):
        ledger.set_budget("a1", "survey", 0.25, 1e-6)


def test_migrate_is_idempotent_and_concurrent(ledger: Ledger) -> None:
    errors: list[BaseException] = []

    def again() -> None:
        try:
            other = Ledger(ledger.url)
            assert other.migrate() == 4
            other.close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=again) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ledger.datasets()[0]["name"] == "survey"


def test_consistency_check_finds_tampering(tmp_path: Path) -> None:
    led = Ledger(str(tmp_path / "l.db"))
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_dataset("survey", {"name": "survey"}, 1.0, 0.0)
    led.set_budget("a1", "survey", 1.0, 0.0)
    led.reserve("a1", "survey", {"query": "mean"}, 0.5, 0.0)
    assert led.check_consistency() == []
    conn = sqlite3.connect(tmp_path / "l.db")
    conn.execute("UPDATE budgets SET spent_epsilon = 0")
    conn.commit()
    conn.close()
    problems = led.check_consistency()
    assert any("budgets" in p for p in problems)


def test_sqlite_pragmas(tmp_path: Path) -> None:
    led = Ledger(str(tmp_path / "l.db"))
    led.migrate()
    conn = led._conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_group_commit_under_threads(ledger: Ledger) -> None:
    """50 threads charge at once (SQLite: batched in shared transactions, each in a savepoint):
    exactly the 8 charges that fit go through, and the refused ones leave no trace."""
    ledger.set_budget("a2", "survey", 1.0, 0.0)
    start = threading.Barrier(50)
    outcomes: list[str] = []

    def one(i: int) -> None:
        start.wait()
        try:
            ledger.reserve("a2", "survey", {"query": "count", "i": i}, 0.125, 0.0, f"k{i}")
            outcomes.append("ok")
        except BudgetExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 8 and outcomes.count("refused") == 42
    assert len(ledger.charges("a2")) == 8
    assert ledger.check_consistency() == []
