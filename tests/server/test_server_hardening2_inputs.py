"""Every numeric field of every endpoint goes through one parser (huge integers, 1e400, NaN,
booleans: a 4xx, nothing charged, the connection kept), and no response ever echoes a string
the client sent (a marker in every field of every endpoint), on SQLite and PostgreSQL ledgers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Server

MARK = "<script>zq9x-mark</script>"
"""A string no answer can hold by chance: it must never come back, in a body or a header."""

EXTRA = {
    "name": "extra",
    "source": "extra.csv",
    "total_epsilon": 1000.0,
    "total_delta": 0.5,
    "columns": [
        {"name": "k", "type": "int", "bounds": [0, 5]},
        {"name": "x", "type": "float", "bounds": [0, 10]},
        {"name": "c", "type": "category", "categories": ["a", "b"]},
        {"name": "r", "type": "local", "protocol": "GRR", "epsilon": 1.0,
         "categories": ["a", "b", "c"]},
    ],
}  # fmt: skip


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def svc(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, str, str]]:
    """A service with the survey and a dataset of every column type; an analyst (id, key)."""
    ledger = None
    if request.param == "postgres":
        import psycopg

        base = request.getfixturevalue("postgres").rsplit("/", 1)[0]
        with psycopg.connect(base + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE hardening2_inputs")
        ledger = base + "/hardening2_inputs"
    root = tmp_path_factory.mktemp("inputs")
    s = Server(root, ledger=ledger)
    rows = "".join(f"{i % 6},{i % 10},{'ab'[i % 2]},{i % 3}\n" for i in range(60))
    (root / "imports" / "extra.csv").write_text("k,x,c,r\n" + rows)
    s.admin("POST", "/v1/admin/datasets", EXTRA)
    aid, key = s.analyst("ann", 1000.0, 0.5)
    s.admin("PUT", "/v1/admin/budgets", {"analyst": aid, "dataset": "extra", "epsilon": 1000.0,
                                         "delta": 0.5})  # fmt: skip
    yield s, aid, key
    s.stop()


def _charged(s: Server) -> tuple[int, list[float]]:
    charges = s.admin("GET", "/v1/admin/ledger?limit=10000")["charges"]
    spent = [d["spent_epsilon"] for d in s.admin("GET", "/v1/admin/datasets")["datasets"]]
    return len(charges), spent


# Every numeric field a request may hold, as (endpoint, a valid body, the path to the field).
Q = "/v1/query"
SURVEY_MEAN = {"dataset": "survey", "query": "mean", "column": "age", "epsilon": 0.5}
GROUP = {"dataset": "extra", "query": "group_by", "by": ["k"], "epsilon": 0.5}
NUMERIC_FIELDS: list[tuple[str, dict[str, Any], tuple[Any, ...]]] = [
    (Q, SURVEY_MEAN, ("epsilon",)),
    (Q, {**SURVEY_MEAN, "delta": 1e-6}, ("delta",)),
    (Q, {**SURVEY_MEAN, "alpha": 0.05}, ("alpha",)),
    (Q, {**SURVEY_MEAN, "bounds": [0, 100]}, ("bounds", 0)),
    (Q, {**SURVEY_MEAN, "bounds": [0, 100]}, ("bounds", 1)),
    (Q, {**SURVEY_MEAN, "query": "sum", "bounds": [0, 100]}, ("bounds", 1)),
    (Q, {**SURVEY_MEAN, "query": "var", "ddof": 1}, ("ddof",)),
    (Q, {**SURVEY_MEAN, "query": "std", "alpha": 0.1}, ("alpha",)),
    (Q, {**SURVEY_MEAN, "query": "std", "bounds": [0, 100]}, ("bounds", 0)),
    (Q, {"dataset": "survey", "query": "count", "epsilon": 0.5}, ("epsilon",)),
    (Q, {"dataset": "survey", "query": "count", "epsilon": 0.5, "alpha": 0.1}, ("alpha",)),
    (
        Q,
        {
            "dataset": "survey",
            "query": "cov",
            "columns": ["age", "income"],
            "epsilon": 0.5,
            "bounds": [[0, 100], [0, 200]],
        },
        ("bounds", 1, 0),
    ),
    (
        Q,
        {
            "dataset": "survey",
            "query": "corr",
            "columns": ["age", "income"],
            "epsilon": 0.5,
            "bounds": [[0, 100], [0, 200]],
        },
        ("bounds", 0, 1),
    ),
    (Q, {**SURVEY_MEAN, "query": "quantiles", "q": [0.5]}, ("q", 0)),
    (Q, {**SURVEY_MEAN, "query": "quantiles", "bounds": [0, 100]}, ("bounds", 1)),
    (Q, {**SURVEY_MEAN, "query": "histogram", "bins": 10}, ("bins",)),
    (Q, {**SURVEY_MEAN, "query": "histogram", "bins": [0, 50, 100]}, ("bins", 1)),
    (Q, {**GROUP, "alpha": 0.05}, ("alpha",)),
    (Q, {**GROUP, "delta": 1e-6}, ("delta",)),
    (Q, {**GROUP, "max_rows": 2}, ("max_rows",)),
    (Q, {**GROUP, "max_groups": 2}, ("max_groups",)),
    (Q, {**GROUP, "max_rows_per_unit": 2}, ("max_rows_per_unit",)),
    (Q, {**GROUP, "keys": [1, 2]}, ("keys", 0)),
    (
        Q,
        {**GROUP, "aggregations": [{"stat": "sum", "column": "x", "bounds": [0, 10]}]},
        ("aggregations", 0, "bounds", 1),
    ),
    (
        Q,
        {**GROUP, "aggregations": [{"stat": "quantiles", "column": "x", "q": [0.5]}]},
        ("aggregations", 0, "q", 0),
    ),
    (
        Q,
        {
            "dataset": "extra",
            "query": "synthesize",
            "columns": ["x"],
            "epsilon": 0.5,
            "delta": 1e-6,
            "rows": 5,
        },
        ("rows",),
    ),
    (
        Q,
        {
            "dataset": "extra",
            "query": "synthesize",
            "columns": ["x"],
            "epsilon": 0.5,
            "delta": 1e-6,
            "rows": 5,
            "bins": 4,
        },
        ("bins",),
    ),
    (
        Q,
        {
            "dataset": "extra",
            "query": "synthesize",
            "columns": ["x"],
            "epsilon": 0.5,
            "delta": 1e-6,
            "rows": 5,
        },
        ("delta",),
    ),
    (
        Q,
        {"dataset": "extra", "query": "local_frequencies", "column": "r", "alpha": 0.05},
        ("alpha",),
    ),
    ("/v1/admin/budgets", {"analyst": "?", "dataset": "survey", "epsilon": 1.0}, ("epsilon",)),
    (
        "/v1/admin/budgets",
        {"analyst": "?", "dataset": "survey", "epsilon": 1.0, "delta": 0.0},
        ("delta",),
    ),
    ("/v1/admin/datasets", {**EXTRA, "name": "extra2"}, ("total_epsilon",)),
    ("/v1/admin/datasets", {**EXTRA, "name": "extra2"}, ("total_delta",)),
    ("/v1/admin/datasets", {**EXTRA, "name": "extra2"}, ("columns", 0, "bounds", 1)),
    ("/v1/admin/datasets", {**EXTRA, "name": "extra2"}, ("columns", 1, "bounds", 0)),
    (
        "/v1/admin/datasets",
        {
            **EXTRA,
            "name": "extra2",
            "columns": [{"name": "x", "type": "float", "bounds": [0, 10], "fill": 1}],
        },
        ("columns", 0, "fill"),
    ),
    ("/v1/admin/datasets", {**EXTRA, "name": "extra2"}, ("columns", 3, "epsilon")),
]
BAD_NUMBERS = ["1" + "0" * 400, "-" + "9" * 400, "1e400", "-1e400", "true", '"1"']
"""JSON text put in place of the number: integers past a float64, numbers that parse to ±inf,
a boolean and a string."""


def _put(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    body = json.loads(json.dumps(body))
    node = body
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return body


def _send(s: Server, key: str, endpoint: str, text: str) -> httpx.Response:
    method = "PUT" if endpoint.endswith("budgets") else "POST"
    h = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    return s.http.request(method, endpoint, content=text, headers=h)


def test_every_numeric_field_refuses_unparsable_numbers(svc: tuple[Server, str, str]) -> None:
    s, aid, key = svc
    before = _charged(s)
    for endpoint, body, path in NUMERIC_FIELDS:
        who = key if endpoint == Q else s.admin_key
        body = _put(body, ("analyst",), aid) if "analyst" in body else body
        for bad in BAD_NUMBERS:
            text = json.dumps(_put(body, path, "__N__")).replace('"__N__"', bad)
            r = _send(s, who, endpoint, text)
            assert 400 <= r.status_code < 500, (endpoint, path, bad[:10], r.status_code, r.text)
            msg = r.json()["error"]["message"]
            # the message names the field (or says a number was expected), never the value
            assert str(path[0])[:3] in msg.lower() or "number" in msg, (path, msg)
    # the connection was never dropped, and nothing was charged or registered
    assert _charged(s) == before
    names = {d["name"] for d in s.admin("GET", "/v1/admin/datasets")["datasets"]}
    assert "extra2" not in names


def test_huge_limits_in_query_strings_are_not_server_errors(svc: tuple[Server, str, str]) -> None:
    s, _, key = svc
    for path in ("/v1/results", "/v1/admin/ledger", "/v1/admin/audit"):
        who = key if path == "/v1/results" else s.admin_key
        for limit in ("1" + "0" * 400, "1" + "0" * 5000, "-" + "9" * 400, "1e400", "nan"):
            h = {"Authorization": f"Bearer {who}"}
            r = s.http.get(path, params={"limit": limit}, headers=h)
            assert r.status_code < 500, (path, limit[:8], r.text)


def _marked_requests(aid: str) -> Iterator[tuple[str, str, Any, dict[str, str], bool]]:
    """(method, path, JSON body or None, headers, as admin) with the marker in one place each."""
    bodies: list[dict[str, Any]] = [b for e, b, _ in NUMERIC_FIELDS if e == Q]
    for body in bodies:
        extra = ["column", "columns", "by", "keys", "method", "aggregations", "bins", "q"]
        for k in [*body, *extra, "idempotency_key", MARK]:
            yield "POST", Q, {**body, k: MARK}, {}, False
            yield "POST", Q, {**body, k: [MARK]}, {}, False
        yield "POST", Q, body, {"Idempotency-Key": MARK}, False
        yield "POST", Q, {**body, "dry_run": MARK}, {}, False
    agg = {**GROUP, "aggregations": [{"stat": "sum", "column": "x"}]}
    for k in ("stat", "column", "bounds", "q", MARK):
        yield "POST", Q, _put(agg, ("aggregations", 0, k), MARK), {}, False
    yield "POST", Q, {**GROUP, "by": ["c"], "keys": [MARK]}, {}, False
    yield "POST", Q, {**GROUP, "keys": [[MARK]]}, {}, False
    yield "POST", Q, MARK, {}, False
    yield "POST", Q, {MARK: MARK}, {}, False
    budget = {"analyst": aid, "dataset": "survey", "epsilon": 1.0, "delta": 0.0}
    for k in (*budget, MARK):
        yield "PUT", "/v1/admin/budgets", {**budget, k: MARK}, {}, True
    yield "POST", "/v1/admin/analysts", {"name": MARK}, {}, True
    yield "POST", "/v1/admin/analysts", {"name": "x", MARK: 1}, {}, True
    reg: dict[str, Any] = {**EXTRA, "name": "extra3"}
    for k in (*reg, MARK):
        yield "POST", "/v1/admin/datasets", {**reg, k: MARK}, {}, True
    for i in range(len(EXTRA["columns"])):  # type: ignore[arg-type]
        for k in ("name", "type", "bounds", "categories", "fill", "protocol", "epsilon", MARK):
            yield "POST", "/v1/admin/datasets", _put(reg, ("columns", i, k), MARK), {}, True
            if k != "categories":  # a list of labels is the admin's public schema, shown back
                yield "POST", "/v1/admin/datasets", _put(reg, ("columns", i, k), [MARK]), {}, True
    for path in (f"/v1/results/{MARK}", f"/v1/admin/analysts/{MARK}/key", f"/{MARK}",
                 f"/v1/query/{MARK}"):  # fmt: skip
        yield "GET" if "key" not in path else "POST", path, None, {}, "admin" in path
    for path in ("/v1/results", "/v1/admin/ledger", "/v1/admin/audit", "/dashboard/login"):
        for q in ("limit", "principal", "token", MARK):
            yield "GET", f"{path}?{q}={MARK}", None, {}, "admin" in path
    for method, path in [("GET", "/v1/noop"), ("GET", "/v1/datasets"), ("GET", "/v1/me"),
                         ("GET", "/v1/results"), ("GET", "/v1/admin/analysts"),
                         ("GET", "/v1/admin/budgets"), ("POST", "/v1/dashboard/token"),
                         ("POST", "/v1/query")]:  # fmt: skip
        yield method, path, None, {"Authorization": f"Bearer {MARK}"}, False
        yield method, path, None, {"Authorization": MARK}, False
        yield method, path, None, {"X-API-Key": MARK}, False
    yield "GET", "/dashboard", None, {"Cookie": f"dpkit_session={MARK}"}, False


def test_no_response_echoes_a_string_the_client_sent(svc: tuple[Server, str, str]) -> None:
    s, aid, key = svc
    before = _charged(s)
    seen = 0
    for method, path, body, headers, as_admin in _marked_requests(aid):
        h = {"Authorization": f"Bearer {s.admin_key if as_admin else key}"}
        h = {k: v for k, v in h.items() if k not in headers and "X-API-Key" not in headers}
        h.update(headers)
        content = None if body is None else json.dumps(body)
        r = s.http.request(method, path, content=content, headers=h)
        assert r.status_code < 500, (method, path, body, r.text)
        # The marker, and each of its characters' escapes, in the body and every header.
        text = r.text + json.dumps(dict(r.headers))
        forms = [MARK, json.dumps(MARK)[1:-1], "<script>"]
        if not path.startswith("/v1/admin/audit"):
            # the audit log lists the paths requested, percent-encoded (never verbatim)
            forms.append("zq9x-mark")
        for form in forms:
            assert form not in text, (method, path, body, r.text)
        seen += 1
    assert seen > 300
    assert _charged(s)[0] == before[0]  # nothing charged (a registration may have succeeded)


def test_the_marker_test_would_see_an_echo(svc: tuple[Server, str, str]) -> None:
    """The control: a request whose answer legitimately holds the sent string (the admin names
    an analyst) shows that the search above looks in the right place."""
    s, _, _ = svc
    r = s.http.post("/v1/admin/analysts", json={"name": "zq9xmark"},
                    headers={"Authorization": f"Bearer {s.admin_key}"})  # fmt: skip
    assert r.status_code == 200 and "zq9xmark" in r.text


def test_tiny_alpha_is_answered_on_either_ledger(svc: tuple[Server, str, str]) -> None:
    """Item of test_server_hardening2_overflow over HTTP: error bars at alpha = 1e-300 (whose
    Gaussian quantile once overflowed after the charge) are answered, one charge each, on
    SQLite and PostgreSQL alike."""
    s, _, key = svc
    h = {"Authorization": f"Bearer {key}"}
    before = _charged(s)
    for stat in ("sum", "mean", "var", "std"):
        body = {**GROUP, "delta": 1e-6, "alpha": 1e-300,
                "aggregations": [{"stat": stat, "column": "x"}]}  # fmt: skip
        r = s.http.post(Q, json=body, headers=h)
        assert r.status_code == 200, r.text
        assert all(row[f"{stat}_x_lo"] <= row[f"{stat}_x_hi"] for row in r.json()["value"])
    assert _charged(s)[0] == before[0] + 4
    r = s.http.post(Q, json={**body, "alpha": 0.05}, headers=h)
    assert r.status_code == 200, r.text
