"""100 concurrent clients race for a budget that fits exactly k queries: exactly k succeed, on
SQLite and on PostgreSQL, with one worker process or two, and the ledger is not overspent by
even one charge."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from dpkit.server import Ledger

CLIENTS = 100
K = 7
EPS = 0.125  # exact in binary, so k charges fill the budget k·EPS exactly


def _race(server: Any, key: str, body: dict[str, Any]) -> list[int]:
    start = threading.Barrier(CLIENTS)
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    with httpx.Client(base_url=server.url, timeout=120, limits=limits) as http:

        def one(i: int) -> int:
            start.wait()
            r = http.post(
                "/v1/query",
                json={**body, "idempotency_key": f"race-{i}"},
                headers={"Authorization": f"Bearer {key}"},
            )
            return r.status_code

        with ThreadPoolExecutor(CLIENTS) as pool:
            return list(pool.map(one, range(CLIENTS)))


@pytest.mark.parametrize(
    ("backend", "workers"), [("sqlite", 1), ("sqlite", 2), ("postgres", 1), ("postgres", 2)]
)
def test_exactly_k_of_100_concurrent_queries_succeed(
    backend: str, workers: int, make_server: Any, request: pytest.FixtureRequest
) -> None:
    ledger_url = request.getfixturevalue("pg_db") if backend == "postgres" else None
    server = make_server(ledger=ledger_url, workers=workers)
    _, key = server.analyst("racer", K * EPS)
    body = {"dataset": "survey", "query": "mean", "column": "age", "epsilon": EPS}
    codes = _race(server, key, body)
    assert codes.count(200) == K, codes
    assert codes.count(402) == CLIENTS - K, codes
    budget = server.admin("GET", "/v1/admin/budgets")["budgets"][0]
    assert budget["spent_epsilon"] == K * EPS and budget["remaining_epsilon"] == 0.0
    charges = server.admin("GET", "/v1/admin/ledger?limit=1000")["charges"]
    assert len(charges) == K and all(c["status"] == "released" for c in charges)
    led = Ledger(server.ledger)
    assert led.check_consistency() == []
    led.close()


def test_dataset_total_shared_by_two_racing_analysts(make_server: Any) -> None:
    """Two analysts whose budgets together exceed the dataset's total: the total holds."""
    ds = {
        "name": "survey",
        "source": "survey.csv",
        "total_epsilon": 1.0,
        "total_delta": 0.0,
        "columns": [{"name": "age", "type": "float", "bounds": [0, 100]}],
    }
    server = make_server(datasets=[ds])
    _, k1 = server.analyst("one", 1.0)
    _, k2 = server.analyst("two", 1.0)
    body = {"dataset": "survey", "query": "count", "epsilon": EPS}
    results: list[list[int]] = []
    threads = [
        threading.Thread(target=lambda k=k: results.append(_race(server, k, body)))
        for k in (k1, k2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = sum(r.count(200) for r in results)
    assert ok == 8  # 1.0 / 0.125
    total = server.admin("GET", "/v1/admin/datasets")["datasets"][0]
    assert total["spent_epsilon"] == 1.0
