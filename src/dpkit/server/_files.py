"""The service's private files: folders 0700 and files 0600, whatever the process umask.

Everything the service keeps on disk is private: the cleaned datasets (an Arrow file, its
manifest and its schema, :mod:`._store`) in the data directory, and the SQLite ledger (every
answer, the budgets, the audit) with its write-ahead log (``-wal``), shared-memory index
(``-shm``) and lock files. They are created readable by the service's user only (a umask of 022
would otherwise leave them world-readable: 0644 files, 0755 folders), and :func:`tighten` brings
the files of an older installation to the same modes when the service starts. A dataset's Arrow
file, written once, is read-only (0400).

SQLite creates the ``-wal`` and ``-shm`` files with the mode of the database file, so a ledger
file created 0600 keeps its log private too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import IO

__all__ = ["DIR_MODE", "FILE_MODE", "private_dir", "private_file", "private_ledger", "tighten"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Make ``path`` (and missing parents) a folder of mode 0700; returns it."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    os.chmod(path, DIR_MODE)  # mkdir's mode is filtered by the umask; an old folder is 0755
    return path


def private_file(path: Path) -> IO[bytes]:
    """Open ``path`` for writing (truncated), created with mode 0600 (binary file object)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # an existing file keeps its mode through O_CREAT
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def private_ledger(path: str) -> None:
    """Create the SQLite ledger file at ``path`` with mode 0600 (if absent), and bring it and its
    ``-wal``, ``-shm`` and ``.lock`` companions to 0600 (a ledger made by an older version)."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm", "-journal", ".lock"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path + suffix, FILE_MODE)


def tighten(root: Path, read_only: Collection[str] = ()) -> None:
    """Set every folder under ``root`` (and ``root``) to 0700 and every file to 0600, or to 0400
    for the files named in ``read_only`` (files the service writes once and only reads)."""
    private_dir(root)
    for folder, dirs, files in os.walk(root):  # links to folders are listed, not entered
        for name in dirs + files:
            p = os.path.join(folder, name)
            mode = os.lstat(p).st_mode
            # a symbolic link is not followed: chmod would change what it points to, outside
            if stat.S_ISDIR(mode):
                os.chmod(p, DIR_MODE)
            elif stat.S_ISREG(mode):
                os.chmod(p, 0o400 if name in read_only else FILE_MODE)
