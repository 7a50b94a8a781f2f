"""The curator service: datasets behind an HTTP API, per-analyst budgets in a crash-safe ledger.

The curator model (Dwork, McSherry, Nissim & Smith 2006), in Wasserman's lecture notes: "some
curator keeps the data and users send queries about the data". The service keeps cleaned datasets
with public schemas, authenticates admins and analysts by hashed API keys, prices each query from
the request alone, charges it in one durable ledger transaction (SQLite or PostgreSQL) before
computing it with :mod:`dpkit.stats` (or, through the same registry, :mod:`dpkit.frame` group-by
queries, :mod:`dpkit.release` synthetic data, and free aggregation of :mod:`dpkit.local` reports),
and stores the answer with its charge. Start it with ``dpkit serve --config curator.toml``; query it
with :class:`dpkit.client.Curator`. See ``docs/server.md`` (deployment, configuration, threat
model).

Needs the ``server`` extra: ``pip install 'dpkit[server]'``.
"""

from __future__ import annotations

from dpkit.server._app import create_app
from dpkit.server._auth import hash_key, new_key
from dpkit.server._config import ServerConfig, load_config
from dpkit.server._default import default_registry
from dpkit.server._ledger import Charge, Ledger, NoBudgetError
from dpkit.server._queries import stats_registry
from dpkit.server._registry import Answer, Meter, Prepared, QueryRegistry
from dpkit.server._schema import Column, DatasetSchema, Table

__all__ = [
    "Answer",
    "Charge",
    "Column",
    "DatasetSchema",
    "Ledger",
    "Meter",
    "NoBudgetError",
    "Prepared",
    "QueryRegistry",
    "ServerConfig",
    "Table",
    "create_app",
    "default_registry",
    "hash_key",
    "load_config",
    "new_key",
    "stats_registry",
]
