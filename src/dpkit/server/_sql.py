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
# answer not stored yet), 'released' (answer stored), 'failed' (charged, noise may have been
# drawn, no answer), 'refunded' (failed before any noise), 'lost' (migration 3: reserved when
# the service stopped, found so at the next start; it stays charged and has no answer).
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
    # 3: a charge whose answer was lost in a crash is marked 'lost' when the service starts
    # again, and each charge names the process answering it (:mod:`._recovery`; a CHECK
    # constraint is changed by rebuilding the table, the one way SQLite has); dashboard links
    # and sessions kept in the ledger, where every worker process sees them and a new key ends
    # them (:mod:`._sessions`); counters of the requests that are not written one row each
    # (:mod:`._audit_limits`).
    (
        """CREATE TABLE charges_v3 (
            id TEXT PRIMARY KEY,
            analyst TEXT NOT NULL REFERENCES principals(id),
            dataset TEXT NOT NULL REFERENCES datasets(name),
            idem_key TEXT,
            request_json TEXT NOT NULL,
            epsilon BIGINT NOT NULL,
            delta BIGINT NOT NULL,
            status TEXT NOT NULL
                CHECK (status IN ('reserved', 'released', 'failed', 'refunded', 'lost')),
            result_json TEXT,
            created DOUBLE PRECISION NOT NULL,
            finished DOUBLE PRECISION,
            owner TEXT,
            UNIQUE (analyst, idem_key),
            CHECK (status <> 'released' OR result_json IS NOT NULL)
        )""",
        "INSERT INTO charges_v3 (id, analyst, dataset, idem_key, request_json, epsilon, delta, "
        "status, result_json, created, finished) SELECT id, analyst, dataset, idem_key, "
        "request_json, epsilon, delta, status, result_json, created, finished FROM charges",
        "DROP TABLE charges",
        "ALTER TABLE charges_v3 RENAME TO charges",
        "CREATE INDEX charges_by_analyst ON charges (analyst, created)",
        "CREATE INDEX charges_by_status ON charges (status)",
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('link', 'session')),
            principal TEXT NOT NULL REFERENCES principals(id),
            key_hash TEXT NOT NULL,
            expires DOUBLE PRECISION NOT NULL
        )""",
        """CREATE TABLE request_counts (
            bucket BIGINT NOT NULL,
            status INTEGER NOT NULL,
            count BIGINT NOT NULL,
            PRIMARY KEY (bucket, status)
        )""",
    ),
    # 4: budgets and dataset totals declared in zero-concentrated DP (Bun & Steinke 2016): a
    # row whose ρ column is NULL is an (ε, δ) budget as before; one with a ρ is a ρ budget (its
    # ε and δ stay 0), whose spent ρ adds up exactly (zCDP composes by adding ρ). Each charge
    # keeps its ρ price (NULL: an (ε, δ > 0) request, which no ρ budget pays) beside its (ε, δ)
    # price (0 for a ρ request without δ, which no (ε, δ) budget pays). Existing rows become (ε,
    # δ) budgets with nothing spent in ρ: an old ledger keeps working unchanged.
    (
        "ALTER TABLE datasets ADD COLUMN total_rho BIGINT CHECK (total_rho >= 0)",
        "ALTER TABLE datasets ADD COLUMN spent_rho BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE budgets ADD COLUMN rho BIGINT CHECK (rho >= 0)",
        "ALTER TABLE budgets ADD COLUMN spent_rho BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE charges ADD COLUMN rho BIGINT",
        "ALTER TABLE audit ADD COLUMN rho BIGINT",
    ),
)
