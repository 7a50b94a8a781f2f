"""Group commit for the ledger: many writes, one transaction, one disk flush.

A durable commit flushes to disk (SQLite's WAL with ``synchronous=FULL``; PostgreSQL's WAL), and
the writes of a ledger are serial (one dataset row holds every charge on that dataset), so with one
transaction per charge the flush time bounds the service's throughput. Here each write is queued;
one thread at a time is the *leader*: under the group's lock it runs every queued write in one
transaction (a refused write, which refuses before it writes, fails alone; a write failing after
it may have written sends each write of the batch to a transaction of its own), commits once,
wakes the threads whose writes it committed, and hands the lead to the first write queued
meanwhile (the others keep waiting for that batch). Writes of one kind (charges, answers) share
their statements (:meth:`GroupCommit.run_many`). A write still returns only after the commit that
holds it, so the protocol of :mod:`._ledger` is unchanged: a charge is durable before any noise
is drawn, and an answer is stored before it is returned.

Writes that need not be flushed on their own (storing a released answer: see
:meth:`Ledger.release`) are marked ``durable=False``; a batch of only such writes is committed
without a flush (SQLite ``synchronous=NORMAL``), a batch with a charge in it is flushed whole.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

__all__ = ["GroupCommit"]

_RETRIES = 10


def _held() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(eq=False)  # jobs are compared by identity (`in`, `remove`)
class _Job:
    work: Callable[[Any], Any] | None
    durable: bool = True
    many: Callable[[Any, list[Any]], list[Any]] | None = None  # see GroupCommit.run_many
    item: Any = None
    result: Any = None
    error: BaseException | None = None
    done: bool = False
    lead: bool = False  # this job's thread runs the next batch
    # A thread's write: released once, when the job is committed (or failed) or made the
    # leader; its thread waits on it alone, so a finished batch wakes each thread directly.
    wake: threading.Lock | None = None
    # An event loop's write (GroupCommit.run_many_async): its future, set from the batch's thread.
    waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None


def _fail(jobs: list[_Job], exc: BaseException, *, done: bool = False) -> None:
    for job in jobs:  # nothing of theirs was committed
        job.result, job.error = None, exc
        job.done = job.done or done


def _resolve(futures: list[asyncio.Future[None]]) -> None:
    for fut in futures:
        if not fut.done():  # (a cancelled request's future)
            fut.set_result(None)


def _never(exc: BaseException) -> bool:
    return False


class GroupCommit:
    """Run ``work(conn)`` functions in shared transactions under ``lock``.

    Parameters
    ----------
    lock : threading.Lock
        Held by the leader while it runs a batch (for SQLite, the ledger's write lock, which
        every other writer holds too).
    connection : callable
        Returns the calling thread's connection (autocommit mode: transactions are explicit).
    sqlite : bool
        SQLite (``BEGIN IMMEDIATE``, flush chosen per batch) or PostgreSQL (``BEGIN``).
    between_processes : context manager, optional
        Held by the leader, inside ``lock``, while it runs a batch: excludes the leaders of
        other processes (see :class:`dpkit.server._locks.FileLock`); followers whose writes
        a leader committed never take it.
    retryable : callable
        Whether a failed batch (e.g. a PostgreSQL deadlock between two services' batches) is
        to be run again whole; nothing of a failed batch is committed.
    refusal : callable
        Whether an error is a *refusal*: raised by a write before it wrote anything (e.g. no
        budget left). A refused write fails alone and the batch goes on. Any other error may
        follow some of the write's statements: the batch is rolled back and each of its writes
        is run again in a transaction of its own, so that only the failing one fails. (Batches
        need no savepoint per write, whose two statements per write would cost more than the
        write itself.)
    """

    def __init__(
        self,
        lock: threading.Lock,
        connection: Callable[[], Any],
        *,
        sqlite: bool = True,
        retryable: Callable[[BaseException], bool] = _never,
        refusal: Callable[[BaseException], bool] = _never,
        between_processes: AbstractContextManager[Any] | None = None,
    ) -> None:
        self._lock = lock
        self._between = between_processes or contextlib.nullcontext()
        self._connection = connection
        self._sqlite = sqlite
        self._retryable = retryable
        self._refusal = refusal
        self._queue: list[_Job] = []
        self._queue_lock = threading.Lock()
        self._leading = False  # a thread is running (or about to run) a batch
        self._writer_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._writer_pid = 0

    def run(self, work: Callable[[Any], Any], *, durable: bool = True) -> Any:
        """Run ``work(conn)`` in a committed transaction; return its result or raise its error."""
        return self._run(_Job(work, durable, wake=_held()))

    def run_many(
        self, many: Callable[[Any, list[Any]], list[Any]], item: Any, *, durable: bool = True
    ) -> Any:
        """Write ``item`` together with the other items of ``many`` in the batch.

        ``many(conn, items)`` writes all the items of a batch at once (a few statements for the
        batch, not a few per item: every statement hands the GIL back and forth) and returns,
        item by item, its result or the refusal (an exception instance: nothing of that item
        was written). An exception *raised* by ``many`` fails the batch as a failing write does.
        """
        return self._run(_Job(None, durable, many, item, wake=_held()))

    async def run_many_async(
        self, many: Callable[[Any, list[Any]], list[Any]], item: Any, *, durable: bool = True
    ) -> Any:
        """:meth:`run_many` for a coroutine: the event loop waits on a future, not a thread.

        Batches with no waiting thread to lead them are run by one writer thread of this
        group; the loop learns of a committed batch through one callback per batch.
        """
        loop = asyncio.get_running_loop()
        job = _Job(None, durable, many, item, waiter=(loop, loop.create_future()))
        with self._queue_lock:
            self._queue.append(job)
            start = not self._leading
            self._leading = True
        if start:
            self._start_writer()
        assert job.waiter is not None
        await job.waiter[1]
        if job.error is not None:
            raise job.error
        return job.result

    def _writer(self) -> concurrent.futures.ThreadPoolExecutor:
        """The thread that leads batches of event-loop writes (a new one after a fork)."""
        pid = os.getpid()
        if self._writer_pool is None or self._writer_pid != pid:
            self._writer_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="dpkit-ledger"
            )
            self._writer_pid = pid
        return self._writer_pool

    def _run(self, job: _Job) -> Any:
        with self._queue_lock:
            self._queue.append(job)
            if not self._leading:
                self._leading = job.lead = True
        if not job.lead:
            assert job.wake is not None
            job.wake.acquire()  # until a leader has committed this job, or handed over to it
        if not job.done:
            self._lead(job)
        if job.error is not None:
            raise job.error
        return job.result

    def _lead(self, own: _Job | None) -> None:
        """Run every queued write as one batch, then hand over to the first thread queued
        since (or, if only event loops wait, to the writer thread).

        ``own`` is the leading thread's job (``None`` for the writer thread). Threads whose
        writes the batch held are woken one by one, each on its own lock: none of them touches
        the group's lock again (a convoy of threads taking it in turn only to find their job
        done would delay the next batch by one thread switch each).
        """
        batch: list[_Job] = []
        try:
            with self._lock, self._between:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._commit(batch)  # (raises nothing: errors go to their writes)
        except BaseException as exc:
            if own is not None or batch:
                raise
            # The writer thread could not take the locks: the writes waiting on it fail.
            with self._queue_lock:
                batch, self._queue = self._queue, []
            _fail(batch, exc, done=True)
            if not isinstance(exc, Exception):
                raise
        finally:
            writer = False
            with self._queue_lock:
                if not batch and own in self._queue:  # the locks failed: this job leaves
                    self._queue.remove(own)
                following = next((j for j in self._queue if j.wake is not None), None)
                if following is not None:
                    following.lead = True
                elif self._queue:
                    writer = True  # only event loops wait: the writer thread leads
                else:
                    self._leading = False
            self._settle(batch, own)
            if following is not None:
                assert following.wake is not None
                following.wake.release()
            elif writer:
                self._start_writer()

    def _start_writer(self) -> None:
        """Have the writer thread lead the next batch; if it cannot be started (the interpreter
        is shutting down), the event loops' queued writes fail and a waiting thread leads."""
        try:
            self._writer().submit(self._lead, None)
        except Exception as exc:
            with self._queue_lock:
                stranded = [j for j in self._queue if j.waiter is not None]
                self._queue = [j for j in self._queue if j.waiter is None]
                following = self._queue[0] if self._queue else None
                if following is not None:
                    following.lead = True
                else:
                    self._leading = False
            _fail(stranded, exc, done=True)
            self._settle(stranded, None)
            if following is not None and following.wake is not None:
                following.wake.release()

    @staticmethod
    def _settle(batch: list[_Job], own: _Job | None) -> None:
        """Tell the batch's waiting threads and event loops that their writes are done."""
        loops: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for job in batch:
            if job.waiter is not None:
                loops.setdefault(job.waiter[0], []).append(job.waiter[1])
            elif job is not own and not job.lead and job.wake is not None:
                job.wake.release()
        for loop, futures in loops.items():
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, futures)

    def _commit(self, batch: list[_Job]) -> None:
        """Commit ``batch``, or fail its writes with the error; raises nothing. An error (even a
        ``BaseException`` such as ``SystemExit``) is raised in the thread or coroutine of the
        write it belongs to, not in the leader's."""
        try:
            self._retried(batch)
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch, exc)
            else:
                # A write failed after it may have written: nothing of the batch was kept. Each
                # write runs again alone, so that only the failing one fails.
                for job in batch:
                    self._commit([job])
        except BaseException as exc:
            _fail(batch, exc)
        finally:
            for job in batch:
                job.done = True

    def _retried(self, batch: list[_Job]) -> None:
        for attempt in range(_RETRIES):
            try:
                self._attempt(batch)
                return
            except Exception as exc:
                if attempt == _RETRIES - 1 or not self._retryable(exc):
                    raise

    def _attempt(self, batch: list[_Job]) -> None:
        conn = self._connection()
        flush = any(job.durable for job in batch)
        if self._sqlite and not flush:
            conn.execute("PRAGMA synchronous=NORMAL")
        try:
            conn.execute("BEGIN IMMEDIATE" if self._sqlite else "BEGIN")
            groups: dict[Any, list[_Job]] = {}
            for job in batch:
                job.result, job.error = None, None
                if job.many is not None:
                    groups.setdefault(job.many, []).append(job)
                    continue
                assert job.work is not None
                try:
                    job.result = job.work(conn)
                except Exception as exc:
                    if len(batch) == 1 or not self._refusal(exc):
                        raise  # (retryable, or it may have written: see _commit)
                    job.error = exc  # refused before writing anything: the others go on
            for many, jobs in groups.items():
                outs = many(conn, [job.item for job in jobs])
                for job, out in zip(jobs, outs, strict=True):
                    if isinstance(out, BaseException):
                        job.error = out
                    else:
                        job.result = out
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        finally:
            if self._sqlite and not flush:
                conn.execute("PRAGMA synchronous=FULL")


def _rollback(conn: Any) -> None:
    """Roll back whatever transaction is open (if any) on either kind of connection."""
    # No transaction open, or the connection is gone: nothing to undo.
    with contextlib.suppress(Exception):
        conn.execute("ROLLBACK")
