"""Dashboard sessions with several worker processes: a new key ends every session opened with
the old one, whichever worker holds the browser's connection, and a link made through one
worker opens on any other (sessions are kept in the ledger, checked against the current key)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dpkit.server import Ledger

SESSIONS = 16


def _open(server: Any, key: str) -> httpx.Client:
    """A browser of its own (its own connection, so its own worker) logged in to the dashboard."""
    c = httpx.Client(base_url=server.url, timeout=60)
    link = c.post("/v1/dashboard/token", headers={"X-API-Key": key}).json()["url"]
    assert c.get(link).status_code == 303
    assert c.get("/dashboard").status_code == 200
    return c


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_new_key_ends_every_dashboard_session_in_every_worker(
    backend: str, make_server: Any, request: pytest.FixtureRequest
) -> None:
    ledger_url = request.getfixturevalue("pg_db") if backend == "postgres" else None
    server = make_server(ledger=ledger_url, workers=3)
    aid, key = server.analyst("dora", 5.0)
    _, other_key = server.analyst("otto", 5.0)
    browsers = [_open(server, key) for _ in range(SESSIONS)]
    bystander = _open(server, other_key)
    unused = server.http.post("/v1/dashboard/token", headers={"X-API-Key": key}).json()["url"]
    try:
        server.admin("POST", f"/v1/admin/analysts/{aid}/key")
        codes = [b.get("/dashboard").status_code for b in browsers]
        assert codes == [401] * SESSIONS, f"{codes.count(200)} sessions survived the new key"
        assert bystander.get("/dashboard").status_code == 200  # another analyst's session
        assert browsers[0].get(unused).status_code == 401  # a link made with the old key
    finally:
        for b in [*browsers, bystander]:
            b.close()
    led = Ledger(server.ledger)
    try:  # only digests of session ids are stored, and the ended ones are gone
        rows = led._exec("SELECT id, principal FROM sessions").fetchall()
        assert rows and all(len(r[0]) == 64 and r[1] != aid for r in rows)
    finally:
        led.close()


def test_a_link_made_through_one_worker_opens_on_another(make_server: Any) -> None:
    server = make_server(workers=3)
    _, key = server.analyst("lena", 5.0)
    links = [
        server.http.post("/v1/dashboard/token", headers={"X-API-Key": key}).json()["url"]
        for _ in range(8)
    ]
    for link in links:  # each on a new connection: any worker
        with httpx.Client(base_url=server.url, timeout=60) as c:
            assert c.get(link).status_code == 303
            assert c.get("/dashboard").status_code == 200
            assert c.get(link).status_code == 401  # used once
