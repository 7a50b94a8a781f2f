"""A one-time dashboard link used by several requests at once opens one session, not several.

On PostgreSQL (read committed) each login read the link, then deleted it: requests racing on one
link all read it before any deletion was committed, and each opened a session. A link that
leaked (a proxy's log, a shoulder) could be used by an attacker at the moment its owner used
it. The link is now taken by its deletion (``DELETE … RETURNING``): one request gets it.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest

from dpkit.server import Ledger
from dpkit.server._auth import Principal
from dpkit.server._sessions import SessionStore


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_link_opens_one_session_whatever_the_race(
    backend: str, request: pytest.FixtureRequest, tmp_path: Any
) -> None:
    url = request.getfixturevalue("pg_db") if backend == "postgres" else str(tmp_path / "l.db")
    first = Ledger(url)
    first.migrate()
    first.add_principal("a1", "ada", "analyst", "sha256:k")
    ledgers = [first] + [Ledger(url) for _ in range(7)]  # one per worker process
    stores = [SessionStore(led) for led in ledgers]
    opened = 0
    for _ in range(10):
        token = stores[0].new_link(Principal("a1", "ada", "analyst"))
        barrier = threading.Barrier(len(stores))
        got: list[str | None] = []

        def use(
            store: SessionStore,
            t: str = token,
            b: threading.Barrier = barrier,
            got: list[str | None] = got,
        ) -> None:
            b.wait()
            got.append(store.login(t))

        threads = [threading.Thread(target=use, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sessions = [sid for sid in got if sid is not None]
        assert len(sessions) == 1, len(sessions)
        opened += 1
        assert stores[3].principal(sessions[0]) == Principal("a1", "ada", "analyst")
    assert opened == 10
    for led in ledgers:
        led.close()
    gc.collect()  # a connection left open fails this test (ResourceWarning), not a later one
