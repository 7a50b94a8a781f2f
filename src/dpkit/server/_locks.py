"""Locks between the service's processes (``flock``): released by the kernel when a process dies,
so no lock can outlive a crash and block a restart."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["FileLock", "flocked", "ledger_file_lock"]


class FileLock:
    """An exclusive lock between processes on a file (``flock``), blocking without polling.

    SQLite excludes other processes' writers itself, but a writer that finds the database
    locked polls it with growing sleeps (up to 100 ms), which shows as a long latency tail when
    several worker processes share one ledger. Held around each write transaction (inside the
    process's own thread lock), this lock hands the database from one process's writer to the
    next as soon as it is free. Only a hand-off: SQLite's own locking still guarantees
    correctness, e.g. against a process that does not use this lock.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._pid = 0

    def __enter__(self) -> FileLock:
        if self._fd is None or self._pid != os.getpid():  # one descriptor per process
            self._fd, self._pid = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600), os.getpid()
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def ledger_file_lock(url: str) -> FileLock | None:
    """The hand-off lock beside a SQLite ledger file (none for in-memory or URI databases)."""
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:") else url
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return FileLock(path + ".lock")


@contextmanager
def flocked(path: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold ``path``'s lock, exclusive or shared, for the duration of the block."""
    with os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "rb") as f:  # private (0600)
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
