"""The request audit log: one row per HTTP request, written in batches by a background thread.

Every *charge* is audited inside its own ledger transaction (:meth:`Ledger.reserve`), so a charge
and its audit row are durable together. The per-request rows (who, when, what, status, outcome)
are queued and written every ``interval`` seconds in one transaction, so that auditing does not
add a disk flush to every request. A crash of the service can lose at most the last interval's
request rows (a power loss, also those written since the last charge's flush), never a charge's.

Requests without a valid key are sampled and counted, and old request rows deleted
(:mod:`._audit_limits`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

from dpkit.server._audit_limits import (
    PRUNE_EVERY_SECONDS,
    AnonymousSampler,
    prune_requests,
    write_request_counts,
)
from dpkit.server._ledger import Ledger

__all__ = ["AuditWriter"]


class AuditWriter:
    """Queue audit rows and write them in batches (call :meth:`close` to flush and stop)."""

    def __init__(
        self,
        ledger: Ledger,
        interval: float = 0.2,
        *,
        anonymous_per_minute: int = 60,
        retention_days: float | None = 90.0,
    ) -> None:
        self._ledger = ledger
        self._interval = interval
        self._anonymous = AnonymousSampler(anonymous_per_minute)
        self._retention = retention_days
        self._pruned = -float("inf")
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dpkit-audit", daemon=True)
        self._thread.start()

    def add(self, row: tuple[Any, ...]) -> None:
        """Queue ``(ts, principal, method, path, dataset, query, status, outcome)``; one
        without a principal only if the sample of its minute is not full (it is counted)."""
        if row[1] is None and not self._anonymous.admit(row[0], row[6]):
            return
        self._queue.put(row)

    def flush(self) -> None:
        """Write every queued row now."""
        rows = []
        while True:
            try:
                rows.append(self._queue.get_nowait())
            except queue.Empty:
                break
        self._ledger.write_audit(rows)
        counts = self._anonymous.take()
        try:
            write_request_counts(self._ledger, counts)
        except BaseException:
            self._anonymous.give_back(counts)
            raise

    def _run(self) -> None:
        self._prune_safely()
        while not self._stop.wait(self._interval):
            self._flush_safely()
            self._prune_safely()
        self._flush_safely()

    def _prune_safely(self) -> None:
        """Delete request rows past the retention period (at start, then every ten minutes)."""
        if time.monotonic() - self._pruned < PRUNE_EVERY_SECONDS:
            return
        self._pruned = time.monotonic()
        try:
            prune_requests(self._ledger, self._retention)
        except Exception:
            logging.getLogger("dpkit.server").exception("could not delete old audit rows")

    def _flush_safely(self) -> None:
        # A failed write must not end the thread: later requests would go unaudited.
        try:
            self.flush()
        except Exception:
            logging.getLogger("dpkit.server").exception("could not write audit rows")

    def close(self) -> None:
        """Flush and stop the writer."""
        self._stop.set()
        self._thread.join(timeout=10)
