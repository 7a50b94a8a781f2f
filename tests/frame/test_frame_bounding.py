"""Contribution bounding is exact, keyed by a hash (not data order), and stable per unit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpkit.frame as dpf

B = (0.0, 100.0)


def _table(seed: int = 0, units: int = 300, rows: int = 3000, keys: int = 12) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "user": g.integers(0, units, rows),
            "key": g.integers(0, keys, rows),
            "x": np.round(g.uniform(-20, 120, rows), 3),
        }
    )


def _totals(df: object, *, seed: int = 5, missing: str = "drop", **bounds: int) -> pl.DataFrame:
    bounds = {"max_groups": 1, "max_rows": 1} | bounds
    q = dpf.Query(df, privacy_unit="user", missing=missing).group_by("key", **bounds)
    out = q.agg(dpf.count(), dpf.count_units(), dpf.sum("x", bounds=B)).bounded_aggregates(
        seed=seed
    )
    assert isinstance(out, pl.DataFrame)
    return out


@pytest.mark.parametrize("l_inf", [1, 2, 5])
def test_rows_per_unit_and_key_are_min_n_linf(l_inf: int) -> None:
    df = _table()
    # L0 large enough to keep every key of every unit: only L∞ binds
    got = _totals(df, max_rows=l_inf, max_groups=100)
    per_pair = df.group_by("user", "key").len()
    want = (
        per_pair.with_columns(pl.col("len").clip(0, l_inf))
        .group_by("key")
        .agg(pl.col("len").sum().alias("rows"), pl.len().alias("units"))
        .sort("key")
    )
    assert got["__rows"].to_list() == want["rows"].to_list()
    assert got["__units"].to_list() == want["units"].to_list()


@pytest.mark.parametrize("l0", [1, 2, 4])
def test_keys_per_unit_are_min_g_l0(l0: int) -> None:
    df = _table(1)
    got = _totals(df, max_rows=1000, max_groups=l0)
    g = df.group_by("user").agg(pl.col("key").n_unique().alias("g"))
    assert int(got["__units"].sum()) == int(g["g"].clip(0, l0).sum())
    # every (unit, key) kept whole: rows add up to the kept pairs' full row counts
    assert int(got["__rows"].sum()) <= df.height


def test_rows_per_unit_l1() -> None:
    df = _table(2)
    l1 = 3
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", max_rows=2, max_groups=3, max_rows_per_unit=l1
    )
    got = q.agg(dpf.count()).bounded_aggregates(seed=1)
    assert isinstance(got, pl.DataFrame)
    # each unit keeps min(L1, Σ over its ≤ 3 kept keys of min(n, 2)) rows
    pairs = df.group_by("user", "key").len().with_columns(pl.col("len").clip(0, 2))
    per_unit_max = pairs.group_by("user").agg(pl.col("len").sort(descending=True).head(3).sum())
    per_unit_min = pairs.group_by("user").agg(pl.col("len").sort().head(3).sum())
    total = int(got["__rows"].sum())
    assert int(per_unit_min["len"].clip(0, l1).sum()) <= total
    assert total <= int(per_unit_max["len"].clip(0, l1).sum())
    assert total <= l1 * df["user"].n_unique()


def test_selection_is_not_data_order() -> None:
    df = _table(3)
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=9)
    reversed_ = df.reverse()
    a = _totals(df, max_rows=1, max_groups=2)
    assert a.equals(_totals(shuffled, max_rows=1, max_groups=2))
    assert a.equals(_totals(reversed_, max_rows=1, max_groups=2))
    # the secret key decides: another key keeps other rows
    assert not a.equals(_totals(df, seed=6, max_rows=1, max_groups=2))


def test_stability_one_unit_changes_only_its_own_contribution() -> None:
    """Totals with and without one unit differ by exactly that unit's bounded contribution."""
    df = _table(4)
    for u in (0, 17, 123):
        alone = df.filter(pl.col("user") == u)
        rest = df.filter(pl.col("user") != u)
        full = _totals(df, max_rows=2, max_groups=2)
        without = _totals(rest, max_rows=2, max_groups=2)
        own = _totals(alone, max_rows=2, max_groups=2)
        merged = (
            pl.concat([without, own])
            .group_by("key")
            .agg(pl.all().sum())
            .sort("key")
            .select(full.columns)
        )
        assert merged.equals(full)
        assert own["__units"].sum() <= 2 and own["__rows"].sum() <= 4


def test_values_clamped_fixed_point_sum_is_exact() -> None:
    df = pl.DataFrame({"user": [1, 2, 3, 4], "key": [0, 0, 0, 0], "x": [-50.0, 10.5, 99.0, 500.0]})
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=[0], max_groups=1, max_rows=1
    )
    g = q.agg(dpf.sum("x", bounds=B))
    plan = g.explain(epsilon=1.0).plan
    k = plan.measures[0].exponent
    got = g.bounded_aggregates()
    assert isinstance(got, pl.DataFrame)
    col = plan.measures[0].measure.name
    want = sum(int(np.floor(min(max(v, 0.0), 100.0) * 2.0**k)) for v in df["x"])
    assert int(got[col][0]) == want


def test_pandas_input_is_converted() -> None:
    df = _table(5)
    pdf = pd.DataFrame(df.to_dict(as_series=False))
    assert _totals(pdf, max_rows=1, max_groups=2).equals(_totals(df, max_rows=1, max_groups=2))


def test_each_row_its_own_unit() -> None:
    df = _table(6).drop("user")
    q = dpf.Query(df, privacy_unit=None).group_by("key", max_groups=1, max_rows=1)
    got = q.agg(dpf.count()).bounded_aggregates()
    assert isinstance(got, pl.DataFrame)
    want = df.group_by("key").len().sort("key")
    assert got["__rows"].to_list() == want["len"].to_list()


@pytest.mark.parametrize("parts", [1, 3])
def test_row_units_are_stable_and_order_free(parts: int) -> None:
    """Each row its own unit: one row fewer changes the totals by that row's integers only, for
    a fixed hash key, and the order of the rows changes nothing. (Numbering rows by position
    gave every later row a new hash, hence a new rounding: a neighbour moved other rows' sums.)
    """
    g = np.random.default_rng(8)
    df = pl.DataFrame({"key": g.integers(0, 3, 600), "x": g.uniform(-20.0, 120.0, 600)})
    df = pl.concat([df, df.head(40)])  # identical rows too

    def tot(d: pl.DataFrame) -> pl.DataFrame:
        q = dpf.Query(d, privacy_unit=None).group_by("key", max_groups=1, max_rows=1)
        q = q.agg(dpf.count(), dpf.sum("x", bounds=B))
        out = q.bounded_aggregates(seed=5, partitions=parts)
        assert isinstance(out, pl.DataFrame)
        return out

    full = tot(df)
    assert full.equals(tot(df.reverse())) and full.equals(tot(df.sample(fraction=1.0, seed=1)))

    def without(i: int) -> pl.DataFrame:
        return tot(df.filter(pl.int_range(pl.len()) != i))

    # identical rows are interchangeable: removing either copy gives the same totals
    assert without(0).equals(without(600)) and without(15).equals(without(615))
    for i in (100, 300, 599):  # rows without a copy: exactly that row's integers go
        rest, one = without(i), tot(df[i])
        diff = full.join(rest, on="key", how="left", suffix="_r").fill_null(0)
        k = one["key"][0]
        for c in full.columns[1:]:
            want = [int(one[c][0]) if key == k else 0 for key in diff["key"]]
            assert (diff[c] - diff[f"{c}_r"]).to_list() == want, (i, c)


def test_null_and_nan_values_are_dropped_before_bounding() -> None:
    df = pl.DataFrame(
        {"user": [1, 1, 2, 3], "key": [0, 0, 0, 0], "x": [None, 5.0, float("nan"), 7.0]}
    )
    clean = df.filter(pl.col("x").is_not_null() & pl.col("x").is_not_nan())
    a = _totals(df, max_rows=5, max_groups=1)
    b = _totals(clean, max_rows=5, max_groups=1)
    assert a.equals(b) and int(a["__rows"][0]) == 2


def test_one_row_per_pair_is_one_of_its_rows_chosen_by_the_key() -> None:
    """L∞ = 1 keeps exactly one of the pair's rows (its value, not a mix), keyed by the hash."""
    df = pl.DataFrame({"user": [7, 7, 7, 7], "key": [0] * 4, "x": [1.0, 2.0, 3.0, 4.0]})
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=[0], max_rows=1, max_groups=1
    )
    g = q.agg(dpf.sum("x", bounds=B))
    mn = g.explain(epsilon=1.0).plan.measures[0]
    picked = set()
    for seed in range(12):
        got = g.bounded_aggregates(seed=seed)
        assert isinstance(got, pl.DataFrame)
        picked.add(int(got[mn.measure.name][0]) / 2.0**mn.exponent)
    assert picked <= {1.0, 2.0, 3.0, 4.0}
    assert len(picked) >= 2  # 12 keys all picking the same of 4 rows: chance 4 · 4^-12


def test_join_with_public_table_then_group() -> None:
    df = _table(7)
    regions = pl.DataFrame({"key": list(range(12)), "region": ["n", "s", "e"] * 4})
    q = dpf.Query(df, privacy_unit="user").join(regions, on="key")
    got = q.group_by("region", max_rows=100, max_groups=3).agg(dpf.count()).bounded_aggregates()
    assert isinstance(got, pl.DataFrame)
    want = df.join(regions, on="key").group_by("region").len().sort("region")
    assert got["__rows"].to_list() == want["len"].to_list()


@pytest.mark.parametrize(
    ("keys", "delta", "noise"),
    [
        (["a", "b"], 0.0, None),
        (["a", "b"], 1e-6, None),
        (None, 1e-6, None),
        (None, 1e-6, "gaussian"),
    ],
)
def test_a_query_costing_the_whole_budget_fits_it(
    keys: list[str] | None, delta: float, noise: str | None
) -> None:
    from dpkit.accounting import Accountant, ApproxDP, PureDP

    df = pl.DataFrame({"user": [1, 2, 2], "key": ["a", "b", "b"], "x": [1.0, 2.0, 3.0]})
    budget = ApproxDP(epsilon=0.7, delta=delta) if delta else PureDP(epsilon=0.7)
    acct = Accountant(budget)
    g = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=keys, max_groups=2, max_rows=1
    )
    g.agg(dpf.count(), dpf.mean("x", bounds=(0, 5))).release(
        epsilon=0.7, delta=delta, noise=noise, accountant=acct, rng=1
    )
    spent = acct.spent
    assert spent.epsilon == pytest.approx(0.7, rel=1e-6)  # type: ignore[attr-defined]


def test_streaming_engine_from_parquet_gives_the_same_totals(tmp_path: Any) -> None:
    df = _table(8)
    path = tmp_path / "t.parquet"
    df.write_parquet(path)
    aggs = (dpf.count(), dpf.sum("x", bounds=B))
    mem = dpf.Query(df, privacy_unit="user").group_by("key", max_groups=2, max_rows=1).agg(*aggs)
    lazy = dpf.Query(pl.scan_parquet(path), privacy_unit="user").group_by(
        "key", max_groups=2, max_rows=1
    )
    g = lazy.agg(*aggs)
    plan = g.explain(epsilon=1.0, delta=1e-6).plan
    a, _ = mem._exact(plan, (1, 2, 3, 4))
    b, _ = g._exact(plan, (1, 2, 3, 4), streaming=True)
    assert a.sort("key").equals(b.sort("key"))
    r = g.release(epsilon=1.0, delta=1e-6, rng=0, streaming=True)
    assert r.frame.height <= 12


def test_fixed_point_rounding_does_not_drift_over_many_rows() -> None:
    """Each value is 0.9 of a fixed-point step above a grid point. Flooring every row lost
    0.9·n steps (here 18,000 steps, several times the ≈2^20-step noise once n reaches 10^7);
    stochastic rounding keeps the sum within a few √n/2 of the truth."""
    n = 20_000
    probe = dpf.Query(pl.DataFrame({"user": [0], "key": [0], "x": [0.0]}), privacy_unit="user")
    agg = dpf.sum("x", bounds=B)
    k = (
        probe.group_by("key", public_keys=[0], max_groups=1, max_rows=1)
        .agg(agg)
        .explain(epsilon=1.0)
        .plan.measures[0]
    )
    step = 2.0**-k.exponent
    v = (12345 + 0.9) * step
    df = pl.DataFrame({"user": np.arange(n), "key": [0] * n, "x": [v] * n})
    got = (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", public_keys=[0], max_groups=1, max_rows=1)
        .agg(agg)
    )
    out = got.bounded_aggregates(seed=3)
    assert isinstance(out, pl.DataFrame)
    err = int(out[k.measure.name][0]) - n * (12345 + 0.9)  # in steps
    assert abs(err) <= 6 * math.sqrt(n) / 2  # 6 sd of the rounding error (sd ≤ √n/2)
