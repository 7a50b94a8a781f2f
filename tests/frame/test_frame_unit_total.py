"""Clamping each unit's total per group (``dpf.sum(..., unit_total=)``), not only each row.

The audit follows ``test_frame_hardening2_audit``: the exact bounded totals of both neighbouring
tables go through the real pipeline, then the real release code runs on many stacked copies.
The extra unit has 40 rows of the largest value in the group (400 before clamping its total to
30): with its total clamped, the sum's noise (calibrated to 30) hides it; the control feeds the
same noise the unclamped totals (a pipeline that forgot the clamp) and the audit sees through it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.audit import epsilon_lower_bound
from dpkit.errors import DataError
from dpkit.frame._finish import finish, public_totals
from dpkit.frame._pipeline import ALL
from dpkit.random import as_generator

EPS = 1.0
TRIALS = 20_000
BASE = pl.DataFrame({"user": range(20), "g": ["a"] * 20, "x": [1.0] * 20})
EXTRA = pl.DataFrame({"user": [999] * 40, "g": ["a"] * 40, "x": [10.0] * 40})


def _sum(df: pl.DataFrame, unit_total: tuple[float, float] | None) -> dpf.GroupedQuery:
    q = dpf.Query(df, privacy_unit="user")
    g = q.group_by("g", public_keys=["a"], max_groups=1, max_rows=50)
    return g.agg(dpf.sum("x", bounds=(0, 10), unit_total=unit_total))


def _audit(d0: dpf.GroupedQuery, d1: dpf.GroupedQuery, plan: Any, seed: int) -> float:
    def exact(g: dpf.GroupedQuery) -> Any:
        totals, buckets = g._exact(plan, (11, 12, 13, 14))
        return public_totals(totals, buckets, g._public, ["g"])[0]

    e0, e1 = exact(d0), exact(d1)

    def mech(d: Any, n: int, rng: Any) -> np.ndarray[Any, Any]:
        t = d.join(pl.DataFrame({"trial": np.arange(n)}), how="cross")
        f = finish(
            t, None, keys=["trial", "g"], aggs=d0._aggs, plan=plan, gen=as_generator(rng),
            alpha=0.05, drop_keys=(ALL,),
        )  # fmt: skip
        return np.asarray(f.sort("trial")["sum_x"].to_numpy(), dtype=float)

    return float(epsilon_lower_bound(mech, e0, e1, trials=TRIALS, rng=seed).epsilon)


def test_audit_unit_total_clamp_keeps_epsilon_and_the_control_does_not() -> None:
    both = pl.concat([BASE, EXTRA])
    clamped = _sum(BASE, (0, 30))
    plan = clamped.explain(epsilon=EPS).plan
    assert _audit(clamped, _sum(both, (0, 30)), plan, seed=5) <= EPS
    # the same noise (scale, grid) over totals that were not clamped: the extra unit moves the
    # sum by 400 where the noise was calibrated to 30
    plain = _sum(BASE, None)
    forgot = replace(
        plan, measures=(replace(plan.measures[0], measure=plain._aggs[0].measures()[0]),)
    )
    assert _audit(plain, _sum(both, None), forgot, seed=5) > EPS


def test_unit_totals_are_clamped_and_the_noise_follows_the_smaller_bound() -> None:
    g = np.random.default_rng(0)
    n = 3000
    df = pl.DataFrame(
        {"user": g.integers(0, 100, n), "k": g.choice(["a", "b"], n), "x": g.uniform(0, 10, n)}
    )
    for extra in ({}, {"max_rows_per_unit": 1000}):  # the group-by plan, and the row path
        q = dpf.Query(df, privacy_unit="user").group_by(
            "k", public_keys=["a", "b"], max_groups=2, max_rows=1000, **extra
        )
        agg = q.agg(dpf.sum("x", bounds=(0, 10), unit_total=(0, 40)))
        plan = agg.explain(epsilon=1.0).plan.measures[0]
        got = agg.bounded_aggregates(seed=1)
        got = (got[0] if isinstance(got, tuple) else got).sort("k")
        want = (
            df.group_by("user", "k").agg(pl.col("x").sum().clip(0, 40)).group_by("k")
            .agg(pl.col("x").sum()).sort("k")
        )  # fmt: skip
        # every row kept (max_rows is above any unit's rows); rows are rounded to the grid
        # stochastically, at most one grid unit each
        for a, b in zip(got[plan.measure.name] * plan.unit, want["x"], strict=True):
            assert abs(a - b) <= n * plan.unit
        # ℓ1 sensitivity: L0 · 40 in real units, not L0 · L∞ · 10
        assert plan.l1 * plan.unit == pytest.approx(2 * 40)
    # where the rows' bound is the smaller one, it holds
    small = dpf.Query(df, privacy_unit="user").group_by(
        "k", public_keys=["a"], max_groups=1, max_rows=2
    )
    m = small.agg(dpf.sum("x", bounds=(0, 10), unit_total=(0, 40))).explain(epsilon=1.0)
    assert m.plan.measures[0].l1 * m.plan.measures[0].unit == pytest.approx(20)


def test_unit_total_must_contain_zero_and_be_ordered() -> None:
    for bad in ((5, 40), (-3, -1), (40, 0), (0, float("inf"))):
        with pytest.raises(DataError):
            dpf.sum("x", bounds=(0, 10), unit_total=bad)
