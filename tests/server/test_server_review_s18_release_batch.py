"""Answers stored as a batch keep the ledger's rule "the first answer of a charge is the one
kept", also when one batch holds two answers of the same charge (on SQLite they are stored by
one ``UPDATE … FROM (VALUES …)``, which applies an arbitrary one of the joined rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dpkit.server._charges as charges_mod
from dpkit.server import Ledger


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    url = str(tmp_path / "l.db") if request.param == "sqlite" else request.getfixturevalue("pg_db")
    led = Ledger(url)
    led.migrate()
    led.add_principal("b", "b", "analyst", "sha256:b")
    led.add_dataset("d1", {"name": "d1"}, 10.0, 1e-3)
    led.set_budget("b", "d1", 1.0, 1e-3)
    yield led
    led.close()


@pytest.mark.parametrize("update_from", [True, False])
def test_the_first_answer_of_a_charge_in_one_batch_is_kept(
    ledger: Ledger, update_from: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(charges_mod, "_UPDATE_FROM", update_from)
    ids = [ledger.reserve("b", "d1", {"query": "count", "i": i}, 0.001, 0.0).id for i in range(3)]
    items = [
        ('{"value": 1}', 1.0, ids[0]),
        ('{"value": 2}', 2.0, ids[1]),
        ('{"value": 99}', 3.0, ids[0]),  # a second answer of the first charge
        ('{"value": 3}', 4.0, ids[2]),
        ('{"value": 98}', 5.0, ids[1]),
    ]
    with ledger._tx() as conn:
        ledger._release_many(conn, items)
    got = [ledger.charge(cid) for cid in ids]
    assert [(c.status, c.result) for c in got if c is not None] == [
        ("released", {"value": 1}),
        ("released", {"value": 2}),
        ("released", {"value": 3}),
    ]
