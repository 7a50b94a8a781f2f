"""Group commit for the ledger: many writes, one transaction, one disk flush.

A durable commit flushes to disk (SQLite's WAL with ``synchronous=FULL``; PostgreSQL's WAL), and
the writes of a ledger are serial (one dataset row holds every charge on that dataset), so with one
transaction per charge the flush time bounds the service's throughput. Here each write is queued;
one thread at a time is the *leader*: under the group's lock it runs every queued write in one
transaction, each inside its own ``SAVEPOINT`` (a refused or failed write is rolled back alone),
commits once, wakes the threads whose writes it committed, and hands the lead to the first write
queued meanwhile (the others keep waiting for that batch). A write still returns only after the commit that holds
it, so the protocol of :mod:`._ledger` is unchanged: a charge is durable before any noise is drawn,
and an answer is stored before it is returned.

Writes that need not be flushed on their own (storing a released answer: see
:meth:`Ledger.release`) are marked ``durable=False``; a batch of only such writes is committed
without a flush (SQLite ``synchronous=NORMAL``), a batch with a charge in it is flushed whole.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GroupCommit"]

_RETRIES = 10


def _held() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass
class _Job:
    work: Callable[[Any], Any]
    durable: bool = True
    result: Any = None
    error: BaseException | None = None
    done: bool = False
    lead: bool = False  # this job's thread runs the next batch
    # Released once, when the job is committed (or failed) or made the leader; its thread
    # waits on it alone, so a finished batch wakes each of its threads directly.
    wake: threading.Lock = field(default_factory=_held)


def _no_retry(exc: BaseException) -> bool:
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
    """

    def __init__(
        self,
        lock: threading.Lock,
        connection: Callable[[], Any],
        *,
        sqlite: bool = True,
        retryable: Callable[[BaseException], bool] = _no_retry,
        between_processes: AbstractContextManager[Any] | None = None,
    ) -> None:
        self._lock = lock
        self._between = between_processes or contextlib.nullcontext()
        self._connection = connection
        self._sqlite = sqlite
        self._retryable = retryable
        self._queue: list[_Job] = []
        self._queue_lock = threading.Lock()
        self._leading = False  # a thread is running (or about to run) a batch

    def run(self, work: Callable[[Any], Any], *, durable: bool = True) -> Any:
        """Run ``work(conn)`` in a committed transaction; return its result or raise its error."""
        job = _Job(work, durable)
        with self._queue_lock:
            self._queue.append(job)
            if not self._leading:
                self._leading = job.lead = True
        if not job.lead:
            job.wake.acquire()  # until a leader has committed this job, or handed over to it
        if not job.done:
            self._lead(job)
        if job.error is not None:
            raise job.error
        return job.result

    def _lead(self, own: _Job) -> None:
        """Run every queued write as one batch, then hand over to the first job queued since.

        Threads whose writes the batch held are woken one by one, each on its own lock: none
        of them touches the group's lock again (a convoy of threads taking it in turn only to
        find their job done would delay the next batch by one thread switch each).
        """
        batch: list[_Job] = []
        try:
            with self._lock, self._between:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._commit(batch)
        finally:
            with self._queue_lock:
                if not batch and own in self._queue:  # the locks failed: this job leaves
                    self._queue.remove(own)
                following = self._queue[0] if self._queue else None
                if following is None:
                    self._leading = False
                else:
                    following.lead = True
            if following is not None:
                following.wake.release()
            for job in batch:
                if job is not own and not job.lead:
                    job.wake.release()

    def _commit(self, batch: list[_Job]) -> None:
        try:
            for attempt in range(_RETRIES):
                try:
                    self._attempt(batch)
                    return
                except Exception as exc:
                    if attempt == _RETRIES - 1 or not self._retryable(exc):
                        raise
        except BaseException as exc:
            for job in batch:  # nothing of this batch was committed
                job.result, job.error = None, exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for job in batch:
                job.done = True

    def _attempt(self, batch: list[_Job]) -> None:
        conn = self._connection()
        flush = any(job.durable for job in batch)
        if self._sqlite and not flush:
            conn.execute("PRAGMA synchronous=NORMAL")
        try:
            conn.execute("BEGIN IMMEDIATE" if self._sqlite else "BEGIN")
            for i, job in enumerate(batch):
                job.result, job.error = None, None
                conn.execute(f"SAVEPOINT s{i}")
                try:
                    job.result = job.work(conn)
                except Exception as exc:
                    if self._retryable(exc):  # e.g. chosen as a deadlock's victim: redo all
                        raise
                    conn.execute(f"ROLLBACK TO SAVEPOINT s{i}")
                    job.error = exc
                conn.execute(f"RELEASE SAVEPOINT s{i}")
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
