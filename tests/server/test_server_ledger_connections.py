"""The ledger's connections: one per thread, none left open to the collector.

A connection whose thread has ended is closed when the ledger next opens one, and ``close()``
closes every connection the ledger opened, in any thread; on a real PostgreSQL the server's own
count of sessions says so. (An unclosed psycopg connection warns when collected, which fails
a test under ``-W error``: once the threads that opened them had ended, they failed whichever
later test the collector happened to run in.)
"""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from dpkit.server import Ledger


def _sessions(url: str) -> int:
    """The PostgreSQL sessions on the ledger's database, other than the one asking."""
    with psycopg.connect(url, autocommit=True) as c:
        row = c.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _use(led: Ledger) -> int:
    return len(led.datasets())


def test_connections_of_ended_threads_are_closed_not_collected(pg_db: str) -> None:
    led = Ledger(pg_db)
    led.migrate()
    led.add_dataset("survey", {"name": "survey"}, 1.0, 1e-6)
    with ThreadPoolExecutor(8) as pool:  # eight threads, each with its own connection
        barrier = threading.Barrier(8)
        assert list(pool.map(lambda _: (barrier.wait(), _use(led))[1], range(8))) == [1] * 8
    assert _sessions(pg_db) == 9  # the eight threads' and this thread's
    # the threads have ended: the collector must find no open connection (-W error)
    gc.collect()
    assert _use(led) == 1  # this thread's connection is still usable
    t = threading.Thread(target=_use, args=(led,))
    t.start()
    t.join()  # opening a connection closed the eight of the ended threads
    assert _sessions(pg_db) in (1, 2)  # this thread's, and t's unless already closed
    led.close()
    assert _sessions(pg_db) == 0


def test_close_ends_every_threads_connection_and_the_ledger_stays_usable(
    pg_db: str,
) -> None:
    led = Ledger(pg_db)
    led.migrate()
    opened, resume = threading.Event(), threading.Event()
    results: list[int] = []

    def worker() -> None:  # keeps its thread alive across close()
        results.append(_use(led))
        opened.set()
        resume.wait(60)
        results.append(_use(led))  # a new connection, after close() ended the first

    t = threading.Thread(target=worker)
    t.start()
    assert opened.wait(60)
    _use(led)
    assert _sessions(pg_db) == 2
    led.close()  # no thread is inside the ledger now
    assert _sessions(pg_db) == 0
    resume.set()
    t.join(60)
    assert results == [0, 0]
    assert _sessions(pg_db) == 1
    led.close()
    assert _sessions(pg_db) == 0


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_collected_ledger_closes_its_connections(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = str(tmp_path / "l.db") if backend == "sqlite" else request.getfixturevalue("pg_db")
    led = Ledger(url)
    led.migrate()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(_use, [led] * 4))
    del led
    gc.collect()  # closed by the ledger, not found open by the collector (-W error)
    if backend == "postgres":
        assert _sessions(url) == 0
