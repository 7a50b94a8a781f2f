"""A charge interrupted by a crash, and requests that repeat an idempotency key meanwhile.

- A process killed (SIGKILL) after a charge was made durable and before its answer was stored
  leaves the charge ``reserved``. The next start of the service (no other process running) marks
  it ``lost``: still charged, no answer, audited; a retry with its idempotency key gets 410 and
  is not charged again. A process started while another one runs leaves in-flight charges alone.
- Requests repeating the idempotency key of a query still being answered wait for its answer
  (the same answer, one charge) or, past ``idempotency_wait_seconds``, get 409; never a 500.

Both ledgers (SQLite and PostgreSQL) behave the same.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpkit.server import ServerConfig
from dpkit.server._auth import Principal
from dpkit.server._recovery import AnswerLostError
from dpkit.server._service import Curator

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning")

COLS = [{"name": "x", "type": "float", "bounds": [0, 10]}]
BODY = {"dataset": "t", "query": "count", "epsilon": 0.5, "idempotency_key": "k-1"}


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerConfig]:
    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "t.csv").write_text("x\n" + "\n".join(str(i % 10) for i in range(200)))
    url = request.getfixturevalue("pg_db") if request.param == "postgres" else None
    yield ServerConfig(ledger=url or str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp")  # fmt: skip
    gc.collect()  # a connection left open fails this test (ResourceWarning), not a later one


def _setup(config: ServerConfig) -> tuple[Curator, Principal]:
    cur = Curator(config)
    cur.start()
    cur.register_dataset({"name": "t", "source": "t.csv", "total_epsilon": 100.0, "columns": COLS})
    a = cur.add_analyst("ana")
    cur.ledger.set_budget(a["id"], "t", 50.0, 0.0)
    return cur, Principal(a["id"], "ana", "analyst")


_CRASH = """
import os, signal, sys
from dpkit.server import ServerConfig
from dpkit.server._service import Curator
from dpkit.server._auth import Principal
from dpkit.server._recovery import AnswerLostError
from pathlib import Path
cfg = ServerConfig(ledger=sys.argv[1], data_dir=Path(sys.argv[2]), import_dir=Path(sys.argv[3]))
cur = Curator(cfg)
cur.start()
who = Principal(sys.argv[4], "ana", "analyst")
def crash(planned):  # killed after the charge is durable, before the answer is stored
    os.kill(os.getpid(), signal.SIGKILL)
cur.answering._computed = crash
cur.query(who, {"dataset": "t", "query": "count", "epsilon": 0.5, "idempotency_key": "k-1"})
"""


def _crash_during_query(config: ServerConfig, who: Principal) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    args = [config.ledger, str(config.data_dir), str(config.import_dir), who.id]
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CRASH), *args], env=env, capture_output=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]


def test_a_charge_interrupted_by_a_crash_is_marked_lost_at_the_next_start(
    config: ServerConfig,
) -> None:
    cur, who = _setup(config)
    if hasattr(cur, "liveness"):  # this process stops serving
        cur.liveness.close()
    cur.ledger.close()
    del cur
    _crash_during_query(config, who)
    again = Curator(config)
    again.start()  # alone: resolves the orphan
    (charge,) = again.ledger.charges(who.id)
    assert charge.status == "lost"
    assert again.ledger.budgets(who.id)[0]["spent_epsilon"] == 0.5  # stays charged
    assert again.ledger.check_consistency() == []
    assert any(r["outcome"] == f"lost {charge.id}" for r in again.ledger.audit(who.id))
    # a retry with the key: a clear refusal, not charged again, and it stays so
    for _ in range(2):
        with pytest.raises(AnswerLostError, match="interrupted") as err:
            again.query(who, dict(BODY))
        assert "new key" in str(err.value)
        with pytest.raises(AnswerLostError):
            asyncio.run(again.query_async(who, dict(BODY)))
    assert len(again.ledger.charges(who.id)) == 1
    assert again.ledger.budgets(who.id)[0]["spent_epsilon"] == 0.5
    # a new key is answered as usual
    assert again.query(who, {**BODY, "idempotency_key": "k-2"})["status"] == "released"


def test_a_process_started_while_another_runs_leaves_its_charges_in_flight(
    config: ServerConfig,
) -> None:
    one, who = _setup(config)
    request = {k: v for k, v in BODY.items() if k != "idempotency_key"}
    version = one.versions["t"]
    charge = one.ledger.reserve(who.id, "t", request, 0.5, 0.0, "k-1", version)  # in flight
    two = Curator(config)
    two.start()  # `one` is alive: not an orphan
    assert two.ledger.charge(charge.id).status == "reserved"  # type: ignore[union-attr]
    one.ledger.release(charge.id, {"value": 7.0, "ci": None, "alpha": 0.05, "labels": None})
    assert two.query(who, dict(BODY))["value"] == 7.0  # the key's answer, not a new charge


def test_a_worker_started_while_others_run_resolves_only_the_dead_ones_charges(
    config: ServerConfig,
) -> None:
    one, who = _setup(config)  # keeps running
    two = Curator(config)
    two.start()
    request = {k: v for k, v in BODY.items() if k != "idempotency_key"}
    version = one.versions["t"]
    live = one.ledger.reserve(who.id, "t", request, 0.5, 0.0, "k-live", version)
    dead = two.ledger.reserve(who.id, "t", request, 0.5, 0.0, "k-dead", version)
    two.liveness.close()  # `two` dies (the kernel drops a dead process's locks)
    three = Curator(config)  # its replacement, while `one` still answers
    three.start()
    assert three.ledger.charge(dead.id).status == "lost"  # type: ignore[union-attr]
    assert three.ledger.charge(live.id).status == "reserved"  # type: ignore[union-attr]
    with pytest.raises(AnswerLostError):
        three.query(who, {**BODY, "idempotency_key": "k-dead"})
    one.ledger.release(live.id, {"value": 3.0, "ci": None, "alpha": 0.05, "labels": None})
    assert three.query(who, {**BODY, "idempotency_key": "k-live"})["value"] == 3.0
    assert three.ledger.check_consistency() == []


def _blocked_first(cur: Curator) -> tuple[threading.Event, threading.Event]:
    """Make the next computation wait until ``go`` is set (``started`` says it is waiting)."""
    started, go = threading.Event(), threading.Event()
    real = cur.answering._computed

    def computed(planned: Any) -> dict[str, Any]:
        if not started.is_set():
            started.set()
            assert go.wait(60)
        return real(planned)

    cur.answering._computed = computed  # type: ignore[method-assign]
    return started, go


def test_requests_repeating_a_key_in_flight_wait_for_its_answer(config: ServerConfig) -> None:
    cur, who = _setup(config)
    started, go = _blocked_first(cur)
    out: list[Any] = []

    def ask() -> None:
        try:
            out.append(cur.query(who, dict(BODY)))
        except Exception as exc:  # reported below
            out.append(exc)

    first = threading.Thread(target=ask)
    first.start()
    assert started.wait(60)  # charged; its answer is being computed
    others = [threading.Thread(target=ask) for _ in range(19)]
    for t in others:
        t.start()

    async def on_the_loop() -> Any:
        asyncio.get_running_loop().call_later(0.3, go.set)
        return await cur.query_async(who, dict(BODY))

    from_loop = asyncio.run(on_the_loop())
    for t in [first, *others]:
        t.join()
    assert not [o for o in out if isinstance(o, Exception)], out
    assert len({o["id"] for o in [*out, from_loop]}) == 1
    assert len({o["value"] for o in [*out, from_loop]}) == 1
    assert sum(o["replayed"] for o in out) == 19 and from_loop["replayed"]
    assert len(cur.ledger.charges(who.id)) == 1
    assert cur.ledger.budgets(who.id)[0]["spent_epsilon"] == 0.5


def test_a_repeated_key_waits_a_bounded_time_then_gets_409(config: ServerConfig) -> None:
    from dpkit.server._recovery import InProgressError

    cur, who = _setup(dataclasses.replace(config, idempotency_wait_seconds=0.2))
    started, go = _blocked_first(cur)

    def ask() -> None:
        cur.query(who, dict(BODY))

    first = threading.Thread(target=ask)
    first.start()
    assert started.wait(60)
    t0 = time.monotonic()
    with pytest.raises(InProgressError, match="still being answered") as err:
        cur.query(who, dict(BODY))
    assert "same key" in str(err.value)
    with pytest.raises(InProgressError):
        asyncio.run(cur.query_async(who, dict(BODY)))
    assert time.monotonic() - t0 < 50  # bounded (not the 60 s the first one may be held)
    go.set()
    first.join()
    assert cur.query(who, dict(BODY))["status"] == "released"
    assert len(cur.ledger.charges(who.id)) == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_twenty_concurrent_requests_with_one_key_over_http(
    backend: str, make_server: Any, request: pytest.FixtureRequest
) -> None:
    ledger_url = request.getfixturevalue("pg_db") if backend == "postgres" else None
    server = make_server(ledger=ledger_url)
    _, key = server.analyst("rita", 5.0)
    body = {"dataset": "survey", "query": "mean", "column": "age", "epsilon": 0.5,
            "bounds": [0, 99.5], "idempotency_key": "same-key"}  # fmt: skip
    barrier = threading.Barrier(20)
    out: list[Any] = []

    def ask() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            barrier.wait()
            r = http.post("/v1/query", json=body, headers={"X-API-Key": key})
            out.append((r.status_code, r.json()))

    threads = [threading.Thread(target=ask) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted({code for code, _ in out}) == [200], [o for o in out if o[0] != 200][:2]
    assert len({o["id"] for _, o in out}) == 1 and len({o["value"] for _, o in out}) == 1
    me = server.http.get("/v1/me", headers={"X-API-Key": key}).json()
    assert me["budgets"][0]["spent_epsilon"] == 0.5
