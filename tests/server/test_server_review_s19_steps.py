"""Review of the service's sum and mean through steps made once per prepared query: each answer
is the library's release bit for bit, its meter is charged once, and a wrong price is refused
before any noise is drawn."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest

from dpkit.errors import BudgetExceededError
from dpkit.random import seeded
from dpkit.server._queries import stats_registry
from dpkit.server._registry import Meter, QueryRegistry
from dpkit.server._schema import DatasetSchema, Table, dummy_table
from dpkit.stats._aggregate import clamped_sum, release_mean, release_sum


def _bits(x: float) -> str:
    return struct.pack("<d", float(x)).hex()


_REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("mean", {"column": "x", "epsilon": 1.0}),
    ("mean", {"column": "x", "epsilon": 0.5, "bounds": [-0.0, 2]}),
    ("mean", {"column": "x", "epsilon": 0.5, "bounds": [0.0, 2]}),
    ("mean", {"column": "y", "epsilon": 0.5, "delta": 1e-6}),
    ("sum", {"column": "x", "epsilon": 1.0}),
    ("sum", {"column": "y", "epsilon": 0.3, "bounds": [-1, 1], "delta": 1e-7}),
]


@pytest.fixture
def env() -> tuple[QueryRegistry, DatasetSchema, Table, Table]:
    schema = DatasetSchema.from_dict(
        {
            "name": "t",
            "columns": [{"name": "x", "bounds": [0, 1]}, {"name": "y", "bounds": [-5, 5]}],
        }
    )
    gen = np.random.default_rng(3)
    real = Table(schema, {"x": gen.uniform(-0.5, 1.5, 40), "y": gen.normal(0, 3, 40)})
    return stats_registry(), schema, dummy_table(schema, 50), real


def test_answers_are_the_library_s_and_each_meter_is_charged_once(env: Any) -> None:
    reg, schema, dummy, real = env
    for _round in range(2):  # the second round uses the remembered prepared queries
        for name, params in _REQUESTS:
            p = reg.prepare(name, params, schema, dummy)
            col = params["column"]
            bounds = tuple(float(v) for v in params.get("bounds", schema.column(col).bounds))
            release = release_mean if name == "mean" else release_sum
            for seed in range(3):
                meter = Meter(p.epsilon, p.delta)
                answer = p.compute(real, seeded(seed), meter)
                agg = clamped_sum(real.columns[col], bounds)
                ref = release(agg, epsilon=p.epsilon, delta=p.delta, rng=seeded(seed))
                assert meter.charged and len(meter.ledger) == 1
                assert _bits(answer.value) == _bits(ref.value), (name, params, seed)
                assert [_bits(v) for v in answer.ci] == [_bits(v) for v in ref.ci(0.05)]


def test_a_wrong_price_is_refused_before_any_noise(env: Any) -> None:
    reg, schema, dummy, real = env
    for name, params in _REQUESTS:
        p = reg.prepare(name, params, schema, dummy)
        gen = seeded(0)
        with pytest.raises(BudgetExceededError):
            p.compute(real, gen, Meter(p.epsilon / 2, p.delta))
        assert gen.integers(2**63) == seeded(0).integers(2**63)  # nothing was drawn
