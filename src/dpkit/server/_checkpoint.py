"""Checkpoints of the SQLite ledger's write-ahead log, off the path of the charges.

In WAL mode every commit appends pages to the log, and by default the commit that takes the log
past 1,000 pages also copies them into the database file and flushes it (a *checkpoint*). In the
service that commit holds a batch of charges: under load it came every fraction of a second and
took 20–35 ms, during which every waiting request waited (the largest part of the p99 latency in
``benchmarks/server.py``). The service's connections therefore do not checkpoint
(``wal_autocheckpoint=0``); a thread of their own runs a ``PASSIVE`` checkpoint every
``interval`` seconds, which copies what it can without blocking writers or readers. Durability
is unchanged: a charge is durable once its commit is in the log (``synchronous=FULL``), whoever
copies it later.

A passive checkpoint cannot rewind the log while readers use it, and under steady load some
always do; when a fully copied log has grown past ``restart_frames`` pages, a ``RESTART``
checkpoint waits for those readers (briefly holding new writers) so the next commit writes from
the start of the file again, bounding its size.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

__all__ = ["Checkpointer"]


class Checkpointer:
    """A daemon thread checkpointing the WAL of the SQLite database at ``path``.

    Examples
    --------
    >>> import contextlib, os, sqlite3, tempfile
    >>> from dpkit.server._checkpoint import Checkpointer
    >>> path = os.path.join(tempfile.mkdtemp(), "l.db")
    >>> with contextlib.closing(sqlite3.connect(path)) as c:
    ...     c.execute("PRAGMA journal_mode=WAL").fetchone()
    ('wal',)
    >>> ck = Checkpointer(path, interval=0.05)
    >>> ck.checkpoint()
    (0, 0, 0)
    >>> ck.stop()
    """

    def __init__(self, path: str, *, interval: float = 0.2, restart_frames: int = 4096) -> None:
        self._path = path
        self._interval = interval
        self._restart = restart_frames
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            path, timeout=60.0, isolation_level=None, check_same_thread=False
        )
        self._thread = threading.Thread(target=self._run, name="dpkit-checkpoint", daemon=True)
        self._thread.start()

    def checkpoint(self) -> tuple[int, int, int]:
        """Checkpoint now: ``(busy, pages in the log, pages copied)`` as SQLite reports them."""
        with self._lock:
            row = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            busy, log, done = int(row[0]), int(row[1]), int(row[2])
            if log >= self._restart and done == log:
                self._conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            return busy, log, done

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.checkpoint()
            except Exception:  # e.g. a full disk: try again later, never stop checkpointing
                logging.getLogger("dpkit.server").exception("could not checkpoint the ledger")

    def stop(self) -> None:
        """Stop the thread after a last checkpoint."""
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            self.checkpoint()
        finally:
            with self._lock:
                self._conn.close()
