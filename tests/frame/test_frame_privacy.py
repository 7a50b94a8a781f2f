"""Privacy of grouped releases: audits on tables that differ in all rows of one unit.

Each audit computes the exact bounded totals of both neighbouring tables through the real
pipeline (with one fixed hash key: the guarantee holds for every key), then runs the real
release code (:func:`dpkit.frame._finish.finish`) on many stacked copies, each copy a separate
key with its own noise, so that thousands of releases cost one call.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
import dpkit.frame._calibrate as cal
import dpkit.frame._grouped as grouped_mod
from dpkit.audit import epsilon_lower_bound
from dpkit.frame._finish import finish, public_totals
from dpkit.frame._pipeline import ALL
from dpkit.random import as_generator

NOT_RELEASED = -1e9
TRIALS = 30_000


def _exact(g: dpf.GroupedQuery, plan: Any) -> tuple[Any, Any]:
    totals, buckets = g._exact(plan, (11, 12, 13, 14))
    keys = list(g._layout().keys)
    if g._public is not None:
        totals, buckets = public_totals(totals, buckets, g._public, keys)
    return totals, buckets


def _mechanism(g0: dpf.GroupedQuery, column: str, key: object, **kw: Any) -> Any:
    plan = g0.explain(**kw).plan
    keys = list(g0._layout().keys)

    def mech(d: tuple[Any, Any], n: int, rng: Any) -> np.ndarray[Any, Any]:
        totals, buckets = d
        trials = pl.DataFrame({"trial": np.arange(n)})
        t = totals.filter(pl.col(keys[0]) == key).join(trials, how="cross")
        b = None if buckets is None else buckets.join(trials, how="cross")
        f = finish(
            t, b, keys=["trial", *keys], aggs=g0._aggs, plan=plan, gen=as_generator(rng),
            alpha=0.05, drop_keys=(ALL,),
        )  # fmt: skip
        out = np.full(n, NOT_RELEASED)
        out[f["trial"].to_numpy()] = f[column].to_numpy()
        return out

    return mech, plan


def _pair(
    base: pl.DataFrame, extra: pl.DataFrame, build: Any, **kw: Any
) -> tuple[Any, tuple[Any, Any], tuple[Any, Any]]:
    g0 = build(base)
    g1 = build(pl.concat([base, extra]))
    plan = g0.explain(**kw).plan
    return g0, _exact(g0, plan), _exact(g1, plan)


def _base(n_units: int = 20, key: str = "a", x: float = 10.0) -> pl.DataFrame:
    return pl.DataFrame({"user": list(range(n_units)), "key": [key] * n_units, "x": [x] * n_units})


def _unit(rows: int, key: str = "a", x: float = 100.0, user: int = 999) -> pl.DataFrame:
    return pl.DataFrame({"user": [user] * rows, "key": [key] * rows, "x": [x] * rows})


def _audit(g0: Any, d0: Any, d1: Any, column: str, key: object, seed: int, **kw: Any) -> float:
    mech, _ = _mechanism(g0, column, key, **kw)
    r = epsilon_lower_bound(mech, d0, d1, trials=TRIALS, rng=seed, delta=kw.get("delta", 0.0))
    return float(r.epsilon)


def _count_query(df: pl.DataFrame) -> dpf.GroupedQuery:
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=["a"], max_rows=3, max_groups=1
    )
    return q.agg(dpf.count())


def _broken_caps(self: Any, measure: Any) -> tuple[int, int, int]:
    """A deliberately broken bound: one row per unit, whatever L∞ and L0 say."""
    return 1, measure.levels if measure.kind != "units" else 1, 1


def test_audit_count(monkeypatch: pytest.MonkeyPatch) -> None:
    # the extra unit has 5 rows; L∞ = 3 of them survive, so the count moves by 3
    g0, d0, d1 = _pair(_base(), _unit(5), _count_query, epsilon=1.0)
    eps = _audit(g0, d0, d1, "count", "a", 1, epsilon=1.0)
    assert 0.3 < eps <= 1.0
    monkeypatch.setattr(cal.Bounding, "caps", _broken_caps)
    g0, d0, d1 = _pair(_base(), _unit(5), _count_query, epsilon=1.0)
    assert _audit(g0, d0, d1, "count", "a", 2, epsilon=1.0) > 1.0


def _sum_query(df: pl.DataFrame) -> dpf.GroupedQuery:
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=["a"], max_rows=2, max_groups=1
    )
    return q.agg(dpf.sum("x", bounds=(0, 100)))


def test_audit_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    g0, d0, d1 = _pair(_base(), _unit(4, x=500.0), _sum_query, epsilon=1.0)
    eps = _audit(g0, d0, d1, "sum_x", "a", 3, epsilon=1.0)
    assert 0.3 < eps <= 1.0
    monkeypatch.setattr(cal.Bounding, "caps", _broken_caps)
    g0, d0, d1 = _pair(_base(), _unit(4, x=500.0), _sum_query, epsilon=1.0)
    assert _audit(g0, d0, d1, "sum_x", "a", 4, epsilon=1.0) > 1.0


def test_audit_mean_gaussian() -> None:
    def build(df: pl.DataFrame) -> dpf.GroupedQuery:
        q = dpf.Query(df, privacy_unit="user").group_by(
            "key", public_keys=["a"], max_rows=2, max_groups=1
        )
        return q.agg(dpf.mean("x", bounds=(0, 100)))

    kw = {"epsilon": 1.0, "delta": 1e-5}
    g0, d0, d1 = _pair(_base(5, x=0.0), _unit(3), build, **kw)
    assert _audit(g0, d0, d1, "mean_x", "a", 5, **kw) <= 1.0


def test_audit_quantile() -> None:
    def build(df: pl.DataFrame) -> dpf.GroupedQuery:
        q = dpf.Query(df, privacy_unit="user").group_by(
            "key", public_keys=["a"], max_rows=2, max_groups=1
        )
        return q.agg(dpf.quantiles("x", 0.5, bounds=(0, 16), branching=4, levels=2))

    base = pl.DataFrame({"user": range(6), "key": ["a"] * 6, "x": [7.5, 7.5, 7.5, 8.5, 8.5, 8.5]})
    g0, d0, d1 = _pair(base, _unit(4, x=15.5), build, epsilon=2.0)
    assert _audit(g0, d0, d1, "q_x_0.5", "a", 6, epsilon=2.0) <= 2.0


def _selection_query(df: pl.DataFrame) -> dpf.GroupedQuery:
    return (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", max_groups=1, max_rows=1)
        .agg(dpf.count())
    )


def test_audit_key_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key held by 1 unit vs 2: released with p(1) = δ vs p(2) = (1 + e)δ (ε/2 = 1 for
    selection, all of δ: the count's noise is pure Laplace with one key per unit)."""
    kw = {"epsilon": 2.0, "delta": 1e-2}
    g0, d0, d1 = _pair(_base(1), _unit(1), _selection_query, **kw)
    eps = _audit(g0, d0, d1, "count", "a", 7, **kw)
    assert 0.3 < eps <= 2.0
    real = grouped_mod.key_selection

    def broken(method: str, **k: Any) -> Any:
        claimed = k["epsilon"]
        k["epsilon"] *= 4.0  # calibrated to 4ε while claiming ε
        return dataclasses.replace(real(method, **k), epsilon=claimed)

    monkeypatch.setattr(grouped_mod, "key_selection", broken)
    g0, d0, d1 = _pair(_base(1), _unit(1), _selection_query, **kw)
    assert _audit(g0, d0, d1, "count", "a", 8, **kw) > 2.0


def test_weighted_gaussian_is_calibrated_to_l2_one() -> None:
    """Gopi et al. 2020: weights 1/√t make the ℓ2 sensitivity 1 for any L0. PipelineDP's σ at
    ε = 1, δ = 1e-5, L0 = 4 is 7.74 (√4 applied twice); the analytic Gaussian needs 3.88 for
    (ε, δ/2); dpkit's exact discrete Gaussian, certified through zCDP, needs 4.20."""
    from dpkit.frame._selection import WEIGHT_BITS, key_selection

    sigmas = []
    for k in (1, 4, 16):
        s = key_selection("gaussian", epsilon=1.0, delta=1e-5, max_groups=k, replace=False)
        sigmas.append(float(s.scale) / 2**WEIGHT_BITS)
    assert sigmas[0] == sigmas[1] == sigmas[2]
    assert 3.88 < sigmas[0] < 4.3  # never below the analytic value, far below 7.74


def test_truncated_geometric_published_form() -> None:
    """Desfontaines et al. 2022: p(1) = δ, p grows by e^ε + δ until the symmetric branch."""
    eps, delta = 1.0, 1e-5
    p = dpf.truncated_geometric_probabilities(eps, delta)
    assert p[1] == delta
    assert p[2] == pytest.approx(math.e * delta + delta, rel=1e-12)
    for n in range(1, p.size):  # (ε, δ)-DP in both directions for n-1 vs n
        assert p[n] <= math.exp(eps) * p[n - 1] + delta + 1e-15  # float rounding only
        assert 1 - p[n - 1] <= math.exp(eps) * (1 - p[n]) + delta + 1e-15
    assert p[-1] == 1.0 and p[-2] < 1.0
