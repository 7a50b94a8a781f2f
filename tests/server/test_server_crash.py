"""A storm of queries while the service is killed with SIGKILL at random moments, several times
(every process of it: with two workers, the master and both workers).

After each kill, before the restart, the ledger on disk is checked: every budget's spent equals
the sum of its charges, nothing is over budget, every released charge has its answer, and every
answer a client received is in the ledger as released with the same value (no answer escaped
without its charge). After the restart the service answers, and retrying the interrupted
requests with their idempotency keys never charges twice.
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any

import httpx
import pytest

from dpkit.server import Ledger

KILLS = {"sqlite": 3, "postgres": 2}
WORKERS = 6
EPS = 0.01


def _storm(
    server: Any, key: str, stop: threading.Event, got: dict[str, Any], lost: list[Any]
) -> list[threading.Thread]:
    def worker(w: int) -> None:
        i = 0
        with httpx.Client(base_url=server.url, timeout=30) as http:
            while not stop.is_set():
                idem = f"w{w}-{i}-{time.monotonic_ns()}"
                i += 1
                body = {"dataset": "survey", "query": ("mean", "count", "sum")[i % 3],
                        "epsilon": EPS, "idempotency_key": idem}  # fmt: skip
                if body["query"] != "count":
                    body["column"] = "age"
                try:
                    r = http.post("/v1/query", json=body, headers={"X-API-Key": key})
                except httpx.HTTPError:
                    lost.append(body)
                    time.sleep(0.05)
                    continue
                if r.status_code == 200:
                    got[r.json()["id"]] = (idem, r.json()["value"], body)

    return [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]


def _check_ledger(url: str, got: dict[str, Any], budget: float) -> None:
    led = Ledger(url)
    try:
        assert led.check_consistency() == []
        charges = {c.id: c for c in led.charges(None, 100_000)}
        for cid, (_idem, value, _body) in got.items():
            assert cid in charges, "a client received an answer that has no charge"
            assert charges[cid].status == "released" and charges[cid].result is not None
            assert charges[cid].result["value"] == value
        b = led.budgets()[0]
        assert b["spent_epsilon"] <= budget
    finally:
        led.close()


@pytest.mark.parametrize(("backend", "workers"), [("sqlite", 1), ("sqlite", 2), ("postgres", 1)])
def test_kill_9_storm(
    backend: str, workers: int, make_server: Any, request: pytest.FixtureRequest
) -> None:
    ledger_url = request.getfixturevalue("pg_db") if backend == "postgres" else None
    server = make_server(ledger=ledger_url, workers=workers)
    budget = 1000.0
    _, key = server.analyst("stormy", budget)
    rng = random.Random(20261124)  # the kill moments are random but reproducible
    got: dict[str, Any] = {}
    lost: list[dict[str, Any]] = []
    for _ in range(KILLS[backend]):
        stop = threading.Event()
        threads = _storm(server, key, stop, got, lost)
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.5, 2.0))
        server.kill()
        stop.set()
        for t in threads:
            t.join()
        _check_ledger(server.ledger, got, budget)
        server.start()
        r = server.http.post(
            "/v1/query",
            json={"dataset": "survey", "query": "count", "epsilon": EPS},
            headers={"X-API-Key": key},
        )
        assert r.status_code == 200, r.text
    assert len(got) > 10, "the storm sent too few queries to test anything"
    assert lost, "no request was interrupted by a kill"

    # Retrying interrupted requests with the same idempotency key: one charge per key at most;
    # an answer that was released comes back unchanged, and a charge whose answer was lost in
    # the crash stays charged, is marked lost at the restart, and says so (410, not charged
    # again).
    led = Ledger(server.ledger)
    for body in lost[:10]:
        r = server.http.post("/v1/query", json=body, headers={"X-API-Key": key})
        rows = led._exec(
            "SELECT status, result_json FROM charges WHERE idem_key = ?", (body["idempotency_key"],)
        ).fetchall()
        assert len(rows) == 1, "a retried request must be charged exactly once"
        if r.status_code == 200:
            assert rows[0][0] == "released" and r.json()["value"] == json.loads(rows[0][1])["value"]
        else:  # reserved when the service was killed: marked lost at the restart
            assert r.status_code == 410 and "stays charged" in r.json()["error"]["message"]
            assert rows[0][0] == "lost"
    assert led.check_consistency() == []
    led.close()
