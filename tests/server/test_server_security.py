"""Hostile and malformed requests against a real service: each gets a 4xx with a clear message,
and nothing is charged (the ledger's spent budget and its charges are unchanged)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

GOOD = {"dataset": "survey", "query": "mean", "column": "age", "epsilon": 0.1}


@pytest.fixture(scope="module")
def alice(server: Any) -> tuple[str, str]:
    return server.analyst("alice", 100.0)


@pytest.fixture(scope="module")
def bob(server: Any) -> tuple[str, str]:
    return server.analyst("bob", 100.0)


def _spent(server: Any) -> tuple[float, int]:
    ds = server.admin("GET", "/v1/admin/datasets")["datasets"][0]
    charges = server.admin("GET", "/v1/admin/ledger?limit=10000")["charges"]
    return ds["spent_epsilon"], len(charges)


def _post(server: Any, key: str | None, content: bytes | str, **headers: str) -> httpx.Response:
    h = {"Content-Type": "application/json", **headers}
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    return server.http.post("/v1/query", content=content, headers=h)


def _check_refused(r: httpx.Response, status: int, words: str) -> None:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert words.lower() in err["message"].lower(), err


def test_good_request_is_charged(server: Any, alice: tuple[str, str]) -> None:
    """The control: the same machinery does charge a valid request."""
    before = _spent(server)
    r = _post(server, alice[1], json.dumps(GOOD))
    assert r.status_code == 200, r.text
    after = _spent(server)
    assert after[0] == pytest.approx(before[0] + 0.1) and after[1] == before[1] + 1


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (None, "missing or invalid"),
        ("not-a-key", "missing or invalid"),
        ("dpk_admin_" + "A" * 43, "missing or invalid"),
        ("dpk_nobody1_" + "A" * 43, "missing or invalid"),
    ],
)
def test_no_key_or_wrong_key(server: Any, key: str | None, words: str) -> None:
    before = _spent(server)
    r = _post(server, key, json.dumps(GOOD))
    _check_refused(r, 401, words)
    assert _spent(server) == before


def test_tampered_key_of_a_real_analyst(server: Any, alice: tuple[str, str]) -> None:
    before = _spent(server)
    key = alice[1][:-1] + ("B" if alice[1][-1] != "B" else "C")
    _check_refused(_post(server, key, json.dumps(GOOD)), 401, "invalid")
    assert _spent(server) == before


def test_foreign_results_are_not_visible(
    server: Any, alice: tuple[str, str], bob: tuple[str, str]
) -> None:
    r = _post(server, alice[1], json.dumps(GOOD))
    rid = r.json()["id"]
    mine = server.http.get(f"/v1/results/{rid}", headers={"X-API-Key": alice[1]})
    assert mine.status_code == 200 and mine.json()["value"] == r.json()["value"]
    theirs = server.http.get(f"/v1/results/{rid}", headers={"X-API-Key": bob[1]})
    _check_refused(theirs, 404, "no result")
    listed = server.http.get("/v1/results", headers={"X-API-Key": bob[1]}).json()
    assert all(x["id"] != rid for x in listed["results"])
    # An analyst cannot use admin endpoints.
    adm = server.http.get("/v1/admin/ledger", headers={"X-API-Key": bob[1]})
    _check_refused(adm, 403, "admin")
    adm = server.http.get("/v1/admin/audit", headers={"X-API-Key": bob[1]})
    _check_refused(adm, 403, "admin")


def test_admin_cannot_query(server: Any) -> None:
    before = _spent(server)
    _check_refused(_post(server, server.admin_key, json.dumps(GOOD)), 403, "analyst")
    assert _spent(server) == before


BAD: list[tuple[dict[str, Any], int, str]] = [
    ({**GOOD, "dataset": "../../etc/passwd"}, 400, "dataset must be a name"),
    ({**GOOD, "dataset": "survey; DROP TABLE charges"}, 400, "dataset must be a name"),
    ({**GOOD, "dataset": "Survey"}, 404, "no dataset"),
    ({**GOOD, "dataset": "surv\u0435y"}, 400, "dataset must be a name"),  # Cyrillic e
    ({**GOOD, "dataset": None}, 400, "dataset must be a name"),
    ({**GOOD, "column": "../age"}, 400, "column must be a name"),
    ({**GOOD, "column": "age\x00"}, 400, "column must be a name"),
    ({**GOOD, "column": "nope"}, 400, "no column"),
    ({**GOOD, "column": ["age"]}, 400, "column must be a name"),
    ({**GOOD, "column": "sex"}, 400, "categorical"),
    ({**GOOD, "epsilon": 0}, 400, "epsilon"),
    ({**GOOD, "epsilon": -0.5}, 400, "epsilon"),
    ({**GOOD, "epsilon": "0.5"}, 400, "epsilon"),
    ({**GOOD, "epsilon": None}, 400, "epsilon"),
    ({**GOOD, "epsilon": 1e400}, 400, "epsilon"),  # JSON overflow: parsed as inf
    ({**GOOD, "delta": 1.0}, 400, "delta"),
    ({**GOOD, "delta": -1e-9}, 400, "delta"),
    ({**GOOD, "query": "exec"}, 400, "unknown query type"),
    ({**GOOD, "query": "__class__"}, 400, "unknown query type"),
    ({**GOOD, "query": None}, 400, "unknown query type"),
    ({**GOOD, "epsilom": 1}, 400, "unknown parameter"),
    ({**GOOD, "bounds": [100, 0]}, 400, "bounds"),
    ({**GOOD, "dry_run": "yes"}, 400, "dry_run"),
    ({**GOOD, "idempotency_key": "../../x"}, 400, "idempotency key"),
]


@pytest.mark.parametrize(("body", "status", "words"), BAD)
def test_malformed_requests(
    server: Any, alice: tuple[str, str], body: dict[str, Any], status: int, words: str
) -> None:
    before = _spent(server)
    text = json.dumps(body).replace("Infinity", "1e400")
    _check_refused(_post(server, alice[1], text), status, words)
    assert _spent(server) == before


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b'{"dataset": "survey", "query": "mean", "column": "age", "epsilon": NaN}',
        b'{"dataset": "survey", "query": "mean", "column": "age", "epsilon": Infinity}',
        b"\xff\xfe\x00garbage",
        b"[" * 100_00 + b"]" * 100_00,
        b"",
        b"[1, 2]",
    ],
)
def test_malformed_json(server: Any, alice: tuple[str, str], raw: bytes) -> None:
    before = _spent(server)
    r = _post(server, alice[1], raw)
    assert r.status_code in (400, 413), r.text
    assert "error" in r.json()
    assert _spent(server) == before


def test_oversized_bodies(server: Any, alice: tuple[str, str]) -> None:
    before = _spent(server)
    big = json.dumps({**GOOD, "pad": "x" * 20_000})
    _check_refused(_post(server, alice[1], big), 413, "larger than")

    def chunks() -> Any:  # no Content-Length: the limit is enforced while reading
        for _ in range(100):
            yield b" " * 1000

    r = server.http.post(
        "/v1/query", content=chunks(), headers={"Authorization": f"Bearer {alice[1]}"}
    )
    _check_refused(r, 413, "larger than")
    assert _spent(server) == before


def test_error_messages_do_not_echo_values(server: Any, alice: tuple[str, str]) -> None:
    secret = "Zq7secretVALUE"
    for body in (
        {**GOOD, "column": secret + "!"},
        {**GOOD, "dataset": secret + "/"},
        {**GOOD, secret: 1},
    ):
        r = _post(server, alice[1], json.dumps(body))
        assert r.status_code == 400 and secret not in r.text


def test_every_request_is_audited(server: Any, alice: tuple[str, str]) -> None:
    _post(server, None, json.dumps(GOOD))
    _post(server, alice[1], json.dumps({**GOOD, "epsilon": -1}))
    rows = server.admin("GET", "/v1/admin/audit?limit=10000")["audit"]
    statuses = [(r["status"], r["principal"]) for r in rows if r["kind"] == "request"]
    assert (401, None) in statuses
    assert (400, alice[0]) in statuses
    charges = [r for r in rows if r["kind"] == "charge"]
    assert charges and all(r["epsilon"] > 0 for r in charges)
    # Filtered by principal:
    only = server.admin("GET", f"/v1/admin/audit?principal={alice[0]}")["audit"]
    assert only and all(r["principal"] == alice[0] for r in only)


def test_openapi_docs_are_served(server: Any) -> None:
    spec = server.http.get("/openapi.json").json()
    assert "/v1/query" in spec["paths"] and "/v1/admin/ledger" in spec["paths"]
    assert server.http.get("/docs").status_code == 200
