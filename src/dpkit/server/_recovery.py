"""What happens to a charge that a crash interrupted, and to requests that repeat an
idempotency key while its first request is still being answered.

A charge is made durable before any noise is drawn (``reserved``), and its answer is stored in
the same row before it is sent (``released``). A process killed in between leaves the row
``reserved``: its answer was never stored, so it was never sent, but noise may have been drawn,
so the budget stays charged. When a process of the service starts, under the data directory's
lock, every such row of a process that is no longer running is marked ``lost`` (a final state:
charged, no answer) and audited; a retry with its idempotency key is answered 410
(:class:`AnswerLostError`), not charged again.

Which processes are running is known from locks the kernel drops when a process dies
(``flock``), never from guesses about time:

* each process holds an *owner* lock, ``data_dir/.dpkit.owners/<id>``, exclusively for its life,
  and each charge it reserves records its id: a starting process that can take another id's
  lock knows that process is gone, and resolves its ``reserved`` charges (a worker that
  replaces one that died resolves the dead one's charges, while the others keep answering);
* every process also holds the *liveness* lock ``data_dir/.dpkit.live`` shared; one that can
  take it exclusively is alone, and also resolves the ``reserved`` charges made before charges
  recorded their process. It holds it exclusively until it is done, so no other process
  answers meanwhile.

Only processes of this data directory are ever judged: a ledger may be shared by services on
other data directories (a PostgreSQL database serving several hosts), whose processes' locks
are not here. Their charges are left alone, even by a process alone in its own directory (it
once resolved every ``reserved`` charge of the ledger, and marked ``lost`` answers that another
service was about to send).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpkit.errors import DPKitError

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.server._charges import Charge
    from dpkit.server._ledger import Ledger

__all__ = [
    "AnswerLostError",
    "InProgressError",
    "Liveness",
    "lost",
    "recover",
    "resolve_orphans",
    "wait_for_answer",
    "wait_for_answer_async",
]


class AnswerLostError(DPKitError):
    """The idempotency key's charge was interrupted by a crash: charged, no answer (HTTP 410)."""


class InProgressError(DPKitError):
    """The idempotency key's first request is still being answered (HTTP 409)."""


class Liveness:
    """This process's liveness and owner locks in the data directory (see the module).

    :meth:`enter` returns whether this process is the only one (it then holds the liveness lock
    exclusively until :meth:`share`, so that no other process starts answering meanwhile);
    :meth:`claim` takes this process's owner lock (call it under the data directory's lock);
    :meth:`dead_owners` finds the owners whose process is gone.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> one, two = Liveness(d), Liveness(d)
    >>> one.enter(), one.claim()
    (True, None)
    >>> one.share()
    >>> two.enter()       # `one` is alive: `two` is not alone
    False
    >>> two.dead_owners()
    []
    >>> one.close()       # as if `one` died
    >>> two.dead_owners() == [one.owner]
    True
    >>> two.close()
    """

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / ".dpkit.live"
        self._owners = data_dir / ".dpkit.owners"
        self.owner = secrets.token_hex(12)
        """This process's id in the charges it reserves."""
        self._fd: int | None = None
        self._owner_fd: int | None = None

    def enter(self) -> bool:
        """Take the liveness lock: exclusively if no other process holds it (``True``), else
        shared."""
        if self._fd is not None:  # started again: this process is still here
            return False
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fcntl.flock(self._fd, fcntl.LOCK_SH)  # waits for a process that is resolving
            return False
        return True

    def share(self) -> None:
        """Hold the liveness lock shared from now on (other processes may start)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_SH)

    def claim(self) -> None:
        """Create and hold this process's owner lock (under the data directory's lock, so that
        no other process takes it for a dead one's between its creation and its lock)."""
        if self._owner_fd is not None:
            return
        self._owners.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self._owners / self.owner, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._owner_fd = fd

    def dead_owners(self) -> list[str]:
        """The ids whose process is gone (their lock could be taken); their files are removed
        by :meth:`forget` once their charges are resolved."""
        dead = []
        for path in sorted(self._owners.glob("*")) if self._owners.exists() else []:
            if path.name == self.owner:
                continue
            with contextlib.suppress(FileNotFoundError):
                fd = os.open(path, os.O_RDWR)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    dead.append(path.name)
                except BlockingIOError:
                    pass
                finally:
                    os.close(fd)
        return dead

    def forget(self, owners: list[str]) -> None:
        """Remove the owner files of processes whose charges were resolved."""
        for name in owners:
            with contextlib.suppress(FileNotFoundError):
                (self._owners / name).unlink()

    def close(self) -> None:
        """Release the locks (when the service stops; the kernel does it when a process dies).
        The owner file stays: the next process to start resolves what this one left."""
        for fd in (self._owner_fd, self._fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._owner_fd = None


def recover(
    liveness: Liveness, ledger: Ledger, data_lock: Callable[[], AbstractContextManager[Any]]
) -> None:
    """At a process's start: take its locks and resolve the charges of processes that are gone
    (every ``reserved`` one if it is alone), under the data directory's lock (``data_lock``)."""
    alone = liveness.enter()
    try:
        with data_lock():
            liveness.claim()
            dead = liveness.dead_owners()
            resolve_orphans(ledger, dead, unowned=alone)
            liveness.forget(dead)
    finally:
        if alone:
            liveness.share()


def lost(charge: Charge) -> AnswerLostError:
    """The answer to a retry of a charge marked ``lost``."""
    return AnswerLostError(
        f"this idempotency key's query (charge {charge.id}) was interrupted when the service "
        "stopped, before its answer was stored, so no answer was ever sent; it stays charged. "
        "Send the query again with a new key."
    )


def resolve_orphans(ledger: Ledger, owners: list[str], *, unowned: bool = False) -> int:
    """Mark ``reserved`` charges ``lost``: those of ``owners`` (processes of this data directory
    that are gone) and, with ``unowned`` (only when no process of this data directory runs),
    those that recorded no process (made before charges recorded theirs).

    Nothing is refunded: noise may have been drawn before the crash. Each one gets an audit row
    (``lost <id>``). Returns how many were resolved.
    """
    if not owners and not unowned:
        return 0
    q = ledger._sql
    which = [f"owner IN ({', '.join('?' * len(owners))})"] if owners else []
    if unowned:
        which.append("owner IS NULL")
    where = f"status = 'reserved' AND ({' OR '.join(which)})"
    args: tuple[Any, ...] = tuple(owners)
    with ledger._tx() as conn:
        rows = conn.execute(
            q(f"SELECT id, analyst, dataset, request_json, epsilon, delta FROM charges "
              f"WHERE {where}"), args,
        ).fetchall()  # fmt: skip
        if not rows:
            return 0
        now = time.time()
        conn.execute(q(f"UPDATE charges SET status = 'lost', finished = ? WHERE {where}"),
                     (now, *args))  # fmt: skip
        audit = []
        for cid, analyst, dataset, request, eu, du in rows:
            query = _query_name(request)
            audit.append((now, analyst, dataset, query, eu, du, f"lost {cid}"))
        conn.cursor().executemany(
            q("INSERT INTO audit (ts, principal, kind, dataset, query, epsilon, delta, outcome) "
              "VALUES (?, ?, 'charge', ?, ?, ?, ?, ?)"), audit,
        )  # fmt: skip
    return len(rows)


def _query_name(request_json: str) -> str | None:
    try:
        q = json.loads(request_json).get("query")
    except (ValueError, AttributeError):
        return None
    return q if isinstance(q, str) else None


_FIRST_PAUSE = 0.002
_LONGEST_PAUSE = 0.05


def _settled(charge: Charge | None, first: Charge, waited: float) -> Charge:
    if charge is None:  # pragma: no cover - charges are never deleted
        raise InProgressError("this idempotency key's charge is gone; use a new key.")
    if charge.status != "reserved":
        return charge
    raise InProgressError(
        f"this idempotency key's query (charge {first.id}) is still being answered after "
        f"{waited:g} s; nothing new was charged. Send it again later (with the same key) to get "
        "its answer."
    )


def wait_for_answer(ledger: Ledger, first: Charge, timeout: float) -> Charge:
    """The charge of an idempotency key once it is no longer ``reserved`` (another request is
    answering it), read again from the ledger with growing pauses; :class:`InProgressError`
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause, charge = _FIRST_PAUSE, ledger.charge(first.id)
    while charge is not None and charge.status == "reserved" and time.monotonic() < deadline:
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, _LONGEST_PAUSE)
        charge = ledger.charge(first.id)
    return _settled(charge, first, timeout)


async def wait_for_answer_async(ledger: Ledger, first: Charge, timeout: float) -> Charge:
    """:func:`wait_for_answer` for a coroutine (the pauses do not hold the event loop; each
    read of the embedded ledger takes microseconds)."""
    deadline = time.monotonic() + timeout
    pause, charge = _FIRST_PAUSE, ledger.charge(first.id)
    while charge is not None and charge.status == "reserved" and time.monotonic() < deadline:
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, _LONGEST_PAUSE)
        charge = ledger.charge(first.id)
    return _settled(charge, first, timeout)
