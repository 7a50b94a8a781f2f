"""The in-memory plan (one sort, linear scans) keeps exactly the rows the bounding rules name.

Checked against a plain-Python reference computed from the same keyed hashes, against the
group-by plan the streaming engine runs, and on keys where equality is subtle (null, NaN, −0.0).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
import dpkit.frame._bounding as bounding_mod
from dpkit.frame._bounding import bound
from dpkit.frame._calibrate import Bounding
from dpkit.frame._pipeline import ROWS, UNITS, WEIGHT, G, H, pack_min, prepare
from dpkit.frame._selection import weights
from dpkit.frame._table import UNIT_ID

B = (0.0, 100.0)
SEEDS = (11, 22, 33, 44)


def _table(seed: int, units: int = 150, rows: int = 2500, keys: int = 9) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    key = g.integers(0, keys, rows).astype(float)
    key[g.random(rows) < 0.05] = np.nan
    key[g.random(rows) < 0.05] = -0.0  # equal to 0.0: one group with it
    return pl.DataFrame(
        {
            "user": g.integers(0, units, rows),
            "key": pl.Series(key).fill_nan(None).fill_null(float("nan")),
            "k2": pl.Series(g.choice(["a", "b"], rows)).scatter(np.arange(0, rows, 17), None),
            "x": np.round(g.uniform(-20, 120, rows), 3),
        }
    )


def _query(df: pl.DataFrame, l_inf: int, l0: int) -> Any:
    q = dpf.Query(df, privacy_unit="user").group_by("key", "k2", max_rows=l_inf, max_groups=l0)
    return q.agg(dpf.count(), dpf.count_units(), dpf.sum("x", bounds=B), dpf.mean("x", bounds=B))


def _both_plans(df: pl.DataFrame, l_inf: int, l0: int) -> tuple[pl.DataFrame, pl.DataFrame, Any]:
    gq = _query(df, l_inf, l0)
    plan = gq.explain(epsilon=1.0, delta=1e-6).plan
    layout = gq._layout()
    prep = prepare(gq._source(), layout, plan, SEEDS, own_unit=False)
    b = Bounding(l_inf, l0, None, False)
    fast, _ = bound(prep, layout, plan, b, sort=True)
    grouped, _ = bound(prep, layout, plan, b, sort=False)
    keys = list(layout.keys)
    return fast.collect().sort(keys), grouped.collect().sort(keys), (prep.collect(), plan, keys)


def _reference(prep: pl.DataFrame, plan: Any, keys: list[str], l_inf: int, l0: int) -> dict:
    """Plain Python: per (unit, key) the l_inf smallest row hashes; per unit the l0 smallest
    pair hashes; weights floor(2^20/√t) with t the unit's kept keys."""
    values = [m.measure.name for m in plan.measures if m.measure.kind == "value"]
    pairs: dict[Any, list[tuple[int, tuple[int, ...]]]] = defaultdict(list)
    pair_hash: dict[Any, int] = {}
    for r in prep.iter_rows(named=True):
        # NaN != NaN in Python: key them by a canonical form (Polars groups NaN with NaN)
        k = tuple("nan" if isinstance(r[c], float) and r[c] != r[c] else r[c] for c in keys)
        k = tuple(0.0 if v == 0.0 and isinstance(v, float) else v for v in k)
        pairs[(r[UNIT_ID], k)].append((r[H], tuple(r[v] for v in values)))
        pair_hash[(r[UNIT_ID], k)] = r[G]
    by_unit: dict[Any, list[Any]] = defaultdict(list)
    for u, k in pairs:
        by_unit[u].append(k)
    w = weights(l0)
    out: dict[Any, list[int]] = defaultdict(lambda: [0] * (3 + len(values)))
    for u, ks in by_unit.items():
        kept = sorted(ks, key=lambda k: pair_hash[(u, k)])[:l0]
        for k in kept:
            rows = sorted(pairs[(u, k)])[:l_inf]
            acc = out[k]
            acc[0] += len(rows)
            acc[1] += 1
            acc[2] += w[len(kept)]
            for j in range(len(values)):
                acc[3 + j] += sum(r[1][j] for r in rows)
    return dict(out)


@pytest.mark.parametrize(("l_inf", "l0"), [(1, 1), (1, 3), (2, 2), (3, 5)])
def test_sorted_plan_matches_a_plain_python_reference(l_inf: int, l0: int) -> None:
    fast, grouped, (prep, plan, keys) = _both_plans(_table(l_inf * 10 + l0), l_inf, l0)
    want = _reference(prep, plan, keys, l_inf, l0)
    values = [m.measure.name for m in plan.measures if m.measure.kind == "value"]
    assert fast.height == len(want)
    gaussian = plan.selection is not None and plan.selection.method == "gaussian"
    for r in fast.iter_rows(named=True):
        k = tuple("nan" if isinstance(r[c], float) and r[c] != r[c] else r[c] for c in keys)
        k = tuple(0.0 if v == 0.0 and isinstance(v, float) else v for v in k)
        acc = want[k]
        assert (r[ROWS], r[UNITS]) == (acc[0], acc[1])
        assert r[WEIGHT] == (acc[2] if gaussian else 0)
        assert [r[v] for v in values] == acc[3:]
    # the group-by plan keeps the same rows (it breaks ties in the top 32 bits of a row hash by
    # the smaller value: none occur among these few thousand rows)
    assert fast.select(grouped.columns).equals(grouped)


@pytest.mark.parametrize("sort", [True, False])
def test_sorted_plan_does_not_depend_on_data_order(sort: bool, monkeypatch: Any) -> None:
    # bounded_aggregates picks the plan by Polars version: force each one (on Polars 2.x the
    # default is the group-by plan, and this test would not run the sorted plan at all)
    monkeypatch.setattr(bounding_mod, "sort_is_faster", lambda: sort)
    df = _table(5)
    a = _query(df, 2, 3).bounded_aggregates(seed=4)
    b = _query(df.reverse(), 2, 3).bounded_aggregates(seed=4)
    c = _query(df.sample(fraction=1.0, shuffle=True, seed=1), 2, 3).bounded_aggregates(seed=4)
    assert isinstance(a, pl.DataFrame) and a.equals(b) and a.equals(c)
    # keys equal under grouping are one group: NaN with NaN, -0.0 with 0.0, null with null
    assert a.filter(pl.col("key").is_nan() & pl.col("k2").is_null()).height <= 1
    assert a.filter((pl.col("key") == 0.0) & (pl.col("k2") == "a")).height == 1


def test_sorted_plan_on_an_empty_table_and_each_row_its_own_unit() -> None:
    empty = _table(6).clear()
    got = _query(empty, 1, 2).bounded_aggregates(seed=1)
    assert isinstance(got, pl.DataFrame) and got.height == 0
    df = _table(7).drop("user")
    q = dpf.Query(df, privacy_unit=None).group_by("k2", max_groups=1, max_rows=1)
    own = q.agg(dpf.count()).bounded_aggregates(seed=2)
    assert isinstance(own, pl.DataFrame)
    want = df.group_by("k2").len().sort("k2", nulls_last=True)
    assert own["__rows"].to_list() == want["len"].to_list()


def test_both_plans_on_an_empty_frame_and_row_units() -> None:
    """The explain-time run on an empty frame, and units made of single rows, on both plans."""
    df = _table(9)
    gq = _query(df, 1, 2)
    plan = gq.explain(epsilon=1.0, delta=1e-6).plan
    layout = gq._layout()
    b = Bounding(1, 2, None, False)
    for sort in (True, False):
        prep = prepare(gq._source().clear(), layout, plan, SEEDS, own_unit=False)
        assert bound(prep, layout, plan, b, sort=sort)[0].collect().height == 0
    own = dpf.Query(df.drop("user"), privacy_unit=None).group_by("k2", max_groups=1)
    g = own.agg(dpf.count())
    plan1 = g.explain(epsilon=1.0, delta=1e-6).plan
    prep1 = prepare(g._source(), g._layout(), plan1, SEEDS, own_unit=True)
    b1 = Bounding(1, 1, None, False)
    got = [
        bound(prep1, g._layout(), plan1, b1, sort=s)[0].collect().sort("k2") for s in (True, False)
    ]
    assert got[0].select(got[1].columns).equals(got[1])
    assert int(got[0]["__rows"].sum()) == df.height


def test_pack_min_is_the_floor_division_packing() -> None:
    """The masked packing gives the integers of ``(h // 2^32)·2^32 + t + 2^31`` (the Spark and
    earlier form), for negative hashes and the extreme per-row integers ±2^30."""
    g = np.random.default_rng(0)
    n = 50_000
    h = g.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    h[:4] = [-(2**63), 2**63 - 1, -1, 0]
    t = g.integers(-(2**30), 2**30 + 1, n)
    t[:4] = [-(2**30), 2**30, -(2**30), 2**30]
    df = pl.DataFrame({"g": g.integers(0, 500, n), "h": h, "t": t})
    low, half = 1 << 32, 1 << 31
    packed = (pl.col("h") // low) * low + (pl.col("t") + half)
    want = packed.min() - (packed.min() // low) * low - half
    got = df.group_by("g").agg(pack_min(pl.col("h"), pl.col("t")).alias("a"), want.alias("b"))
    assert got.height == 500 and got.filter(pl.col("a") != pl.col("b")).height == 0


@pytest.mark.parametrize("sort", [True, False])
def test_key_labels_do_not_depend_on_the_rows(sort: bool) -> None:
    """-0.0 and 0.0 are one group; the released label must not be whichever sign a person's
    row (first in some hash or data order) carried — that would publish data outside the noise.
    Both plans, both data orders, several hash keys: the label is always +0.0."""
    for order in (1, -1):
        k = [0.0, -0.0, 0.0, -0.0, float("nan"), -float("nan")][::order]
        df = pl.DataFrame({"user": [1, 2, 3, 4, 5, 6], "key": k, "x": [1.0] * 6})
        gq = dpf.Query(df, privacy_unit="user").group_by("key", max_groups=1, max_rows=1)
        gq = gq.agg(dpf.count())
        plan = gq.explain(epsilon=1.0, delta=1e-6).plan
        for s in range(3):
            seeds = [s, s + 1, s + 2, s + 3]
            prep = prepare(gq._source(), gq._layout(), plan, seeds, own_unit=False)
            out = bound(prep, gq._layout(), plan, Bounding(1, 1, None, False), sort=sort)[0]
            keys = out.collect()["key"].to_numpy()
            assert len(keys) == 2 and not np.signbit(keys).any(), (order, s)
