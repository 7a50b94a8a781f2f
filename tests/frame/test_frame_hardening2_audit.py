"""Empirical audits (dpkit.audit) of frame queries with a fan-out join and a unit rebinding step.

As in ``test_frame_privacy``: the exact bounded totals of both neighbouring tables go through the
real pipeline (one fixed hash key: the guarantee holds for every key), then the real release code
(:func:`dpkit.frame._finish.finish`) runs on many stacked copies, one trial each.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

import dpkit.frame as dpf
from dpkit.audit import epsilon_lower_bound
from dpkit.frame._finish import finish, public_totals
from dpkit.frame._pipeline import ALL
from dpkit.random import as_generator

TRIALS = 20_000
EPS = 1.0
COPIES = 200  # the public table repeats the extra unit's join key this many times
MAX_ROWS = 3  # the count's sensitivity: L∞ · L0 = 3


def _exact(g: dpf.GroupedQuery, plan: Any) -> tuple[Any, Any]:
    totals, buckets = g._exact(plan, (11, 12, 13, 14))
    return public_totals(totals, buckets, g._public, list(g._layout().keys))


def _audit(build: Any, base: pl.DataFrame, extra: pl.DataFrame, seed: int) -> float:
    g0, g1 = build(base), build(pl.concat([base, extra]))
    plan = g0.explain(epsilon=EPS).plan
    d0, d1 = _exact(g0, plan), _exact(g1, plan)
    keys = list(g0._layout().keys)

    def mech(d: tuple[Any, Any], n: int, rng: Any) -> np.ndarray[Any, Any]:
        trials = pl.DataFrame({"trial": np.arange(n)})
        t = d[0].join(trials, how="cross")
        f = finish(
            t, None, keys=["trial", *keys], aggs=g0._aggs, plan=plan, gen=as_generator(rng),
            alpha=0.05, drop_keys=(ALL,),
        )  # fmt: skip
        return np.asarray(f.sort("trial")["count"].to_numpy(), dtype=float)

    return float(epsilon_lower_bound(mech, d0, d1, trials=TRIALS, rng=seed).epsilon)


def _count(q: dpf.Query) -> dpf.GroupedQuery:
    return q.group_by("g", public_keys=["a"], max_rows=MAX_ROWS, max_groups=1).agg(dpf.count())


# 20 users with one row each (join keys 1..20), and an extra user whose one row has key 0
BASE = pl.DataFrame({"user": range(20), "txn": range(20), "k": range(1, 21)})
EXTRA = pl.DataFrame({"user": [999], "txn": [999], "k": [0]})
# a public table that repeats every key: one private row becomes COPIES rows
KEYS = [k for k in range(21) for _ in range(COPIES)]
PUBLIC = pl.DataFrame({"k": KEYS, "copy": range(len(KEYS)), "g": ["a"] * len(KEYS)})


def test_audit_fanout_join_with_a_declared_unit() -> None:
    """The extra unit's row becomes 200 rows; they are its rows, so L∞ = 3 keeps 3."""

    def build(df: pl.DataFrame) -> dpf.GroupedQuery:
        return _count(dpf.Query(df, privacy_unit="user").join(PUBLIC, on="k"))

    assert _audit(build, BASE, EXTRA, seed=1) <= EPS


def test_audit_fanout_join_whose_copies_are_named_as_units() -> None:
    """The copies' public ids written onto the unit's column: still one unit's rows."""

    def build(df: pl.DataFrame) -> dpf.GroupedQuery:
        q = dpf.Query(df, privacy_unit="user").join(PUBLIC, on="k")
        return _count(q.with_columns(user=pl.col("copy")))

    assert _audit(build, BASE, EXTRA, seed=2) <= EPS


def test_audit_rebinding_the_unit_to_a_row_column() -> None:
    """One user with 60 rows; the unit's column overwritten by a per-row id."""
    extra = pl.DataFrame({"user": [999] * 60, "txn": range(1000, 1060), "k": [1] * 60})
    public = pl.DataFrame({"k": range(21), "g": ["a"] * 21})

    def build(df: pl.DataFrame) -> dpf.GroupedQuery:
        q = dpf.Query(df, privacy_unit="user").with_columns(user=pl.col("txn"))
        return _count(q.join(public, on="k"))

    assert _audit(build, BASE, extra, seed=3) <= EPS


def test_the_audit_sees_copies_counted_as_units() -> None:
    """Power: the same tables with each copy made a unit *before* the query (what the rebinding
    did after it) move the count by 200 against a sensitivity of 3; the audit sees ε > 1."""

    def build(df: pl.DataFrame) -> dpf.GroupedQuery:
        return _count(dpf.Query(df.join(PUBLIC, on="k"), privacy_unit="copy"))

    assert _audit(build, BASE, EXTRA, seed=4) > EPS
