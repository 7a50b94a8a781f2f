"""Group commit for coroutines: event-loop writes share batches with threads' writes, a writer
thread leads when no thread waits, and nothing hangs when the writer cannot take its locks."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import DataError


def _insert(conn: Any, items: list[int]) -> list[Any]:
    """Store the non-negative items in one call; refuse the negative ones (nothing written)."""
    conn.cursor().executemany("INSERT INTO t VALUES (?)", [(v,) for v in items if v >= 0])
    return [v if v >= 0 else DataError(f"refused {v}") for v in items]


def _stored(path: Path) -> list[int]:
    with contextlib.closing(sqlite3.connect(path)) as c:
        return sorted(r[0] for r in c.execute("SELECT v FROM t"))


def test_loop_and_thread_writes_share_one_batch(
    sqlite_group: Callable[..., Any], one_batch: Callable[..., None]
) -> None:
    group, lock, path = sqlite_group()
    results: dict[int, Any] = {}

    def thread_write(v: int) -> None:
        try:
            results[v] = group.run_many(_insert, v)
        except DataError as exc:
            results[v] = str(exc)

    async def loop_writes() -> None:
        async def one(v: int) -> None:
            try:
                results[v] = await group.run_many_async(_insert, v)
            except DataError as exc:
                results[v] = str(exc)

        await asyncio.gather(*(one(v) for v in (10, 11, -12, 13)))

    threads = [threading.Thread(target=thread_write, args=(v,)) for v in (1, -2, 3)]
    threads.append(threading.Thread(target=asyncio.run, args=(loop_writes(),)))
    one_batch(group, lock, threads, 7)  # three threads' writes and four of the loop's
    assert results == {1: 1, -2: "refused -2", 3: 3, 10: 10, 11: 11, -12: "refused -12", 13: 13}
    assert _stored(path) == [1, 3, 10, 11, 13]


def test_the_writer_thread_leads_when_only_the_loop_waits(sqlite_group: Callable[..., Any]) -> None:
    group, _, path = sqlite_group()

    async def main() -> list[Any]:
        first = [await group.run_many_async(_insert, v) for v in range(5)]  # one at a time
        rest = await asyncio.gather(*(group.run_many_async(_insert, v) for v in range(5, 60)))
        return first + list(rest)

    assert asyncio.run(main()) == list(range(60))
    assert _stored(path) == list(range(60))
    assert not group._leading and group._queue == []


def test_a_writer_that_cannot_take_its_locks_fails_the_waiting_writes(
    sqlite_group: Callable[..., Any],
) -> None:
    broken = {"on": True}

    @contextlib.contextmanager
    def between() -> Iterator[None]:
        if broken["on"]:
            raise OSError("the ledger's file lock is gone")
        yield

    class Between:
        def __enter__(self) -> None:
            self._cm = between()
            self._cm.__enter__()

        def __exit__(self, *exc: Any) -> None:
            self._cm.__exit__(*exc)

    group, _, path = sqlite_group(between_processes=Between())

    async def write(v: int) -> Any:
        return await asyncio.wait_for(group.run_many_async(_insert, v), timeout=30)

    with pytest.raises(OSError, match="file lock is gone"):
        asyncio.run(write(1))
    broken["on"] = False  # and the group works again
    assert asyncio.run(write(2)) == 2
    assert _stored(path) == [2]


def test_a_cancelled_request_still_has_its_write_committed(
    sqlite_group: Callable[..., Any],
) -> None:
    # A client that goes away after its charge was queued: the charge is kept (it may already
    # be on disk), as after a crash; nothing is left waiting.
    group, lock, path = sqlite_group()

    async def main() -> None:
        lock.acquire()
        task = asyncio.ensure_future(group.run_many_async(_insert, 7))
        while not group._queue:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        lock.release()
        assert await group.run_many_async(_insert, 8) == 8

    asyncio.run(main())
    assert _stored(path) == [7, 8]
