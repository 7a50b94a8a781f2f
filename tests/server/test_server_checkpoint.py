"""The service's ledger checkpoints its write-ahead log in a thread of its own."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

from dpkit.server import Ledger


def _charges_in_the_database_file(path: Path) -> int:
    # immutable=1 reads the database file alone, ignoring the write-ahead log.
    uri = f"file:{path}?mode=ro&immutable=1"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as c:
        try:
            return int(c.execute("SELECT COUNT(*) FROM charges").fetchone()[0])
        except sqlite3.OperationalError:  # not even the schema copied yet
            return 0


def test_commits_do_not_checkpoint_and_the_thread_does(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    led = Ledger(str(path), background_checkpoints=True)
    led.migrate()
    led.add_principal("a", "a", "analyst", "sha256:a")
    led.add_dataset("d", {"name": "d"}, 100.0, 0.0)
    led.set_budget("a", "d", 100.0, 0.0)
    assert led._conn().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    for i in range(200):
        led.reserve("a", "d", {"query": "count", "i": i}, 0.01, 0.0)
    deadline = time.monotonic() + 10
    while _charges_in_the_database_file(path) < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _charges_in_the_database_file(path) == 200  # copied by the checkpoint thread
    ck = led._checkpointer
    assert ck is not None
    led.stop_checkpoints()
    assert not ck._thread.is_alive() and led._checkpointer is None
    led.close()


def test_a_plain_ledger_checkpoints_on_its_commits(tmp_path: Path) -> None:
    led = Ledger(str(tmp_path / "ledger.db"))
    led.migrate()
    assert led._conn().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert led._checkpointer is None
    led.close()
