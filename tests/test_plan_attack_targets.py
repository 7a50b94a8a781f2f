"""Attack on the planner: a per-column target must be checked like the single target.

A negative target in the mapping made every cell "meet" it (cell / negative ≤ 1), so the
planner returned its smallest ε, whose intervals are far wider than anything asked for; a zero
target divided by zero; an empty mapping failed inside ``max``.
"""

from __future__ import annotations

import math

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit import plan
from dpkit.errors import PrivacyParameterError


def _query() -> dpf.GroupedQuery:
    df = pl.DataFrame({"user": [1, 2, 3], "key": ["a", "b", "a"], "x": [1.0, 2.0, 3.0]})
    return (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", public_keys=["a", "b"], max_groups=1, max_rows=2)
        .agg(dpf.count(alias="n"), dpf.sum("x", bounds=(0, 10), alias="s"))
    )


@pytest.mark.parametrize(
    "targets",
    [
        {"n": 20.0, "s": -1.0},
        {"n": -5.0},
        {"n": 0.0},
        {"n": math.nan},
        {"n": math.inf},
        {},
    ],
)
def test_bad_per_column_targets_are_refused(targets):
    with pytest.raises(PrivacyParameterError, match="target"):
        plan.epsilon_for_query(_query(), half_width=targets)


def test_a_negative_target_is_not_silently_met():
    # the planned ε must meet every target it was given, or the call must refuse
    g = _query()
    try:
        eps = plan.epsilon_for_query(g, half_width={"n": 20.0, "s": -1.0})
    except PrivacyParameterError:
        return
    assert g.explain(epsilon=eps).accuracy()["s"] <= -1.0
