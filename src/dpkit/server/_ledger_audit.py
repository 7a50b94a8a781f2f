"""The ledger's audit log and its consistency check (mixed into :class:`._ledger.Ledger`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from dpkit.server._sql import from_units

__all__ = ["AuditQueries"]


class AuditQueries:
    """Reading and writing the audit table; checking budgets against charges."""

    def _exec(self, sql: str, args: Sequence[Any] = ()) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _sql(self, sql: str) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def _tx(self, durable: bool = True) -> AbstractContextManager[Any]:  # pragma: no cover
        raise NotImplementedError

    # -- audit ---------------------------------------------------------------------------------
    def write_audit(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Append rows ``(ts, principal, method, path, dataset, query, status, outcome)``."""
        if not rows:
            return
        sql = self._sql(
            "INSERT INTO audit (ts, principal, kind, method, path, dataset, query, status, "
            "outcome) VALUES (?, ?, 'request', ?, ?, ?, ?, ?, ?)"
        )
        # Not flushed on its own (like a stored answer): it survives a crash of the service and
        # reaches the disk with the next charge; the rows go in one call, not one per row, so
        # the write lock is held briefly.
        try:
            with self._tx(durable=False) as conn:
                conn.cursor().executemany(sql, rows)
            return
        except Exception:
            if len(rows) == 1:
                raise
        # One row the database refused (the fields are sanitized, but a database may still
        # refuse one) must not lose the others: each is written in its own transaction, and
        # a row refused again is kept with its text fields blanked, so the request is counted.
        for row in rows:
            try:
                with self._tx(durable=False) as conn:
                    conn.cursor().execute(sql, row)
            except Exception:
                logging.getLogger("dpkit.server").exception("audit row refused; blanked")
                ts, principal, _method, _path, _ds, _q, status, _outcome = row
                with self._tx(durable=False) as conn:
                    conn.cursor().execute(
                        sql, (ts, principal, None, None, None, None, status, "(unstorable)")
                    )

    def audit(self, principal: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """The latest audit rows (of one principal, or all), newest first."""
        sql = (
            "SELECT id, ts, principal, kind, method, path, dataset, query, epsilon, delta, "
            "status, outcome FROM audit"
        )
        args: tuple[Any, ...] = ()
        if principal is not None:
            sql, args = sql + " WHERE principal = ?", (principal,)
        rows = self._exec(sql + " ORDER BY id DESC LIMIT ?", (*args, int(limit))).fetchall()
        keys = ("id", "ts", "principal", "kind", "method", "path", "dataset", "query",
                "epsilon", "delta", "status", "outcome")  # fmt: skip
        out = []
        for r in rows:
            d = dict(zip(keys, r, strict=True))
            for k in ("epsilon", "delta"):
                d[k] = None if d[k] is None else from_units(d[k])
            out.append(d)
        return out

    def check_consistency(self) -> list[str]:
        """Problems found in the ledger (empty when consistent): each budget's and dataset's
        spent equals the sum of its charges that were not refunded, spent ≤ budget, and every
        released charge has its answer."""
        problems = []
        for table, key, where in (
            ("budgets", "analyst, dataset", "c.analyst = t.analyst AND c.dataset = t.dataset"),
            ("datasets", "name", "c.dataset = t.name"),
        ):
            lim = (
                "epsilon, delta, rho"
                if table == "budgets"
                else "total_epsilon, total_delta, total_rho"
            )
            rows = self._exec(
                f"SELECT {key}, spent_epsilon, spent_delta, spent_rho, {lim}, "
                f"(SELECT COALESCE(SUM(epsilon), 0) FROM charges c WHERE {where} "
                "AND c.status <> 'refunded'), "
                f"(SELECT COALESCE(SUM(delta), 0) FROM charges c WHERE {where} "
                "AND c.status <> 'refunded'), "
                f"(SELECT COALESCE(SUM(rho), 0) FROM charges c WHERE {where} "
                f"AND c.status <> 'refunded') FROM {table} t"
            ).fetchall()
            for r in rows:
                *ids, se, sd, sr, le, ld, lr, ce, cd, cr = r
                if lr is not None:  # a budget in rho: it is charged each charge's rho only
                    if int(sr) != int(cr) or se or sd:
                        problems.append(f"{table} {ids}: spent rho {sr} but charges sum {cr}")
                    if sr > lr:
                        problems.append(f"{table} {ids}: spent rho {sr} over budget {lr}")
                    continue
                if int(se) != int(ce) or int(sd) != int(cd) or sr:
                    problems.append(f"{table} {ids}: spent {se},{sd} but charges sum {ce},{cd}")
                if se > le or sd > ld:
                    problems.append(f"{table} {ids}: spent {se},{sd} over budget {le},{ld}")
        bad = self._exec(
            "SELECT COUNT(*) FROM charges WHERE status = 'released' AND result_json IS NULL"
        ).fetchone()[0]
        if bad:
            problems.append(f"{bad} released charges without an answer")
        return problems
