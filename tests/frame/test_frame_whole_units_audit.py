"""Empirical audits (dpkit.audit) of grouped counts where one person sits just past a bound.

Units within every bound are summed whole and only the others are hashed and ranked
(:func:`dpkit.frame._bounding.bound`); a person one row or one key past a bound must still lose
exactly what the bound removes. As in ``test_frame_privacy``: the exact bounded totals of both
neighbouring tables come from the real pipeline (one fixed hash key: the guarantee holds for
every key), then the real release code (:func:`dpkit.frame._finish.finish`) noises many stacked
copies, one per trial.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
import dpkit.frame._bounding as bounding_module
from dpkit.audit import epsilon_lower_bound
from dpkit.frame._finish import finish, public_totals
from dpkit.frame._pipeline import ALL
from dpkit.random import as_generator

TRIALS = 20_000
EPS = 1.0
# 20 people within every bound (one row each), in the two public groups
BASE = pl.DataFrame({"user": range(20), "g": ["a", "b"] * 10})


def _grouped(df: pl.DataFrame) -> dpf.GroupedQuery:
    # L∞ = 2, L0 = 2, L1 = 3: the count's sensitivity is 3 (an L1 cap: the split path)
    q = dpf.Query(df, privacy_unit="user").group_by(
        "g", public_keys=["a", "b"], max_rows=2, max_groups=2, max_rows_per_unit=3
    )
    return q.agg(dpf.count())


def _ungrouped(df: pl.DataFrame) -> dpf.GroupedQuery:
    # no GROUP BY, L∞ = 3 > 1: the split path, each person grouped by alone
    return dpf.Query(df, privacy_unit="user").agg(dpf.count(), max_rows=3)


def _audit(build: Any, extra: pl.DataFrame, key: str | None, seed: int) -> float:
    g0, g1 = build(BASE), build(pl.concat([BASE, extra]))
    plan = g0.explain(epsilon=EPS).plan
    keys = list(g0._layout().keys)

    def exact(g: dpf.GroupedQuery) -> Any:
        totals, buckets = g._exact(plan, (11, 12, 13, 14))
        if g._public is None:
            return totals
        return public_totals(totals, buckets, g._public, keys)[0]

    d0, d1 = exact(g0), exact(g1)

    def mech(d: Any, n: int, rng: Any) -> np.ndarray[Any, Any]:
        t = d.join(pl.DataFrame({"trial": np.arange(n)}), how="cross")
        f = finish(
            t, None, keys=["trial", *keys], aggs=g0._aggs, plan=plan, gen=as_generator(rng),
            alpha=0.05, drop_keys=(ALL,),
        )  # fmt: skip
        if key is not None:
            f = f.filter(pl.col("g") == key)
        return np.asarray(f.sort("trial")["count"].to_numpy(), dtype=float)

    return float(epsilon_lower_bound(mech, d0, d1, trials=TRIALS, rng=seed).epsilon)


CASES = [
    # one row past L1 (2 + 2 rows: 3 kept, 2 in one group); one row past L∞ in one group;
    # one key past L0 (c is not released, but a kept c costs a or b its row)
    (_grouped, {"user": [99] * 4, "g": ["a", "a", "b", "b"]}, "a"),
    (_grouped, {"user": [99] * 3, "g": ["a", "a", "a"]}, "a"),
    (_grouped, {"user": [99] * 3, "g": ["a", "b", "c"]}, "a"),
    (_ungrouped, {"user": [99] * 4, "g": ["a"] * 4}, None),
]


@pytest.mark.parametrize(("build", "extra", "key"), CASES)
def test_a_person_just_past_a_bound_moves_the_count_within_its_claim(
    build: Any, extra: dict[str, list[Any]], key: str | None
) -> None:
    eps_lb = _audit(build, pl.DataFrame(extra), key, seed=len(extra["g"]))
    assert eps_lb <= EPS


def test_the_audit_sees_a_split_that_keeps_a_person_past_a_bound_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Power: flag every person whole (a split that no longer enforces the bounds) and the
    person with 12 rows in one group moves the count by 12 against a sensitivity of 3."""
    real = bounding_module.whole_units

    def all_whole(*args: Any, **kw: Any) -> Any:
        pairs, flags = real(*args, **kw)
        return pairs.with_columns(pl.lit(True).alias("__whole")), flags

    monkeypatch.setattr(bounding_module, "whole_units", all_whole)
    extra = pl.DataFrame({"user": [99] * 12, "g": ["a"] * 12})
    assert _audit(_grouped, extra, "a", seed=5) > EPS
