"""Parallel composition over disjoint parts of the units (Query.partition_by, Accountant.parallel).

The audits follow ``test_frame_hardening2_audit``: the exact bounded totals of both neighbouring
tables go through the real pipeline, then the real release code
(:func:`dpkit.frame._finish.finish`) runs on many stacked copies, one trial each. The extra unit
has a row in *each* region: with parts made by a plain filter per region it would move both
parts' counts (ε = 2 for two releases at ε = 1, which the control audit finds); partition_by puts
it in one part, so the two releases together keep ε = 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit as dp
import dpkit.frame as dpf
from dpkit.audit import epsilon_lower_bound
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.frame._finish import finish, public_totals
from dpkit.frame._pipeline import ALL
from dpkit.random import as_generator

EPS = 1.0
TRIALS = 20_000
REGIONS = ["n", "s"]
# 10 users in each region, one row each; the extra user has one row in each region
BASE = pl.DataFrame({"user": range(20), "region": ["n"] * 10 + ["s"] * 10})
EXTRA = pl.DataFrame({"user": [999, 999], "region": ["s", "n"]})


def _count(q: dpf.Query) -> dpf.GroupedQuery:
    return q.group_by("region", public_keys=REGIONS, max_groups=1, max_rows=1).agg(dpf.count())


def _parts(df: pl.DataFrame) -> list[dpf.GroupedQuery]:
    acct = dp.Accountant(dp.PureDP(epsilon=EPS))
    parts = acct.parallel(
        dpf.Query(df, privacy_unit="user").partition_by("region", keys=REGIONS),
        budget=dp.PureDP(epsilon=EPS),
    )
    return [_count(parts[k]) for k in REGIONS]


def _filtered(df: pl.DataFrame) -> list[dpf.GroupedQuery]:
    """The control: a filter per region, which does not make the units disjoint."""
    q = dpf.Query(df, privacy_unit="user")
    return [_count(q.filter(pl.col("region") == k)) for k in REGIONS]


def _audit(build: Any, seed: int) -> float:
    g0, g1 = build(BASE), build(pl.concat([BASE, EXTRA]))
    plans = [g.explain(epsilon=EPS).plan for g in g0]

    def exact(gs: list[dpf.GroupedQuery]) -> list[Any]:
        out = []
        for g, plan in zip(gs, plans, strict=True):
            totals, buckets = g._exact(plan, (11, 12, 13, 14))
            out.append(public_totals(totals, buckets, g._public, list(g._layout().keys))[0])
        return out

    d0, d1 = exact(g0), exact(g1)

    def mech(d: list[Any], n: int, rng: Any) -> np.ndarray[Any, Any]:
        gen = as_generator(rng)
        trials = pl.DataFrame({"trial": np.arange(n)})
        cols = []
        for totals, g, plan in zip(d, g0, plans, strict=True):
            f = finish(
                totals.join(trials, how="cross"), None, keys=["trial", "region"], aggs=g._aggs,
                plan=plan, gen=gen, alpha=0.05, drop_keys=(ALL,),
            )  # fmt: skip
            cols.append(f.sort("trial", "region")["count"].to_numpy().reshape(n, len(REGIONS)))
        return np.asarray(np.concatenate(cols, axis=1), dtype=float)

    return float(epsilon_lower_bound(mech, d0, d1, trials=TRIALS, rng=seed).epsilon)


def test_audit_parts_keep_one_epsilon_and_the_control_does_not() -> None:
    assert _audit(_parts, seed=3) <= EPS
    # the same audit finds the filter-per-region parts above ε: it can fail
    assert _audit(_filtered, seed=3) > EPS


def test_parallel_charges_the_budget_once_and_binds_each_part() -> None:
    acct = dp.Accountant(dp.ApproxDP(epsilon=2.0, delta=1e-6))
    df = pl.concat([BASE, EXTRA])
    parts = acct.parallel(
        dpf.Query(df, privacy_unit="user").partition_by("region", keys=REGIONS),
        budget=dp.PureDP(epsilon=1.5),
    )
    assert repr(acct.spent) == "ApproxDP(epsilon=1.5, delta=0.0)"
    for k in REGIONS:
        r = parts[k].agg(dpf.count(), max_rows=1).release(epsilon=1.0, rng=dp.random.seeded(1))
        assert r.frame.height == 1
    # each part's budget is its own: 0.5 is left in each, so a second ε = 1 is refused there
    with pytest.raises(BudgetExceededError, match="not enough epsilon"):
        parts["n"].agg(dpf.count(), max_rows=1).release(epsilon=1.0)
    # and cannot be paid from elsewhere: a part's releases take no other accountant
    with pytest.raises(PrivacyParameterError, match="parallel composition"):
        parts["s"].agg(dpf.count(), max_rows=1).release(epsilon=0.1, accountant=acct)
    assert repr(acct.spent) == "ApproxDP(epsilon=1.5, delta=0.0)"
    # the extra user is in the first part only (its first key in the order given)
    exact = {
        k: parts[k].agg(dpf.count_units(), max_rows=2).bounded_aggregates()["__units"][0]
        for k in REGIONS
    }
    assert exact == {"n": 11, "s": 10}


def test_only_structural_parts_are_accepted() -> None:
    acct = dp.Accountant(dp.PureDP(epsilon=1.0))
    with pytest.raises(PrivacyParameterError, match="disjoint by construction"):
        acct.parallel(["n", "s"], budget=dp.PureDP(epsilon=1.0))  # type: ignore[arg-type]
    q = dpf.Query(BASE, privacy_unit="user")
    for keys in ([], ["n", "n"], [None], "ns"):
        with pytest.raises(DataError):
            q.partition_by("region", keys=keys)
    with pytest.raises(DataError):
        q.partition_by("nope", keys=REGIONS)
    with pytest.raises(BudgetExceededError):
        acct.parallel(q.partition_by("region", keys=REGIONS), budget=dp.PureDP(epsilon=2.0))
    assert not acct.ledger
