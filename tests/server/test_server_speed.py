"""The service's speed-ups keep every guarantee: pooled exact noise (each sample once, re-keyed
and emptied after fork, audited), memoised exact sums (computed once per table and bounds, never
across tables), remembered prices (an identical request is not probed twice), grouped writes."""

from __future__ import annotations

import math
import os
import threading
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from randomgen import AESCounter

import dpkit.stats as st
import dpkit.stats._aggregate as agg_mod
from dpkit.accounting import Accountant, PureDP, PureDPEvent
from dpkit.audit import epsilon_lower_bound
from dpkit.noise import NoisePool, discrete_gaussian, discrete_laplace
from dpkit.noise._discrete import sample_discrete_gaussian, sample_discrete_laplace
from dpkit.random import is_secure
from dpkit.server import DatasetSchema, stats_registry
from dpkit.server._group import GroupCommit
from dpkit.server._queries import clamped
from dpkit.server._registry import Answer, Meter, Prepared, QueryRegistry
from dpkit.server._schema import Table, dummy_table

SCHEMA = DatasetSchema.from_dict(
    {"name": "t", "columns": [{"name": "x", "type": "float", "bounds": [0, 1]}]}
)


def _pool(seed: int, batch: int = 64) -> NoisePool:
    return NoisePool(AESCounter(seed=seed), batch=batch)


# -- pooled noise ----------------------------------------------------------------------------------
def test_pooled_draws_are_the_exact_samplers_batches_in_order_each_once() -> None:
    pool = _pool(3)
    got = [discrete_laplace(Fraction(7, 2), rng=pool) for _ in range(128)]
    ref = np.random.Generator(AESCounter(seed=3))
    want = np.concatenate([sample_discrete_laplace(7, 2, 64, ref) for _ in range(2)])
    assert got == [int(v) for v in want]
    pool = _pool(4)
    got = [discrete_gaussian(Fraction(5, 1), rng=pool) for _ in range(64)]
    ref = np.random.Generator(AESCounter(seed=4))
    assert got == [int(v) for v in sample_discrete_gaussian(5, 1, 64, ref)]


def test_used_samples_are_erased_and_scales_are_kept_apart() -> None:
    pool = _pool(5)
    a = discrete_laplace(3, rng=pool)
    b = discrete_laplace(1000, rng=pool)
    (values, position), *_ = pool._stash.values()
    assert position[0] == 1 and values[0] == 0  # the sample handed out is not kept
    assert len(pool._stash) == 2 and isinstance(a, int) and isinstance(b, int)
    arr = discrete_laplace(3, size=10, rng=pool)  # explicit sizes bypass the pool
    assert arr.shape == (10,) and pool._stash[("laplace", 3, 1)][1][0] == 1


def test_pooled_noise_has_the_discrete_laplace_variance() -> None:
    pool = _pool(6, batch=512)
    x = np.array([discrete_laplace(3, rng=pool) for _ in range(20_000)], dtype=float)
    p = np.exp(-1 / 3)
    var = 2 * p / (1 - p) ** 2
    # standard error of the sample variance ≈ var·sqrt((kurtosis − 1)/n), kurtosis ≈ 6: 5 SE
    assert abs(x.var() - var) < 5 * var * np.sqrt(5 / x.size)
    assert abs(x.mean()) < 5 * np.sqrt(var / x.size)


def test_a_secure_pool_is_secure_and_charges_without_warning() -> None:
    pool = NoisePool()
    assert is_secure(pool) and not is_secure(_pool(1))
    acct = Accountant(PureDP(epsilon=1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = st.mean(np.linspace(0, 1, 100), bounds=(0, 1), epsilon=0.5, accountant=acct, rng=pool)
    assert 0 <= r.value <= 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_starts_with_an_empty_pool_and_a_new_key() -> None:
    pool = NoisePool()
    discrete_laplace(3, rng=pool)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report whether it inherited spare noise
        os.write(w, b"%d" % len(pool._stash))
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 16) == b"0" and len(pool._stash) == 1
    os.close(r)


class _Repeating(NoisePool):
    """Broken on purpose: hands out the same sample again and again."""

    def take(self, key: Any, sample: Any) -> int:
        out = super().take(key, sample)
        self._stash[key][1][0] -= 1
        return out


@pytest.mark.parametrize(("pool_type", "leaks"), [(NoisePool, False), (_Repeating, True)])
def test_the_served_sum_with_pooled_noise_passes_the_audit(pool_type: Any, leaks: bool) -> None:
    """As the service runs it: one pool (per thread) serves every answer, d0's and d1's alike.
    A pool that re-used a sample would make the two tables' answers differ by a constant."""
    x = np.ones(50)
    d0, d1 = Table(SCHEMA, {"x": x}), Table(SCHEMA, {"x": x[:-1]})
    prepared = stats_registry().prepare(
        "sum", {"epsilon": 1.0, "column": "x"}, SCHEMA, dummy_table(SCHEMA, 100)
    )
    pool = pool_type(AESCounter(seed=11), batch=256)

    def mechanism(table: Table, rng: Any) -> float:
        return float(prepared.compute(table, pool, Meter(1.0, 0.0)).value)

    res = epsilon_lower_bound(mechanism, d0, d1, trials=1500, rng=1)
    assert (res.epsilon > 1.0) == leaks, res


# -- memoised exact sums and remembered prices ---------------------------------------------
def test_exact_sums_are_computed_once_per_table_and_bounds(monkeypatch: Any) -> None:
    calls = []
    real = agg_mod.fixed_sum

    def counting(*a: Any, **k: Any) -> int:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(agg_mod, "fixed_sum", counting)
    reg = stats_registry()
    dummy = dummy_table(SCHEMA, 100)
    t1 = Table(SCHEMA, {"x": np.full(10, 0.25)})
    t2 = Table(SCHEMA, {"x": np.full(1000, 0.75)})
    mean = reg.prepare("mean", {"epsilon": 50.0, "column": "x"}, SCHEMA, dummy)
    values = [mean.compute(t, None, Meter(50.0, 0.0)).value for t in (t1, t1, t2, t2)]
    assert len(calls) == 3  # dummy (probe), t1, t2: each once
    assert abs(values[0] - 0.25) < 0.1 and abs(values[2] - 0.75) < 0.05  # never mixed up
    assert values[0] != values[1]  # fresh noise every answer
    wide = reg.prepare("sum", {"epsilon": 1.0, "column": "x", "bounds": [-1, 2]}, SCHEMA, dummy)
    wide.compute(t1, None, Meter(1.0, 0.0))
    assert len(calls) == 5  # other bounds, other aggregate (probe + t1)
    # -0.0 == 0.0, but each sign keeps its own aggregate (an answer never shows another's sign)
    for lo in (0.0, -0.0):
        agg = clamped(t1, "x", (lo, 1.0))
        assert math.copysign(1.0, agg.bounds[0]) == math.copysign(1.0, lo)


def test_an_identical_request_is_probed_once_and_still_metered() -> None:
    probes: list[int] = []

    def entry(params: Any, schema: Any) -> Prepared:
        eps = float(params["epsilon"])

        def compute(t: Table, rng: Any, meter: Meter) -> Answer:
            probes.append(t.rows)
            meter.charge(PureDPEvent(epsilon=eps * params.get("overspend", 1)))
            return Answer(0.0)

        return Prepared("x", eps, 0.0, compute)

    reg = QueryRegistry()
    reg.register("x", entry)
    dummy = dummy_table(SCHEMA, 7)
    for _ in range(3):
        reg.prepare("x", {"epsilon": 0.5}, SCHEMA, dummy)
    assert probes == [7]
    reg.prepare("x", {"epsilon": 0.25}, SCHEMA, dummy)
    assert probes == [7, 7]
    p = reg.prepare("x", {"epsilon": 0.5}, SCHEMA, dummy_table(SCHEMA, 7))  # a new dummy table
    assert probes == [7, 7, 7]
    from dpkit.errors import BudgetExceededError, PrivacyParameterError

    with pytest.raises(PrivacyParameterError):  # an overspending entry is refused at the probe
        reg.prepare("x", {"epsilon": 0.5, "overspend": 2}, SCHEMA, dummy)
    with pytest.raises(BudgetExceededError):  # and the real run is metered whatever was cached
        p.compute(Table(SCHEMA, {"x": np.zeros(3)}), None, Meter(0.25, 0.0))


# -- grouped writes ------------------------------------------------------------------------------
class _Conn:
    def __init__(self) -> None:
        self.log: list[str] = []

    def execute(self, sql: str) -> None:
        self.log.append(sql)


def test_a_failed_write_in_a_batch_is_rolled_back_alone_and_batches_are_retried() -> None:
    conn = _Conn()
    attempts = []

    def flaky(c: Any) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("deadlock")
        return "ok"

    group = GroupCommit(
        threading.Lock(), lambda: conn, sqlite=False, retryable=lambda e: "deadlock" in str(e)
    )
    # A batch meeting a retryable failure (a deadlock) is rolled back and run again whole.
    assert group.run(flaky) == "ok"
    assert conn.log.count("BEGIN") == 2 and conn.log.count("ROLLBACK") == 1
    # A write's own error is its own: alone in its batch, the batch is rolled back (batches of
    # several writes are split: tests/server/test_server_group_commit.py).
    with pytest.raises(ValueError):
        group.run(lambda c: (_ for _ in ()).throw(ValueError("refused")))
    assert conn.log[-1] == "ROLLBACK" and not any("SAVEPOINT" in s for s in conn.log)
