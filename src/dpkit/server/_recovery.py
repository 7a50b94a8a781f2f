"""What happens to a charge that a crash interrupted, and to requests that repeat an
idempotency key while its first request is still being answered.

A charge is made durable before any noise is drawn (``reserved``), and its answer is stored in
the same row before it is sent (``released``). A process killed in between leaves the row
``reserved``: its answer was never stored, so it was never sent, but noise may have been drawn,
so the budget stays charged. When the service starts again and no other process of it is
running, every such row is marked ``lost`` (a final state: charged, no answer) and audited;
a retry with its idempotency key is answered 410 (:class:`AnswerLostError`), not charged again.

Orphans are found only by a process that knows it is alone: every process of a service holds
the data directory's *liveness lock* (``.dpkit.live``, ``flock``) shared for its life, and a
starting process that can take it exclusively knows no other process of the service is running
(the kernel drops the lock of a dead process), so every ``reserved`` row is an orphan. A worker
restarted while others run finds the lock held and leaves the rows alone (they may be in flight
elsewhere); they are resolved at the next start of the whole service.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dpkit.errors import DPKitError

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.server._charges import Charge
    from dpkit.server._ledger import Ledger

__all__ = [
    "AnswerLostError",
    "InProgressError",
    "Liveness",
    "resolve_orphans",
    "wait_for_answer",
    "wait_for_answer_async",
]


class AnswerLostError(DPKitError):
    """The idempotency key's charge was interrupted by a crash: charged, no answer (HTTP 410)."""


class InProgressError(DPKitError):
    """The idempotency key's first request is still being answered (HTTP 409)."""


class Liveness:
    """The data directory's liveness lock, held shared by each live process of the service.

    :meth:`enter` returns whether this process is the only one (it then holds the lock
    exclusively until :meth:`share`, so that no other process starts answering meanwhile).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> one, two = Liveness(d), Liveness(d)
    >>> one.enter()
    True
    >>> one.share()
    >>> two.enter()       # `one` is alive: `two` is not alone
    False
    >>> one.close(); two.close()
    """

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / ".dpkit.live"
        self._fd: int | None = None

    def enter(self) -> bool:
        """Take the lock: exclusively if no other process holds it (``True``), else shared."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fcntl.flock(self._fd, fcntl.LOCK_SH)  # waits for a process that is resolving
            return False
        return True

    def share(self) -> None:
        """Hold the lock shared from now on (other processes may start)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_SH)

    def close(self) -> None:
        """Release the lock (when the service stops)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def resolve_orphans(ledger: Ledger) -> int:
    """Mark every ``reserved`` charge ``lost`` (call only when no process of the service runs).

    Nothing is refunded: noise may have been drawn before the crash. Each one gets an audit row
    (``lost <id>``). Returns how many were resolved.
    """
    q = ledger._sql
    with ledger._tx() as conn:
        rows = conn.execute(
            q("SELECT id, analyst, dataset, request_json, epsilon, delta FROM charges "
              "WHERE status = 'reserved'")
        ).fetchall()  # fmt: skip
        if not rows:
            return 0
        now = time.time()
        conn.execute(
            q("UPDATE charges SET status = 'lost', finished = ? WHERE status = 'reserved'"), (now,)
        )
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
