"""Group commit for the ledger: many writes, one transaction, one disk flush.

A durable commit flushes to disk (SQLite's WAL with ``synchronous=FULL``; PostgreSQL's WAL), and
the writes of a ledger are serial (one dataset row holds every charge on that dataset), so with one
transaction per charge the flush time bounds the service's throughput. Here each write is queued;
whichever thread next holds the group's lock becomes the *leader*: it runs every queued write in
one transaction, each inside its own ``SAVEPOINT`` (a refused or failed write is rolled back
alone), commits once, and wakes the others. A write still returns only after the commit that holds
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


@dataclass
class _Job:
    work: Callable[[Any], Any]
    durable: bool = True
    result: Any = None
    error: BaseException | None = None
    done: bool = field(default=False)


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

    def run(self, work: Callable[[Any], Any], *, durable: bool = True) -> Any:
        """Run ``work(conn)`` in a committed transaction; return its result or raise its error."""
        job = _Job(work, durable)
        with self._queue_lock:
            self._queue.append(job)
        with self._lock:
            if not job.done:
                with self._between:
                    with self._queue_lock:
                        batch, self._queue = self._queue, []
                    self._commit(batch)
        if job.error is not None:
            raise job.error
        return job.result

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
