"""Review s17: the event-loop path (Curator.query_async) must not run slow or blocking work on
the loop by accident."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import DataError
from dpkit.server import ServerConfig
from dpkit.server._auth import Principal
from dpkit.server._service import Curator, QueryFailedError


def _curator(tmp_path: Path) -> tuple[Curator, Principal]:
    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "t.csv").write_text("x\n" + "\n".join(str(i % 10) for i in range(200)))
    cfg = ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp")  # fmt: skip
    cur = Curator(cfg)
    cur.start()
    cols = [{"name": "x", "type": "float", "bounds": [0, 10]}]
    cur.register_dataset({"name": "t", "source": "t.csv", "total_epsilon": 100.0, "columns": cols})
    a = cur.add_analyst("ana")
    cur.ledger.set_budget(a["id"], "t", 50.0, 0.0)
    return cur, Principal(a["id"], "ana", "analyst")


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_an_invalid_inline_query_does_not_refresh_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # QueryPath._plan calls refresh() when the registry refuses a request (DataError). On the
    # inline path _plan runs on the event loop, so any analyst's invalid sum/mean (an unknown
    # column, bad bounds) runs refresh() there: it takes the data directory's flock (shared),
    # which an admin's dataset registration holds exclusively while it reads and stores the
    # data, and it loads any dataset replaced by another worker (whole table + aggregates).
    # The whole service (every request, /healthz included) stalls meanwhile.
    cur, who = _curator(tmp_path)
    body = {"query": "sum", "dataset": "t", "column": "nope", "epsilon": 1.0}
    assert cur.answers_inline(body)
    on_loop: list[bool] = []
    real = cur.refresh

    def refresh() -> None:
        on_loop.append(_on_loop())
        real()

    monkeypatch.setattr(cur, "refresh", refresh)
    with pytest.raises(DataError):
        asyncio.run(cur.query_async(who, body))
    assert on_loop, "refresh was expected on a refused request"
    assert not any(on_loop), "Curator.refresh() ran on the event loop"


def test_an_invalid_inline_query_is_not_held_up_by_a_registration(tmp_path: Path) -> None:
    # The same, end to end: while a registration holds the data lock exclusively, an invalid
    # inline query must not freeze the event loop (another coroutine keeps running).
    cur, who = _curator(tmp_path)
    body = {"query": "mean", "dataset": "t", "column": "nope", "epsilon": 1.0}
    held, release = threading.Event(), threading.Event()

    def registering() -> None:
        with cur._data_lock(exclusive=True):
            held.set()
            release.wait(3)

    t = threading.Thread(target=registering)
    t.start()
    held.wait(10)

    async def main() -> float:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.ensure_future(ticker())
        q = asyncio.ensure_future(cur.query_async(who, body))
        await asyncio.sleep(0.3)
        seen = ticks
        release.set()
        with pytest.raises(DataError):
            await q
        tick.cancel()
        return seen

    try:
        seen = asyncio.run(main())
    finally:
        release.set()
        t.join(10)
    assert seen >= 5, f"the event loop was blocked ({seen} ticks in 0.3 s)"


def test_a_failing_inline_answer_does_not_write_the_ledger_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # QueryPath._answer runs on the loop when the aggregate is remembered; if the computation
    # fails after the charge it calls ledger.fail(), a durable write: the ledger's write lock
    # (held by whichever thread leads a batch), the file lock shared with the other worker
    # processes, BEGIN IMMEDIATE and an fsync, all on the event loop.
    cur, who = _curator(tmp_path)
    body = {"query": "sum", "dataset": "t", "column": "x", "epsilon": 1.0}
    table = cur.tables["t"]
    entry = cur.registry._entries["sum"]

    def broken(params: Any, schema: Any) -> Any:
        p = entry(params, schema)

        def compute(t: Any, rng: Any, meter: Any) -> Any:
            if t is table:
                raise ValueError("the sampler refused the noise scale")
            return p.compute(t, rng, meter)

        return dataclasses.replace(p, compute=compute)

    monkeypatch.setitem(cur.registry._entries, "sum", broken)
    on_loop: list[bool] = []
    real = cur.ledger.fail

    def fail(cid: str, *, refund: bool) -> None:
        on_loop.append(_on_loop())
        real(cid, refund=refund)

    monkeypatch.setattr(cur.ledger, "fail", fail)
    assert cur.answers_inline(body)
    assert table.schema.columns[0].bounds is not None  # remembered at install: quick
    with pytest.raises(QueryFailedError):
        asyncio.run(cur.query_async(who, body))
    assert on_loop == [False], "ledger.fail() (a durable write) ran on the event loop"
