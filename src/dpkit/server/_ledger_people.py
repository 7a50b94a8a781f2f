"""The ledger's people and budgets: principals, datasets and each analyst's budget on one.

A mixin of :class:`dpkit.server._ledger.Ledger` (which gives it its transactions); the charges
against these budgets are :mod:`._charges`, the audit log :mod:`._ledger_audit`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from dpkit.errors import DataError
from dpkit.server._rho import rho_shown
from dpkit.server._sql import from_units, limit_units


class PeopleAndBudgets:
    """Adding and listing principals, datasets and budgets (amounts in ledger units)."""

    postgres: bool  # (set by the ledger: whether it is a PostgreSQL one)

    def _exec(self, sql: str, args: Sequence[Any] = ()) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _sql(self, sql: str) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def _tx(self, durable: bool = True) -> AbstractContextManager[Any]:  # pragma: no cover
        raise NotImplementedError

    # -- principals ----------------------------------------------------------------------------
    def add_principal(self, pid: str, name: str, role: str, key_hash: str) -> None:
        """Add an admin or analyst (``key_hash`` is the SHA-256 of the key)."""
        with self._tx() as conn:
            args = (pid, name, role, key_hash, time.time())
            try:
                conn.execute(self._sql("INSERT INTO principals VALUES (?, ?, ?, ?, ?)"), args)
            except Exception as exc:
                if "unique" in str(exc).lower():
                    raise DataError("a principal with that name already exists.") from exc
                raise

    def set_key_hash(self, pid: str, key_hash: str) -> None:
        """Replace a principal's key (the old key stops working)."""
        with self._tx() as conn:
            conn.execute(self._sql("UPDATE principals SET key_hash = ? WHERE id = ?"),
                         (key_hash, pid))  # fmt: skip

    def principal(self, pid: str) -> tuple[str, str, str, str] | None:
        """``(id, name, role, key_hash)`` of a principal, or ``None``."""
        row = self._exec(
            "SELECT id, name, role, key_hash FROM principals WHERE id = ?", (pid,)
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def principals(self) -> list[dict[str, Any]]:
        """Every principal (without key hashes)."""
        rows = self._exec("SELECT id, name, role, created FROM principals ORDER BY created")
        return [dict(id=r[0], name=r[1], role=r[2], created=r[3]) for r in rows.fetchall()]

    # -- datasets and budgets ------------------------------------------------------------------
    def add_dataset(
        self,
        name: str,
        schema: dict[str, Any],
        epsilon: float,
        delta: float,
        *,
        rho: float | None = None,
    ) -> int:
        """Register a dataset's schema and total budget (a new schema replaces the old one).

        The total is (ε, δ), or ρ (zCDP) when ``rho`` is given (then ε and δ are 0); a dataset
        registered again keeps its total. Returns the dataset's version: 1 when new, one more
        than before when replaced."""
        rho_units = None if rho is None else limit_units(rho)
        with self._tx() as conn:
            args = (name, json.dumps(schema), limit_units(epsilon), limit_units(delta),
                    rho_units, time.time())  # fmt: skip
            conn.execute(
                self._sql(
                    "INSERT INTO datasets (name, schema_json, total_epsilon, total_delta, "
                    "total_rho, created) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "schema_json = excluded.schema_json, version = datasets.version + 1"
                ),
                args,
            )
            row = conn.execute(self._sql("SELECT version FROM datasets WHERE name = ?"), (name,))
            return int(row.fetchone()[0])

    def datasets(self) -> list[dict[str, Any]]:
        """Every dataset with its schema, version, total and spent budget (and, for a total in
        ρ, ``total_rho``, ``spent_rho`` and :func:`rho_shown`'s (ε, δ) of what remains)."""
        rows = self._exec(
            "SELECT name, schema_json, total_epsilon, total_delta, spent_epsilon, spent_delta, "
            "version, total_rho, spent_rho FROM datasets ORDER BY name"
        ).fetchall()
        out = []
        for r in rows:
            ds = dict(
                name=r[0],
                schema=json.loads(r[1]),
                total_epsilon=from_units(r[2]),
                total_delta=from_units(r[3]),
                spent_epsilon=from_units(r[4]),
                spent_delta=from_units(r[5]),
                version=int(r[6]),
            )
            if r[7] is not None:
                ds.update(total_rho=from_units(r[7]), spent_rho=from_units(r[8]))
                ds.update(rho_shown(r[7] - r[8]))
            out.append(ds)
        return out

    def set_budget(
        self, analyst: str, dataset: str, epsilon: float, delta: float, *, rho: float | None = None
    ) -> None:
        """Set an analyst's budget on a dataset (never below what is already spent).

        With ``rho`` the budget is in zCDP (ρ, composed by adding; ``epsilon`` and ``delta``
        must be 0); a budget changes unit only while nothing has been spent from it."""
        eu, du = limit_units(epsilon), limit_units(delta)
        ru = None if rho is None else limit_units(rho)
        if ru is not None and (eu or du):
            raise DataError("a budget is in (epsilon, delta) or in rho, not both.")
        with self._tx() as conn:
            if (
                conn.execute(
                    self._sql("SELECT 1 FROM datasets WHERE name = ?"), (dataset,)
                ).fetchone()
                is None
            ):
                raise DataError("no dataset of that name.")
            p = self.principal(analyst)
            if p is None or p[2] != "analyst":
                raise DataError("no analyst with that id.")
            lock = " FOR UPDATE" if self.postgres else ""
            row = conn.execute(
                self._sql(
                    "SELECT spent_epsilon, spent_delta, rho, spent_rho FROM budgets WHERE "
                    "analyst = ? AND dataset = ?" + lock
                ),
                (analyst, dataset),
            ).fetchone()
            if row is None:
                conn.execute(
                    self._sql(
                        "INSERT INTO budgets (analyst, dataset, epsilon, delta, rho) "
                        "VALUES (?, ?, ?, ?, ?)"
                    ),
                    (analyst, dataset, eu, du, ru),
                )
                return
            spent = row[0] or row[1] or row[3]
            if spent and (row[2] is None) != (ru is None):
                raise DataError(
                    "a budget cannot change between (epsilon, delta) and rho once the analyst "
                    "has spent from it."
                )
            if row[0] > eu or row[1] > du or (ru is not None and row[3] > ru):
                raise DataError("a budget cannot be set below what the analyst already spent.")
            conn.execute(
                self._sql(
                    "UPDATE budgets SET epsilon = ?, delta = ?, rho = ? "
                    "WHERE analyst = ? AND dataset = ?"
                ),
                (eu, du, ru, analyst, dataset),
            )

    def budgets(self, analyst: str | None = None) -> list[dict[str, Any]]:
        """Budgets (of one analyst, or all), with what is spent and what remains; a budget in
        ρ also has ``rho``, ``spent_rho``, ``remaining_rho`` and the (ε, δ) that the remaining
        ρ implies (:func:`rho_shown`, for display: the ledger composes and checks ρ itself)."""
        sql = (
            "SELECT b.analyst, p.name, b.dataset, b.epsilon, b.delta, b.spent_epsilon, "
            "b.spent_delta, b.rho, b.spent_rho FROM budgets b JOIN principals p ON p.id = b.analyst"
        )
        args: tuple[Any, ...] = ()
        if analyst is not None:
            sql, args = sql + " WHERE b.analyst = ?", (analyst,)
        rows = self._exec(sql + " ORDER BY p.name, b.dataset", args).fetchall()
        out = []
        for r in rows:
            b = dict(
                analyst=r[0],
                name=r[1],
                dataset=r[2],
                epsilon=from_units(r[3]),
                delta=from_units(r[4]),
                spent_epsilon=from_units(r[5]),
                spent_delta=from_units(r[6]),
                remaining_epsilon=from_units(r[3] - r[5]),
                remaining_delta=from_units(r[4] - r[6]),
            )
            if r[7] is not None:
                b.update(rho=from_units(r[7]), spent_rho=from_units(r[8]),
                         remaining_rho=from_units(r[7] - r[8]))  # fmt: skip
                b.update(rho_shown(r[7] - r[8]))
            out.append(b)
        return out
