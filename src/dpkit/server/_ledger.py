"""The privacy ledger: budgets, charges and the audit log, in SQLite or PostgreSQL.

The charge protocol (the sound one of ``docs/server.md``; the mistakes it avoids are a budget
checked before computing and charged after, and an answer archived outside the charge):

1. the query is validated and priced from the request alone (no data read);
2. **one transaction** (shared by the charges queued together: :mod:`._charges`) checks the
   analyst's budget and the dataset's total, inserts a ``reserved`` charge row, adds the cost to
   both, and writes an audit row; it is durable before any noise is drawn (SQLite:
   ``BEGIN IMMEDIATE`` in WAL mode with ``synchronous=FULL``; PostgreSQL: ``SELECT … FOR
   UPDATE`` on the dataset and budget rows);
3. the answer is computed and stored in the same row, marked ``released``;
4. a charge is refunded only if the computation failed before drawing noise. After a crash,
   rows still ``reserved`` stay charged, and are marked ``lost`` at the next start
   (:mod:`._recovery`).

So after ``kill -9`` at any moment the ledger holds every charge, and no released answer lacks one.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dpkit.accounting import Neighbouring
from dpkit.errors import DPKitError
from dpkit.server._charges import (
    CHARGE_COLUMNS,
    RELATIONS_TABLE,
    Charge,
    ChargeBatches,
    NoBudgetError,
    StaleDatasetError,
    ask,
    charge_from_row,
)
from dpkit.server._checkpoint import Checkpointer
from dpkit.server._files import private_ledger
from dpkit.server._group import GroupCommit
from dpkit.server._ledger_audit import AuditQueries
from dpkit.server._ledger_people import PeopleAndBudgets
from dpkit.server._locks import ledger_file_lock
from dpkit.server._sql import MIGRATIONS

__all__ = ["Charge", "Ledger", "NoBudgetError", "StaleDatasetError"]


def _serialization_failure(exc: BaseException) -> bool:
    """A PostgreSQL serialization failure or deadlock: the transaction may simply be re-run."""
    return getattr(exc, "sqlstate", None) in ("40001", "40P01")


_REFUND = (
    "spent_epsilon = spent_epsilon - CASE WHEN {rho} IS NULL THEN ? ELSE 0 END, "
    "spent_delta = spent_delta - CASE WHEN {rho} IS NULL THEN ? ELSE 0 END, "
    "spent_rho = spent_rho - CASE WHEN {rho} IS NULL THEN 0 ELSE ? END"
)


def _close_all(held: list[tuple[threading.Thread, Any]]) -> None:
    while held:
        with contextlib.suppress(Exception):  # a connection already broken needs no closing
            held.pop()[1].close()


class Ledger(AuditQueries, ChargeBatches, PeopleAndBudgets):
    """Budgets and charges in an SQL database given by URL.

    ``sqlite:///path/to/ledger.db`` (or a plain path) for the embedded default, or
    ``postgresql://user@host:port/db``. One connection per thread, opened on the thread's first
    use; :meth:`close` closes all of them.

    Examples
    --------
    >>> import tempfile, os
    >>> from dpkit.server import Ledger
    >>> led = Ledger(os.path.join(tempfile.mkdtemp(), "ledger.db"))
    >>> led.migrate()
    4
    """

    def __init__(self, url: str, *, background_checkpoints: bool = False) -> None:
        self.url = url
        # the process that will answer the charges reserved here (set by the service)
        self.owner: str | None = None
        self.postgres = url.startswith(("postgresql://", "postgres://"))
        self._local = threading.local()
        # Each thread's connection with its thread, also known here so that close() ends them
        # all. A connection whose thread has ended is closed when the next one is opened, and
        # every one when the ledger is collected: none is left to the collector open.
        self._held: list[tuple[threading.Thread, Any]] = []
        self._held_lock = threading.Lock()
        self._generation = 0
        weakref.finalize(self, _close_all, self._held)
        # The service checkpoints the SQLite log in a thread of its own (:mod:`._checkpoint`).
        self._checkpoints = background_checkpoints and not self.postgres
        self._checkpointer: Checkpointer | None = None
        self._checkpointer_lock = threading.Lock()
        # SQLite has one writer at a time; threads of this process queue on a lock instead of
        # polling the file lock (whose busy handler sleeps, which gives long latency tails).
        # Other processes are still excluded by BEGIN IMMEDIATE.
        self._write_lock = threading.Lock()
        # Other processes (workers of one service) queue on a file lock for the same reason.
        self._file_lock = None if self.postgres else ledger_file_lock(url)
        # PostgreSQL locks rows itself; its group lock only makes one leader at a time.
        group_lock = threading.Lock() if self.postgres else self._write_lock
        self._group = GroupCommit(
            group_lock,
            self._conn,
            sqlite=not self.postgres,
            retryable=_serialization_failure,
            # The ledger's writes (reserve, release) raise DPKitError only before writing.
            refusal=lambda exc: isinstance(exc, DPKitError),
            between_processes=self._file_lock,
        )

    # -- connections -------------------------------------------------------------------------
    def _connect(self) -> Any:
        if self.postgres:
            try:
                import psycopg
            except ImportError as exc:  # pragma: no cover - the server extra installs it
                raise ImportError("a PostgreSQL ledger needs pip install 'dpkit[server]'") from exc
            return psycopg.connect(self.url, autocommit=True)
        path = self.url.removeprefix("sqlite:///") if self.url.startswith("sqlite:") else self.url
        # Created 0600 before SQLite opens it (its -wal and -shm files take the same mode): the
        # ledger holds every answer, and a umask of 022 would leave it world-readable.
        private_ledger(path)
        conn = sqlite3.connect(path, timeout=60.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk (WAL fsynced) before it returns, so a charge survives power
        # loss, not only a crash of the process (NORMAL only guarantees the latter).
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=60000")
        if self._checkpoints:
            conn.execute("PRAGMA wal_autocheckpoint=0")
            with self._checkpointer_lock:
                if self._checkpointer is None:
                    self._checkpointer = Checkpointer(path)
        return conn

    def stop_checkpoints(self) -> None:
        """Stop the background checkpoints after a last one (when the service stops); new
        connections checkpoint on their commits again."""
        with self._checkpointer_lock:
            ck, self._checkpointer, self._checkpoints = self._checkpointer, None, False
        if ck is not None:
            ck.stop()

    def _conn(self) -> Any:
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == self._generation:
            return held[1]
        conn = self._connect()
        with self._held_lock:
            ended = [h for h in self._held if not h[0].is_alive()]
            self._held[:] = [h for h in self._held if h[0].is_alive()]
            self._held.append((threading.current_thread(), conn))
            self._local.held = (self._generation, conn)
        _close_all(ended)
        return conn

    def close(self) -> None:
        """Close every connection this ledger has opened, in any thread.

        Call it when no thread is using the ledger any more (the service does, when it stops).
        The ledger stays usable: a thread's next statement opens a new connection.
        """
        with self._held_lock:
            held = self._held[:]
            self._held.clear()
            self._generation += 1
        self._local.held = None
        _close_all(held)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def _exec(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._conn().execute(self._sql(sql), tuple(args))

    @contextmanager
    def _tx(self, durable: bool = True) -> Iterator[Any]:
        """One write transaction; SQLite takes the write lock at BEGIN, so read-then-write is
        safe. ``durable=False`` skips the SQLite commit's own disk flush (see :meth:`release`)."""
        sqlite = not self.postgres
        if sqlite:
            self._write_lock.acquire()
            if self._file_lock is not None:
                try:
                    self._file_lock.__enter__()
                except BaseException:
                    self._write_lock.release()
                    raise
        try:
            conn = self._conn()
            if sqlite and not durable:
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("BEGIN IMMEDIATE" if sqlite else "BEGIN")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            if sqlite:
                try:
                    if not durable:
                        self._conn().execute("PRAGMA synchronous=FULL")
                finally:
                    if self._file_lock is not None:
                        self._file_lock.__exit__(None, None, None)
                    self._write_lock.release()

    # -- schema --------------------------------------------------------------------------------
    def migrate(self) -> int:
        """Apply the migrations not applied yet; returns the schema version."""
        serial = "BIGSERIAL PRIMARY KEY" if self.postgres else "INTEGER PRIMARY KEY AUTOINCREMENT"
        with self._tx() as conn:
            if self.postgres:
                conn.execute("SELECT pg_advisory_xact_lock(424242)")
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            version = row[0] or 0
            for i, steps in enumerate(MIGRATIONS[version:], start=version + 1):
                for step in steps:
                    conn.execute(step.format(serial=serial))
                conn.execute(self._sql("INSERT INTO schema_version VALUES (?)"), (i,))
            # (unnumbered: see RELATIONS_TABLE). A ledger written before the table existed
            # charged every dataset under add/remove, the only relation the service priced:
            # its datasets with charges are recorded so, or a replace-one charge would be
            # taken as the first one and summed with them.
            had = conn.execute(
                "SELECT to_regclass('dataset_relations') IS NOT NULL"
                if self.postgres
                else "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' "
                "AND name = 'dataset_relations'"
            ).fetchone()[0]
            conn.execute(RELATIONS_TABLE)
            if not had:
                conn.execute(
                    self._sql(
                        "INSERT INTO dataset_relations (dataset, neighbouring) "
                        "SELECT DISTINCT dataset, ? FROM charges"
                    ),
                    (Neighbouring.ADD_REMOVE.value,),
                )
        return len(MIGRATIONS)

    # -- charges -------------------------------------------------------------------------------
    def reserve(
        self,
        analyst: str,
        dataset: str,
        request: dict[str, Any],
        epsilon: float | None,
        delta: float,
        idem_key: str | None = None,
        version: int | None = None,
        rho: float | None = None,
        neighbouring: Neighbouring | None = Neighbouring.ADD_REMOVE,
    ) -> Charge:
        """Charge (ε, δ) durably in one transaction, or raise and charge nothing.

        ``rho``: the request's price in zCDP, paid by budgets declared in ρ (``None``: an
        (ε, δ > 0) request, which they refuse); ``epsilon=None``: a ρ request without δ, which
        (ε, δ) budgets refuse. Each budget row (the analyst's, the dataset's total) pays in its
        own unit.

        With an idempotency key already used by this analyst, the existing charge is returned
        (``replayed=True``) and nothing new is charged; a different request under the same key
        is refused.

        Raises
        ------
        NoBudgetError
            No budget for this analyst on this dataset.
        BudgetExceededError
            The analyst's budget or the dataset's total would be exceeded.
        StaleDatasetError
            ``version`` is given and the dataset has been replaced since (by another process):
            nothing is charged; the caller reloads the dataset and asks again.
        PrivacyParameterError
            The dataset's earlier charges were made under the other ``neighbouring`` relation
            (add/remove of one unit, the default and the relation of every query the service
            prices, or replacement of one unit): guarantees under the two do not add up, so
            nothing is charged. ``None``: a charge whose guarantee holds under either.
        """
        # Charges queued together share one transaction, a few statements and one flush
        # (:mod:`._group`); a PostgreSQL batch that meets a deadlock or serialization failure
        # is retried whole.
        item = ask(
            analyst,
            dataset,
            request,
            epsilon,
            delta,
            idem_key,
            version,
            rho=rho,
            neighbouring=neighbouring,
        )
        out: Charge = self._group.run_many(self._reserve_many, item)
        return out

    async def reserve_async(
        self,
        analyst: str,
        dataset: str,
        request: dict[str, Any],
        epsilon: float | None,
        delta: float,
        idem_key: str | None = None,
        version: int | None = None,
        rho: float | None = None,
        neighbouring: Neighbouring | None = Neighbouring.ADD_REMOVE,
    ) -> Charge:
        """:meth:`reserve` for a coroutine on an event loop (the same transaction and batch)."""
        item = ask(
            analyst,
            dataset,
            request,
            epsilon,
            delta,
            idem_key,
            version,
            rho=rho,
            neighbouring=neighbouring,
        )
        out: Charge = await self._group.run_many_async(self._reserve_many, item)
        return out

    def release(self, cid: str, result: dict[str, Any]) -> None:
        """Store the answer of a reserved charge and mark it released.

        Answers stored together share one transaction (:mod:`._group`), committed before this
        returns. On SQLite a batch of answers alone is not flushed to disk on its own
        (``synchronous=NORMAL``): it survives a crash of the service, as WAL commits do, and is
        flushed with the next charge. A power loss can therefore lose the stored copy of the
        latest answers, never a charge (each charge is flushed before its noise is drawn).
        """
        item = (json.dumps(result), time.time(), cid)
        self._group.run_many(self._release_many, item, durable=False)

    async def release_async(self, cid: str, result: dict[str, Any]) -> None:
        """:meth:`release` for a coroutine on an event loop."""
        item = (json.dumps(result), time.time(), cid)
        await self._group.run_many_async(self._release_many, item, durable=False)

    def fail(self, cid: str, *, refund: bool) -> None:
        """Mark a charge failed; refund it only if no noise was drawn (``refund=True``)."""
        status = "refunded" if refund else "failed"
        with self._tx() as conn:
            # One statement reads and moves the status: on PostgreSQL a second fail (or a
            # release) of the same charge waits for this row's lock, then finds it no longer
            # reserved, so a charge is refunded at most once and never after its answer.
            row = conn.execute(
                self._sql("UPDATE charges SET status = ?, finished = ? "
                          "WHERE id = ? AND status = 'reserved' "
                          "RETURNING analyst, dataset, epsilon, delta, rho"),
                (status, time.time(), cid),
            ).fetchone()  # fmt: skip
            if row is None:
                return
            a, d, eu, du, ru = row[0], row[1], row[2], row[3], row[4] or 0
            if refund:
                # Dataset row first, then budget row: the lock order of a charge (no deadlock).
                # Each row takes back what its unit was charged: ρ on a ρ budget, (ε, δ) else.
                conn.execute(
                    self._sql(f"UPDATE datasets SET {_REFUND.format(rho='total_rho')} "
                              "WHERE name = ?"), (eu, du, ru, d),
                )  # fmt: skip
                conn.execute(
                    self._sql(f"UPDATE budgets SET {_REFUND.format(rho='rho')} "
                              "WHERE analyst = ? AND dataset = ?"),
                    (eu, du, ru, a, d),
                )  # fmt: skip

    def charge(self, cid: str) -> Charge | None:
        """One charge by id, or ``None``."""
        row = self._exec(f"SELECT {CHARGE_COLUMNS} FROM charges WHERE id = ?", (cid,)).fetchone()
        return None if row is None else charge_from_row(row)

    def charges(self, analyst: str | None = None, limit: int = 100) -> list[Charge]:
        """The latest charges (of one analyst, or all), newest first."""
        sql, args = f"SELECT {CHARGE_COLUMNS} FROM charges", ()  # type: tuple[str, tuple[Any, ...]]
        if analyst is not None:
            sql, args = sql + " WHERE analyst = ?", (analyst,)
        rows = self._exec(sql + " ORDER BY created DESC LIMIT ?", (*args, int(limit)))
        return [charge_from_row(r) for r in rows.fetchall()]
