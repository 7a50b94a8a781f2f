"""Review s17: GroupCommit must wake every waiting write even when the writer thread cannot be
started (its executor refuses new work, as it does once the interpreter begins shutting down)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from dpkit.server._group import GroupCommit


def _break_writer(group: GroupCommit) -> None:
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    pool.shutdown()  # submit() now raises RuntimeError, as after interpreter shutdown began
    group._writer_pool, group._writer_pid = pool, os.getpid()


def test_a_thread_batch_is_settled_even_if_the_writer_cannot_be_started(
    sqlite_group: Callable[..., Any],
) -> None:
    # GroupCommit._lead's finally submits the writer thread (only event loops wait) *before*
    # _settle wakes the threads of the batch just committed: if submit raises, those threads
    # are never woken (they hang on their wake locks) and _leading stays True, so every later
    # write of the process hangs too.
    group, lock, _ = sqlite_group()
    in_batch, loop_queued = threading.Event(), threading.Event()

    def insert(conn: Any, items: list[int]) -> list[Any]:
        if 1 in items:  # the leader's batch: let a coroutine queue a write meanwhile
            in_batch.set()
            loop_queued.wait(10)
        conn.cursor().executemany("INSERT INTO t VALUES (?)", [(v,) for v in items])
        return list(items)

    results: dict[int, Any] = {}

    def thread_write(v: int) -> None:
        try:
            results[v] = group.run_many(insert, v)
        except BaseException as exc:  # recorded for the assertions
            results[v] = exc

    lock.acquire()
    leader = threading.Thread(target=thread_write, args=(1,), daemon=True)
    leader.start()
    while not group._queue:
        threading.Event().wait(0.005)
    other = threading.Thread(target=thread_write, args=(2,), daemon=True)
    other.start()
    while len(group._queue) < 2:
        threading.Event().wait(0.005)
    lock.release()
    assert in_batch.wait(10)
    _break_writer(group)

    async def loop_write() -> Any:
        task = asyncio.ensure_future(group.run_many_async(insert, 3))
        while len(group._queue) < 1:
            await asyncio.sleep(0.005)
        loop_queued.set()
        with contextlib.suppress(BaseException):
            return await asyncio.wait_for(task, timeout=5)

    lt = threading.Thread(target=asyncio.run, args=(loop_write(),), daemon=True)
    lt.start()
    leader.join(10)
    other.join(5)
    lt.join(10)
    assert not other.is_alive(), "a thread whose write was committed was never woken"
    assert results.get(2) == 2
    assert results.get(1) == 1, f"the leader's committed write reported {results.get(1)!r}"


def test_a_loop_write_that_cannot_start_the_writer_does_not_wedge_the_group(
    sqlite_group: Callable[..., Any],
) -> None:
    # run_many_async sets _leading = True and queues its job before submitting the writer; if
    # submit raises, the job stays queued with no leader and _leading is never reset: every
    # later write (threads included) waits forever.
    group, _, _ = sqlite_group()
    _break_writer(group)

    async def write() -> Any:
        return await asyncio.wait_for(group.run_many_async(lambda c, items: items, 1), 5)

    with contextlib.suppress(Exception):
        asyncio.run(write())
    done = threading.Event()
    box: list[Any] = []

    def later() -> None:
        box.append(group.run_many(lambda c, items: items, 2))
        done.set()

    t = threading.Thread(target=later, daemon=True)
    t.start()
    assert done.wait(5), "a later thread write hangs: the group lost its leader"
    assert box == [2]


class _Stop(BaseException):
    """Stands for SystemExit / KeyboardInterrupt raised while a write runs."""


def test_a_write_committed_alone_in_a_split_batch_is_not_reported_failed(
    sqlite_group: Callable[..., Any],
) -> None:
    # GroupCommit._commit: when a batch fails (an ordinary exception) each write runs again in a
    # transaction of its own. If a later write then raises a BaseException, the outer handler
    # sets that error on *every* job of the batch ("nothing of this batch was committed"),
    # although the earlier writes were committed alone: their callers see an error for a write
    # that is in the database (for a charge: charged, but reported as failed).
    group, lock, path = sqlite_group()

    def insert(conn: Any, items: list[Any]) -> list[Any]:
        if len(items) > 1 and "bad" in items:
            raise ValueError("fails in the batch: split it")
        if items == ["bad"]:
            raise _Stop()
        conn.cursor().executemany("INSERT INTO t VALUES (?)", [(v,) for v in items])
        return list(items)

    results: dict[Any, Any] = {}

    def write(v: Any) -> None:
        try:
            results[v] = group.run_many(insert, v)
        except BaseException as exc:  # recorded for the assertions
            results[v] = exc

    lock.acquire()
    threads = []
    for v in (1, "bad"):
        t = threading.Thread(target=write, args=(v,), daemon=True)
        t.start()
        threads.append(t)
        while len(group._queue) < len(threads):
            threading.Event().wait(0.005)
    lock.release()
    for t in threads:
        t.join(10)
    with contextlib.closing(sqlite3.connect(path)) as c:
        stored = [r[0] for r in c.execute("SELECT v FROM t")]
    assert stored == [1]  # committed alone
    assert isinstance(results["bad"], _Stop)
    assert results[1] == 1, f"a committed write was reported as {results[1]!r}"
