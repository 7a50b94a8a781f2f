"""Charges and answers written as one batch (a few statements per batch): each request is
decided as if alone, after the ones queued before it — on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import BudgetExceededError, DataError
from dpkit.server import Ledger, NoBudgetError
from dpkit.server._ledger import StaleDatasetError
from dpkit.server._sql import cost_units


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    url = str(tmp_path / "l.db") if request.param == "sqlite" else request.getfixturevalue("pg_db")
    led = Ledger(url)
    led.migrate()
    for pid in ("a", "b"):
        led.add_principal(pid, pid, "analyst", f"sha256:{pid}")
    led.add_dataset("d1", {"name": "d1"}, 10.0, 1e-3)
    led.add_dataset("d2", {"name": "d2"}, 10.0, 0.0)
    led.set_budget("a", "d1", 0.35, 0.0)  # three charges of 0.1, not four
    led.set_budget("b", "d1", 1.0, 1e-3)
    yield led
    led.close()


def _one_batch(ledger: Ledger, asks: list[tuple[Any, ...]]) -> list[Any]:
    """Queue every ``reserve(*ask)`` behind the held group lock, so that they run as one batch
    in this order; return each one's charge or error."""
    out: list[Any] = [None] * len(asks)
    group = ledger._group

    def ask(i: int) -> None:
        try:
            out[i] = ledger.reserve(*asks[i])
        except Exception as exc:
            out[i] = exc

    with group._lock:
        for i in range(len(asks)):  # one at a time, so that the queue keeps this order
            threading.Thread(target=ask, args=(i,)).start()
            while len(group._queue) < i + 1 and not (i == 0 and group._leading):
                threading.Event().wait(0.002)
        while len(group._queue) < len(asks):
            threading.Event().wait(0.002)
    while any(v is None for v in out):
        threading.Event().wait(0.01)
    return out


def test_a_batch_decides_each_request_after_the_ones_before_it(ledger: Ledger) -> None:
    mean = {"query": "mean", "column": "x"}
    asks = [
        ("a", "d1", mean, 0.1, 0.0),
        ("b", "d1", mean, 0.2, 1e-4, "k1"),
        ("a", "d1", mean, 0.1, 0.0),
        ("a", "d2", mean, 0.1, 0.0),  # no budget there
        ("b", "d1", mean, 0.2, 1e-4, "k1"),  # the same key, same request: replayed
        ("b", "d1", {"query": "sum"}, 0.2, 1e-4, "k1"),  # the same key, another request
        ("a", "d1", mean, 0.1, 0.0),
        ("a", "d1", mean, 0.1, 0.0),  # the fourth of a's: over its budget
        ("b", "d1", mean, 0.1, 0.0, None, 99),  # asked on a version the ledger does not have
        ("b", "d1", mean, 0.1, 0.0),
    ]
    out = _one_batch(ledger, asks)
    kinds = [type(o).__name__ for o in out]
    assert kinds == ["Charge", "Charge", "Charge", "NoBudgetError", "Charge", "DataError",
                     "Charge", "BudgetExceededError", "StaleDatasetError", "Charge"]  # fmt: skip
    assert isinstance(out[3], NoBudgetError) and isinstance(out[5], DataError)
    assert isinstance(out[7], BudgetExceededError) and isinstance(out[8], StaleDatasetError)
    assert out[4].replayed and out[4].id == out[1].id and not out[1].replayed
    assert len({o.id for o in out if type(o).__name__ == "Charge"}) == 5
    # The refusal names what was left at its turn (after a's three charges of 0.1).
    assert out[7].remaining[0] == pytest.approx(0.35 - 3 * 0.1, abs=1e-9)

    spent = {(r["analyst"], r["dataset"]): r for r in ledger.budgets()}
    assert spent[("a", "d1")]["spent_epsilon"] == 3 * cost_units(0.1) / 10**12
    assert spent[("b", "d1")]["spent_epsilon"] == (cost_units(0.2) + cost_units(0.1)) / 10**12
    assert spent[("b", "d1")]["spent_delta"] == cost_units(1e-4) / 10**12
    d1 = next(d for d in ledger.datasets() if d["name"] == "d1")
    assert d1["spent_epsilon"] == (4 * cost_units(0.1) + cost_units(0.2)) / 10**12
    charges = ledger.charges(None, 100)
    assert len(charges) == 5 and {c.status for c in charges} == {"reserved"}
    audit = [r for r in ledger.audit(None, 100) if r["kind"] == "charge"]
    assert sorted(r["outcome"] for r in audit) == sorted(f"reserved {c.id}" for c in charges)
    assert ledger.check_consistency() == []


def test_answers_of_a_batch_are_stored_together(ledger: Ledger) -> None:
    charges = [ledger.reserve("b", "d1", {"query": "count", "i": i}, 0.01, 0.0) for i in range(6)]
    group = ledger._group
    done: list[int] = []

    def release(i: int) -> None:
        ledger.release(charges[i].id, {"value": float(i)})
        done.append(i)

    with group._lock:
        threads = [threading.Thread(target=release, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        while len(group._queue) + int(group._leading) < 6:
            threading.Event().wait(0.002)
    for t in threads:
        t.join()
    assert sorted(done) == list(range(6))
    stored = {c.id: c for c in ledger.charges(None, 100)}
    for i, c in enumerate(charges):
        assert stored[c.id].status == "released" and stored[c.id].result == {"value": float(i)}
    ledger.release(charges[0].id, {"value": 99.0})  # a second answer is not stored over it
    assert ledger.charge(charges[0].id).result == {"value": 0.0}  # type: ignore[union-attr]


@pytest.mark.parametrize("update_from", [True, False])
def test_answers_of_a_batch_are_stored_each_on_its_own_reserved_charge(
    ledger: Ledger, update_from: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # More answers than one statement holds (100): every one lands on its own charge, and a
    # charge that is no longer reserved (failed) is left as it is.
    import dpkit.server._charges as charges_mod

    monkeypatch.setattr(charges_mod, "_UPDATE_FROM", update_from)
    ids = [ledger.reserve("b", "d1", {"query": "count", "i": i}, 0.001, 0.0).id for i in range(230)]
    ledger.fail(ids[7], refund=False)
    with ledger._tx() as conn:
        ledger._release_many(
            conn, [(f'{{"value": {i}}}', 1.0 + i, cid) for i, cid in enumerate(ids)]
        )
    for i, cid in enumerate(ids):
        c = ledger.charge(cid)
        assert c is not None
        if i == 7:
            assert (c.status, c.result) == ("failed", None)
        else:
            assert (c.status, c.result) == ("released", {"value": i})


def test_charge_ids_are_time_ordered_and_unguessable() -> None:
    import re

    import dpkit.server._charges as charges_mod

    ids = [charges_mod.new_charge_id(1_700_000_000.0 + k / 1000) for k in range(50)]
    assert all(re.fullmatch(r"[0-9a-f]{24}", i) for i in ids)
    assert ids == sorted(ids) and len({i[:14] for i in ids}) == 50  # one millisecond apart
    assert len({i[14:] for i in ids}) == 50  # 40 random bits each
