"""Empirical audits (dpkit.audit) of answers as the service computes them: through the registry
entry, its price and its meter accountant, on neighbouring tables (one row removed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.audit import epsilon_lower_bound
from dpkit.server import DatasetSchema, stats_registry
from dpkit.server._registry import Meter
from dpkit.server._schema import Table, dummy_table

SCHEMA = DatasetSchema.from_dict(
    {"name": "t", "columns": [{"name": "x", "type": "float", "bounds": [0, 1]}]}
)
EPS = 1.0
TRIALS = 1500  # per table; Clopper–Pearson at confidence 0.95 (the audit's default)


def _pair() -> tuple[Table, Table]:
    x = np.ones(50)
    return Table(SCHEMA, {"x": x}), Table(SCHEMA, {"x": x[:-1]})


def _served(query: str, run_at: float) -> Any:
    """The answer as the service computes it at ``run_at``; claimed at EPS, ``run_at`` > EPS is
    a broken entry (one that charges EPS and releases with less noise)."""
    reg = stats_registry()
    params = {"epsilon": run_at} if query == "count" else {"epsilon": run_at, "column": "x"}
    prepared = reg.prepare(query, params, SCHEMA, dummy_table(SCHEMA, 100))

    def mechanism(table: Table, rng: Any) -> float:
        return float(prepared.compute(table, rng, Meter(run_at, 0.0)).value)

    return mechanism


def test_served_count_and_sum_do_not_leak_more_than_their_price() -> None:
    d0, d1 = _pair()
    for query in ("count", "sum"):
        res = epsilon_lower_bound(_served(query, EPS), d0, d1, trials=TRIALS, rng=1)
        assert res.epsilon <= EPS, (query, res)


def test_a_broken_entry_is_caught() -> None:
    """Negative control: an entry that charges ε but releases with 4ε noise is refuted."""
    d0, d1 = _pair()
    res = epsilon_lower_bound(_served("count", 4 * EPS), d0, d1, trials=TRIALS, rng=2)
    assert res.epsilon > EPS, res
