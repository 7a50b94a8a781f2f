"""A charge's id tells its analyst nothing beyond the charge itself (review of the time-ordered
ids): its time part is the charge's ``created``, which the analyst is shown anyway, not the
moment the charge was decided inside its batch (which grew with the other analysts' requests
decided before it)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

import dpkit.server._charges as charges_mod
from dpkit.server import Ledger
from dpkit.server._charges import Charge, ask


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    url = str(tmp_path / "l.db") if request.param == "sqlite" else request.getfixturevalue("pg_db")
    led = Ledger(url)
    led.migrate()
    for pid in ("a", "b"):
        led.add_principal(pid, pid, "analyst", f"sha256:{pid}")
    led.add_dataset("d1", {"name": "d1"}, 10.0, 1e-3)
    led.set_budget("a", "d1", 1.0, 0.0)
    led.set_budget("b", "d1", 1.0, 0.0)
    yield led
    led.close()


def _micros(created: float) -> int:
    return math.floor(created * 1_000_000) % (1 << 56)


def test_an_id_shows_only_its_charges_created_time(ledger: Ledger) -> None:
    # 300 of b's requests are decided before a's in one batch: a's id must not show how long
    # that took (it did, to the microsecond, when its time part was read at decision time).
    asks = [ask("b", "d1", {"query": "count", "i": i}, 0.001, 0.0, None, None) for i in range(300)]
    asks.append(ask("a", "d1", {"query": "count"}, 0.001, 0.0, None, None))
    with ledger._tx() as conn:
        out = ledger._reserve_many(conn, asks)
    charges = [c for c in out if isinstance(c, Charge)]
    assert len(charges) == 301
    for c in charges:
        assert re.fullmatch(r"[0-9a-f]{24}", c.id)
        assert int(c.id[:14], 16) == _micros(c.created)
    mine = charges[-1]
    stored = ledger.charge(mine.id)
    assert stored is not None and stored.analyst == "a"
    assert int(mine.id[:14], 16) == _micros(stored.created)  # as the analyst is shown it
    assert len({c.id for c in charges}) == 301


def test_ids_of_one_batch_never_repeat(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    # The charges of a batch share their time part; a repeat of the random part within the
    # batch is drawn again rather than failing the whole batch on the ledger's key.
    draws = iter(["0000000001"] * 3 + [f"{k:010x}" for k in range(2, 100)])
    monkeypatch.setattr(charges_mod.secrets, "token_hex", lambda n: next(draws))
    asks = [ask("b", "d1", {"query": "count", "i": i}, 0.001, 0.0, None, None) for i in range(5)]
    with ledger._tx() as conn:
        out = ledger._reserve_many(conn, asks)
    assert all(isinstance(c, Charge) for c in out)
    ids = [c.id for c in out if isinstance(c, Charge)]
    assert len(set(ids)) == 5
    assert [ledger.charge(i) is not None for i in ids] == [True] * 5
