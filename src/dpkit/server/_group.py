"""Group commit for the SQLite ledger: many charges, one transaction, one disk flush.

A durable SQLite commit flushes the WAL to disk (``synchronous=FULL``), and commits are serial, so
with one transaction per charge the flush time bounds the service's throughput. Here each charge
is queued; whichever thread next holds the write lock becomes the *leader*: it runs every queued
charge in one ``BEGIN IMMEDIATE`` transaction, each inside its own ``SAVEPOINT`` (a refused or
failed charge is rolled back alone), commits once, and wakes the others. A charge still returns
only after the commit that holds it is on disk, so the protocol of :mod:`._ledger` is unchanged:
the charge is durable before any noise is drawn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GroupCommit"]


@dataclass
class _Job:
    work: Callable[[Any], Any]
    result: Any = None
    error: BaseException | None = None
    done: bool = field(default=False)


class GroupCommit:
    """Run ``work(conn)`` functions in shared transactions under ``lock``.

    Parameters
    ----------
    lock : threading.Lock
        The ledger's write lock (held by every other writer too).
    connection : callable
        Returns the calling thread's connection.
    """

    def __init__(self, lock: threading.Lock, connection: Callable[[], Any]) -> None:
        self._lock = lock
        self._connection = connection
        self._queue: list[_Job] = []
        self._queue_lock = threading.Lock()

    def run(self, work: Callable[[Any], Any]) -> Any:
        """Run ``work(conn)`` in a committed transaction; return its result or raise its error."""
        job = _Job(work)
        with self._queue_lock:
            self._queue.append(job)
        with self._lock:
            if not job.done:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._commit(batch)
        if job.error is not None:
            raise job.error
        return job.result

    def _commit(self, batch: list[_Job]) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for i, job in enumerate(batch):
                conn.execute(f"SAVEPOINT s{i}")
                try:
                    job.result = job.work(conn)
                except Exception as exc:
                    conn.execute(f"ROLLBACK TO s{i}")
                    job.error = exc
                conn.execute(f"RELEASE s{i}")
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for job in batch:  # nothing of this batch was committed
                job.result, job.error = None, exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for job in batch:
                job.done = True
