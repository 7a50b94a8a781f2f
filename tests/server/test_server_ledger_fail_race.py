"""A charge is refunded at most once, and never after its answer, when two processes race.

``Ledger.fail`` read a charge's status, then updated it: on PostgreSQL (READ COMMITTED) the read
does not wait for a row another transaction is changing, so a second refund of the same charge
read "reserved" while the first was committing, and refunded the analyst again: a budget that
grew by what was spent. Now one statement moves the status only from "reserved" and returns the
amounts to refund, so the second one waits for the row, finds it refunded, and does nothing.
"""

from __future__ import annotations

import threading
import time

import psycopg

from dpkit.server import Ledger


def test_a_second_refund_racing_the_first_refunds_nothing(pg_db: str) -> None:
    led = Ledger(pg_db)
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_dataset("survey", {"name": "survey"}, 1.0, 1e-6)
    led.set_budget("a1", "survey", 1.0, 1e-6)
    cid = led.reserve("a1", "survey", {"query": "count"}, 0.25, 0.0).id
    errors: list[BaseException] = []

    def refund() -> None:
        try:
            led.fail(cid, refund=True)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    with psycopg.connect(pg_db, autocommit=True) as first:
        # the first refund, by another process: it holds the charge's row until it commits
        first.execute("BEGIN")
        first.execute("UPDATE charges SET status = 'refunded' WHERE id = %s", (cid,))
        t = threading.Thread(target=refund)
        t.start()
        time.sleep(0.5)  # the second refund is now waiting for the row (or read it already)
        first.execute("UPDATE datasets SET spent_epsilon = 0 WHERE name = 'survey'")
        first.execute("UPDATE budgets SET spent_epsilon = 0 WHERE analyst = 'a1'")
        first.execute("COMMIT")
        t.join(timeout=30)
    assert not t.is_alive() and errors == []
    assert led.budgets("a1")[0]["spent_epsilon"] == 0.0  # refunded once, not below zero
    assert led.datasets()[0]["spent_epsilon"] == 0.0
    assert led.check_consistency() == []
    led.close()


def test_a_released_charge_is_not_refunded(pg_db: str) -> None:
    led = Ledger(pg_db)
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_dataset("survey", {"name": "survey"}, 1.0, 1e-6)
    led.set_budget("a1", "survey", 1.0, 1e-6)
    cid = led.reserve("a1", "survey", {"query": "count"}, 0.25, 0.0).id
    led.release(cid, {"value": 1.0})
    led.fail(cid, refund=True)
    assert led.charge(cid).status == "released"  # type: ignore[union-attr]
    assert led.budgets("a1")[0]["spent_epsilon"] == 0.25
    led.close()
