"""The request audit never loses rows to one request's text: a NUL character (which PostgreSQL
refuses in text) or any other unstorable text is sanitized before it is queued, and a batch the
database refuses is written again row by row, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpkit.server import Ledger
from dpkit.server._sanitize import INVALID, audit_name, audit_path, audit_text
from tests.server.conftest import Server


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_db")
        return url
    return str(tmp_path / "ledger.db")


def _row(i: int, path: str = "/v1/me") -> tuple[Any, ...]:
    return (time.time(), None, "GET", path, None, None, 401, f"AuthError {i}")


def test_a_refused_row_does_not_lose_its_batch(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    led.migrate()
    # A row whose text no database stores as it is (a NUL reaching the ledger unsanitized, and
    # a lone surrogate, which is not UTF-8), among 20 good ones, in one batch.
    rows = (
        [_row(i) for i in range(10)]
        + [_row(99, "/x\x00y\ud800")]
        + [_row(i) for i in range(10, 20)]
    )
    led.write_audit(rows)
    got = led.audit(limit=1000)
    assert len(got) == 21
    outcomes = sorted(r["outcome"] for r in got)
    assert outcomes.count("(unstorable)") <= 1
    assert {f"AuthError {i}" for i in range(20)} <= set(outcomes)
    led.close()


def test_sanitizers() -> None:
    assert audit_text("a\x00b\x1b[2Jc\ud800", 100) == "a\ufffdb\ufffd[2Jc\ufffd"
    assert audit_text("x" * 500, 100) == "x" * 100
    assert audit_path("/v1/results/\x00<b>\ud800") == "/v1/results/%00%3Cb%3E%3F"
    assert len(audit_path("/" + "é" * 1000) or "") == 200
    assert audit_name("survey") == "survey"
    for bad in ("a\x00", "<b>", "", 3, ["survey"], "x" * 64):
        assert audit_name(bad) == INVALID


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_failed_key_guesses_are_all_audited_beside_a_nul(
    backend: str, request: pytest.FixtureRequest, make_server: Any
) -> None:
    ledger = request.getfixturevalue("pg_db") if backend == "postgres" else None
    s: Server = make_server(ledger=ledger)
    bad = {"Authorization": "Bearer dpk_admin_" + "A" * 43}
    _, key = s.analyst("ann", 1.0)
    with httpx.Client(base_url=s.url, timeout=30) as c:
        # one request with a NUL in its body's dataset and in its path, then 20 key guesses, all
        # within the audit writer's interval (one batch)
        nul = json.dumps({"dataset": "a\u0000b", "query": "mean\u0000", "epsilon": 1})
        c.post("/v1/query", content=nul, headers={"Authorization": f"Bearer {key}"})
        c.get("/v1/results/%00%3Cscript%3E", headers=bad)
        for _ in range(20):
            assert c.get("/v1/me", headers=bad).status_code == 401
    rows = s.admin("GET", "/v1/admin/audit?limit=1000")["audit"]
    guesses = [r for r in rows if r["path"] == "/v1/me" and r["status"] == 401]
    assert len(guesses) == 20
    query = [r for r in rows if r["path"] == "/v1/query"]
    assert len(query) == 1 and query[0]["dataset"] == INVALID and query[0]["query"] == INVALID
    paths = [r["path"] for r in rows if r["path"].startswith("/v1/results/")]
    assert paths == ["/v1/results/%00%3Cscript%3E"]
    assert "\x00" not in json.dumps(rows) and "<script>" not in json.dumps(rows)
