"""The ledger's SQL schema: one schema for SQLite and PostgreSQL, applied by numbered migrations.

Privacy amounts are stored as integers in units of 10⁻¹² (:data:`UNIT`), converted by the one
budget arithmetic of :mod:`dpkit.accounting._budget` that the library's accountants use too: a
budget is rounded down and a cost up, so adding costs is exact and a decimal written with up to
12 decimal places is stored exactly (20 charges of 0.05 fit a budget of 1, and no more).
"""

from __future__ import annotations

from dpkit.accounting._budget import UNIT, budget_units, cost_units, from_units

__all__ = ["MIGRATIONS", "UNIT", "cost_units", "from_units", "limit_units"]

limit_units = budget_units
"""A budget in units, rounded down (the ledger's name for :func:`budget_units`)."""


# {serial} is the auto-increment key of the dialect. Statuses of a charge: 'reserved' (charged,
# answer not stored yet, or lost in a crash: it stays charged), 'released' (answer stored),
# 'failed' (charged, noise may have been drawn, no answer), 'refunded' (failed before any noise).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE principals (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            role TEXT NOT NULL CHECK (role IN ('admin', 'analyst')),
            key_hash TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL
        )""",
        """CREATE TABLE datasets (
            name TEXT PRIMARY KEY,
            schema_json TEXT NOT NULL,
            total_epsilon BIGINT NOT NULL CHECK (total_epsilon >= 0),
            total_delta BIGINT NOT NULL CHECK (total_delta >= 0),
            spent_epsilon BIGINT NOT NULL DEFAULT 0,
            spent_delta BIGINT NOT NULL DEFAULT 0,
            created DOUBLE PRECISION NOT NULL,
            CHECK (spent_epsilon <= total_epsilon AND spent_delta <= total_delta)
        )""",
        """CREATE TABLE budgets (
            analyst TEXT NOT NULL REFERENCES principals(id),
            dataset TEXT NOT NULL REFERENCES datasets(name),
            epsilon BIGINT NOT NULL CHECK (epsilon >= 0),
            delta BIGINT NOT NULL CHECK (delta >= 0),
            spent_epsilon BIGINT NOT NULL DEFAULT 0,
            spent_delta BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (analyst, dataset),
            CHECK (spent_epsilon <= epsilon AND spent_delta <= delta)
        )""",
        """CREATE TABLE charges (
            id TEXT PRIMARY KEY,
            analyst TEXT NOT NULL REFERENCES principals(id),
            dataset TEXT NOT NULL REFERENCES datasets(name),
            idem_key TEXT,
            request_json TEXT NOT NULL,
            epsilon BIGINT NOT NULL,
            delta BIGINT NOT NULL,
            status TEXT NOT NULL
                CHECK (status IN ('reserved', 'released', 'failed', 'refunded')),
            result_json TEXT,
            created DOUBLE PRECISION NOT NULL,
            finished DOUBLE PRECISION,
            UNIQUE (analyst, idem_key),
            CHECK (status <> 'released' OR result_json IS NOT NULL)
        )""",
        "CREATE INDEX charges_by_analyst ON charges (analyst, created)",
        """CREATE TABLE audit (
            id {serial},
            ts DOUBLE PRECISION NOT NULL,
            principal TEXT,
            kind TEXT NOT NULL,
            method TEXT,
            path TEXT,
            dataset TEXT,
            query TEXT,
            epsilon BIGINT,
            delta BIGINT,
            status INTEGER,
            outcome TEXT
        )""",
        "CREATE INDEX audit_by_time ON audit (ts)",
    ),
    # 2: a dataset's version, raised by every (re-)registration, so that each worker process of
    # a service can tell a replaced dataset from the one it loaded (and never answer from it).
    ("ALTER TABLE datasets ADD COLUMN version BIGINT NOT NULL DEFAULT 1",),
)
