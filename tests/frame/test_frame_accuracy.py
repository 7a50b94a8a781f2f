"""Frame accuracy before release: per-cell half-widths and key-keeping probabilities.

Coverage: 2000 noisy cells (10 public keys × 200 trials, noised by the release's own ``finish``)
at alpha = 0.1 must lie within ±4 binomial sd (√(0.09/2000) ≈ 0.0067) of [0.9, 0.93] (the
half-width is the smallest integer quantile of the noise). Keeping: the empirical release rate of
keys held by 1…8 units in 4000 selections against ``keep_probability``, Pearson's chi-square with
p-value above 1e-4 (a false failure about once in 10 000 seeds; the seed is fixed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

import dpkit.frame as dpf
from dpkit.errors import PrivacyParameterError
from dpkit.frame._finish import finish
from dpkit.frame._pipeline import ALL
from dpkit.random import as_generator, seeded

ALPHA = 0.1
TRIALS = 200
KEYS = 10


def _noisy(g: Any, plan: Any, keys: list[str], trials: int, seed: int) -> pl.DataFrame:
    totals, _ = g._exact(plan, (1, 2, 3, 4))
    totals = totals.filter(pl.col("key").is_in(keys))
    stacked = totals.join(pl.DataFrame({"trial": np.arange(trials)}), how="cross")
    return finish(
        stacked, None, keys=["trial", "key"], aggs=g._aggs, plan=plan,
        gen=as_generator(seed), alpha=ALPHA, drop_keys=(ALL,),
    )  # fmt: skip


def _table() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    n = 3000
    return pl.DataFrame(
        {
            "user": np.arange(n),
            "key": [f"k{i}" for i in rng.integers(0, KEYS, n)],
            "x": rng.uniform(0, 10, n),
        }
    )


@pytest.mark.parametrize("kw", [{"epsilon": 1.0}, {"epsilon": 1.0, "delta": 1e-6}])
def test_cell_accuracy_is_the_released_interval_and_covers(kw: dict[str, Any]) -> None:
    df = _table()
    keys = [f"k{i}" for i in range(KEYS)]
    g = (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", public_keys=keys, max_groups=1, max_rows=1)
        .agg(dpf.count(alias="n"), dpf.sum("x", bounds=(0, 10), alias="s"))
    )
    e = g.explain(**kw)
    acc = e.accuracy(ALPHA)
    assert set(acc) == {"n", "s"}
    out = _noisy(g, e.plan, keys, TRIALS, 7)
    exact = df.group_by("key").agg(pl.len().alias("n0"), pl.col("x").sum().alias("s0"))
    out = out.join(exact, on="key")
    band = 4 * math.sqrt(ALPHA * (1 - ALPHA) / out.height)
    for name, truth in (("n", "n0"), ("s", "s0")):
        assert np.allclose(out[f"{name}_hi"] - out[name], acc[name])
        cov = float(((out[name] - out[truth]).abs() <= acc[name]).mean())
        assert 1 - ALPHA - band <= cov <= 1 - ALPHA + 0.03 + band


def test_explain_shows_accuracy_per_cell_and_mean_at_a_stated_scale() -> None:
    g = (
        dpf.Query(_table(), privacy_unit="user")
        .group_by("key", public_keys=["k0"], max_groups=1, max_rows=1)
        .agg(dpf.mean("x", bounds=(0, 10), alias="m"), dpf.histogram("x", bins=[0, 5, 10]))
    )
    e = g.explain(epsilon=1.0)
    assert set(e.accuracy()) == {"hist_x_0", "hist_x_1"}
    wide = e.accuracy(expected_n=100)["m"]
    narrow = e.accuracy(expected_n=10_000)["m"]
    assert 0 < narrow < wide <= 5.0
    assert "Accuracy (95%" in str(e) and "hist_x_0: +/-" in str(e)
    assert e.keep_probability(1) == 1.0  # public keys are always released


def _selection_rates(method: str | None, groups: int, seed: int) -> tuple[Any, Any]:
    users, keys = [], []
    uid = 0
    for n in range(1, 9):  # key k{n} held by n units, each unit in `groups` keys
        for _ in range(n):
            for j in range(groups):
                users.append(uid)
                keys.append(f"k{n}" if j == 0 else f"pad{uid}_{j}")
            uid += 1
    df = pl.DataFrame({"user": users, "key": keys})
    g = (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", max_groups=groups, max_rows=1)
        .agg(dpf.count())
    )
    e = g.explain(epsilon=3.0, delta=1e-2, selection=method)
    trials = 4000
    out = _noisy(g, e.plan, [f"k{n}" for n in range(1, 9)], trials, seed)
    counts = np.zeros(8)
    for k, c in out.group_by("key").len().iter_rows():
        counts[int(k[1:]) - 1] = c
    p = np.array([e.keep_probability(n, keys_per_unit=groups) for n in range(1, 9)])
    return counts / trials, p


@pytest.mark.parametrize(("method", "groups"), [(None, 1), ("laplace", 2), ("gaussian", 2)])
def test_keep_probability_matches_the_release_rate(method: str | None, groups: int) -> None:
    rate, p = _selection_rates(method, groups, 5)
    trials = 4000
    inside = (p > 1e-9) & (p < 1 - 1e-9)
    assert inside.sum() >= 3  # the test has power: several keys are kept only sometimes
    e = trials * p[inside]
    x2 = float(np.sum((rate[inside] * trials - e) ** 2 / (e * (1 - p[inside]))))
    assert stats.chi2.sf(x2, int(inside.sum())) > 1e-4


def test_keep_probability_rises_with_units_and_explain_names_the_thresholds() -> None:
    df = pl.DataFrame({"user": [1, 2], "key": ["a", "b"]})
    g = (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", max_groups=3, max_rows=1)
        .agg(dpf.count())
    )
    e = g.explain(epsilon=1.0, delta=1e-6)
    ps = [e.keep_probability(c, keys_per_unit=3) for c in (0, 1, 50, 200, 10_000)]
    assert ps[0] == 0.0 and ps[1] <= 1e-6 / 2 and ps == sorted(ps) and ps[-1] > 0.999
    assert ">= 50% from" in str(e)
    with pytest.raises(PrivacyParameterError):
        e.accuracy(alpha=2.0)


def test_rho_query_is_paid_in_rho_and_covers() -> None:
    from dpkit import plan
    from dpkit.accounting import ZCDP, Accountant

    df = _table()
    keys = [f"k{i}" for i in range(KEYS)]
    g = (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", public_keys=keys, max_groups=1, max_rows=1)
        .agg(dpf.count(alias="n"), dpf.sum("x", bounds=(0, 10), alias="s"))
    )
    acct = Accountant(ZCDP(rho=0.5))
    r = g.release(rho=0.25, accountant=acct)
    g.release(rho=0.25, accountant=acct)
    assert 0.5 - 1e-6 < acct.spent.rho <= 0.5  # type: ignore[attr-defined]
    e = r.explanation
    assert "Total cost: rho=0.25" in str(e)
    acc = e.accuracy(ALPHA)
    out = _noisy(g, e.plan, keys, TRIALS, 9)
    exact = df.group_by("key").agg(pl.len().alias("n0"))
    out = out.join(exact, on="key")
    band = 4 * math.sqrt(ALPHA * (1 - ALPHA) / out.height)
    cov = float(((out["n"] - out["n0"]).abs() <= acc["n"]).mean())
    assert 1 - ALPHA - band <= cov <= 1 - ALPHA + 0.03 + band
    rho = plan.rho_for_query(g, half_width={"n": 10.0})
    assert g.explain(rho=rho).accuracy()["n"] <= 10.0 < g.explain(rho=rho * 0.999).accuracy()["n"]


def test_rho_query_refusals() -> None:
    df = _table()
    q = dpf.Query(df, privacy_unit="user")
    private = q.group_by("key", max_groups=1, max_rows=1).agg(dpf.count())
    with pytest.raises(PrivacyParameterError, match="public keys"):
        private.explain(rho=0.1)
    public = q.group_by("key", public_keys=["k0"], max_groups=1, max_rows=1).agg(dpf.count())
    for kw in ({"rho": 0.1, "epsilon": 1.0}, {"rho": 0.1, "noise": "laplace"}, {"rho": -1.0}):
        with pytest.raises(PrivacyParameterError):
            public.explain(**kw)


def test_mean_accuracy_at_the_stated_scale_is_the_released_interval() -> None:
    df = _table()  # x uniform on [0, 10]: the centred sum of each key is near 0
    keys = [f"k{i}" for i in range(KEYS)]
    g = (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", public_keys=keys, max_groups=1, max_rows=1)
        .agg(dpf.mean("x", bounds=(0, 10), alias="m"))
    )
    r = g.release(epsilon=2.0, rng=seeded(2))
    sizes = dict(df.group_by("key").len().iter_rows())
    for row in r.frame.iter_rows(named=True):
        h = r.explanation.accuracy(expected_n=sizes[row["key"]])["m"]
        assert math.isclose((row["m_hi"] - row["m_lo"]) / 2, h, rel_tol=0.15)
