"""Bounds on the request audit log: requests without a valid key are sampled and counted, and
request rows older than the retention period are deleted. Charges are never touched.

Anyone who can reach the service can send requests without a key; written one row each (about
230 bytes), one client would grow the ledger by gigabytes an hour. So, per process and minute,
the first ``audit_anonymous_rows_per_minute`` of them are written as audit rows (enough to see
what is being tried, e.g. key guesses) and every one is counted in ``request_counts`` (one row
per minute and HTTP status, whatever the volume). Request rows of every principal (and the
counters) older than ``audit_retention_days`` are deleted every ten minutes, in small
transactions; the audit rows of charges (``kind = 'charge'``) and the charges themselves are
kept forever.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.server._ledger import Ledger

__all__ = ["AnonymousSampler", "prune_requests", "request_counts", "write_request_counts"]

BUCKET_SECONDS = 60
PRUNE_EVERY_SECONDS = 600.0
_PRUNE_CHUNK = 5000


class AnonymousSampler:
    """Which requests without a principal are written as rows; counts of all of them.

    Examples
    --------
    >>> s = AnonymousSampler(per_minute=2)
    >>> [s.admit(120.0, 401) for _ in range(4)]
    [True, True, False, False]
    >>> s.take()
    [(120, 401, 4)]
    """

    def __init__(self, per_minute: int) -> None:
        self._per_minute = per_minute
        self._bucket = -1
        self._written = 0
        self._counts: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    def admit(self, ts: float, status: int) -> bool:
        """Count one request without a principal; whether to write it as an audit row."""
        bucket = int(ts // BUCKET_SECONDS) * BUCKET_SECONDS
        with self._lock:
            key = (bucket, int(status))
            self._counts[key] = self._counts.get(key, 0) + 1
            if bucket != self._bucket:
                self._bucket, self._written = bucket, 0
            if self._written >= self._per_minute:
                return False
            self._written += 1
            return True

    def take(self) -> list[tuple[int, int, int]]:
        """The counts since the last call, ``(bucket, status, count)``, and forget them."""
        with self._lock:
            counts, self._counts = self._counts, {}
        return [(b, s, n) for (b, s), n in sorted(counts.items())]

    def give_back(self, counts: list[tuple[int, int, int]]) -> None:
        """Counts that could not be written: kept for the next write."""
        with self._lock:
            for b, s, n in counts:
                self._counts[(b, s)] = self._counts.get((b, s), 0) + n


def write_request_counts(ledger: Ledger, counts: list[tuple[int, int, int]]) -> None:
    """Add ``(bucket, status, count)`` to the ledger's ``request_counts``."""
    if not counts:
        return
    sql = ledger._sql(
        "INSERT INTO request_counts (bucket, status, count) VALUES (?, ?, ?) "
        "ON CONFLICT (bucket, status) DO UPDATE SET count = request_counts.count + excluded.count"
    )
    with ledger._tx(durable=False) as conn:
        conn.cursor().executemany(sql, counts)


def request_counts(ledger: Ledger, limit: int = 1440) -> list[dict[str, Any]]:
    """The latest counters of requests without a valid key, newest first."""
    rows = ledger._exec(
        "SELECT bucket, status, count FROM request_counts ORDER BY bucket DESC, status LIMIT ?",
        (int(limit),),
    ).fetchall()
    return [{"minute": int(r[0]), "status": int(r[1]), "count": int(r[2])} for r in rows]


def prune_requests(ledger: Ledger, days: float | None, now: float | None = None) -> int:
    """Delete request audit rows and counters older than ``days`` (``None``: keep all); the
    charges' audit rows are kept. Small transactions, so that charges are not held up.
    Returns the number of audit rows deleted."""
    if days is None:
        return 0
    cutoff = (time.time() if now is None else now) - days * 86400.0
    q = ledger._sql
    total = 0
    while True:
        with ledger._tx(durable=False) as conn:
            n: int = conn.execute(
                q("DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE kind = 'request' "
                  "AND ts < ? LIMIT ?)"), (cutoff, _PRUNE_CHUNK),
            ).rowcount  # fmt: skip
        total += max(n, 0)
        if n < _PRUNE_CHUNK:
            break
    with ledger._tx(durable=False) as conn:
        conn.execute(q("DELETE FROM request_counts WHERE bucket < ?"), (cutoff,))
    return total
