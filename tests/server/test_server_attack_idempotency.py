"""One idempotency key sent at once with two different requests on two datasets.

On PostgreSQL a reservation locks the rows of its dataset and budget only: two requests with the
same key on different datasets took no common lock, both found the key unused, and the second
insert broke the ledger's unique (analyst, key) constraint: an HTTP 500, and with the group
commit the whole batch of other analysts' requests failed with it. Every such request must get
the key's one answer or a clear 4xx (a different request under a used key), one charge in all.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from tests.server.conftest import SURVEY


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_one_key_two_datasets_at_once(
    backend: str, make_server: Any, request: pytest.FixtureRequest
) -> None:
    ledger_url = request.getfixturevalue("pg_db") if backend == "postgres" else None
    # several workers: their requests are reserved in separate transactions
    twin = {**SURVEY, "name": "twin"}
    server = make_server(ledger=ledger_url, datasets=[SURVEY, twin], workers=3)
    aid, key = server.analyst("rita", 50.0)
    server.admin("PUT", "/v1/admin/budgets",
                 {"analyst": aid, "dataset": "twin", "epsilon": 50.0, "delta": 0.0})  # fmt: skip
    _, other = server.analyst("olga", 50.0)
    out: list[tuple[str, int, Any]] = []
    for round_ in range(6):
        barrier = threading.Barrier(24)

        def ask(i: int, r: int = round_, barrier: threading.Barrier = barrier) -> None:
            if i % 3 == 2:  # a bystander's requests share the batches
                who, body = other, {"dataset": "survey", "query": "count", "epsilon": 0.1}
            else:
                who = key
                body = {"dataset": ("survey", "twin")[i % 3], "query": "count", "epsilon": 0.1,
                        "idempotency_key": f"k-{r}"}  # fmt: skip
            with httpx.Client(base_url=server.url, timeout=60) as http:
                barrier.wait()
                resp = http.post("/v1/query", json=body, headers={"X-API-Key": who})
                out.append((who, resp.status_code, resp.json()))

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    errors = [o for o in out if o[1] >= 500]
    assert not errors, errors[:3]
    assert all(code == 200 for who, code, _ in out if who == other)
    mine = [o for who, _, o in out if who == key and "id" in o]
    rita = server.http.get("/v1/results?limit=1000", headers={"X-API-Key": key}).json()["results"]
    assert len(rita) == 6  # one charge per key
    assert {o["id"] for o in mine} == {c["id"] for c in rita}
