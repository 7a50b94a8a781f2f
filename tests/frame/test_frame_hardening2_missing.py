"""``Query(..., missing=)``: the library's one missing-value policy, on tables.

Before, a query silently dropped rows with a null or NaN in an aggregated column, while
``dpkit.stats`` refused them: the default is now ``"raise"`` everywhere (refused before any
charge), and ``"drop"`` keeps the old behaviour, chosen explicitly.
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, PureDP
from dpkit.errors import DataError
from dpkit.random import seeded

B = (0.0, 10.0)
CLEAN = pl.DataFrame({"user": [1, 1, 2, 3, 4], "key": ["a", "a", "b", "a", "b"],
                      "x": [1.0, 5.0, 2.0, 7.0, 3.0]})  # fmt: skip


def _with(value: object) -> pl.DataFrame:
    extra = pl.DataFrame({"user": [9], "key": ["a"], "x": [value]}, schema=CLEAN.schema)
    return pl.concat([CLEAN, extra])


def _query(df: pl.DataFrame, **kw: object) -> dpf.GroupedQuery:
    q = dpf.Query(df, privacy_unit=kw.pop("unit", "user"), **kw)  # type: ignore[arg-type]
    return q.group_by("key", public_keys=["a", "b"], max_rows=2, max_groups=1).agg(
        dpf.count(), dpf.mean("x", bounds=B)
    )


@pytest.mark.parametrize("bad", [None, float("nan")], ids=["null", "nan"])
@pytest.mark.parametrize("unit", ["user", None])
def test_default_refuses_before_any_charge(bad: object, unit: str | None) -> None:
    acct = Accountant(PureDP(epsilon=5.0))
    with pytest.raises(DataError, match="missing value") as info:
        _query(_with(bad), unit=unit).release(epsilon=1.0, accountant=acct, rng=seeded(0))
    assert acct.spent.epsilon == 0
    assert "9" not in str(info.value)


@pytest.mark.parametrize("bad", [None, float("nan")], ids=["null", "nan"])
def test_drop_is_the_previous_behaviour(bad: object) -> None:
    a = _query(_with(bad), missing="drop").bounded_aggregates(seed=3)
    b = _query(CLEAN, missing="drop").bounded_aggregates(seed=3)
    assert a.equals(b)
    r = _query(_with(bad), missing="drop").release(epsilon=1.0, rng=seeded(1))
    assert r.frame.height == 2


def test_far_values_are_clamped_under_either_policy() -> None:
    for v in (1e308, float("inf"), -float("inf"), 5e-324, -0.0):
        for missing in ("raise", "drop"):
            _query(_with(v), missing=missing).release(epsilon=1.0, rng=seeded(2))


def test_null_keys_are_not_missing() -> None:
    df = CLEAN.with_columns(pl.when(pl.col("user") == 4).then(None).otherwise("key").alias("key"))
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=["a", "b", None], max_groups=1, max_rows=1
    )
    q.agg(dpf.sum("x", bounds=B)).release(epsilon=1.0, rng=seeded(3))


def test_the_plan_says_which_policy() -> None:
    steps = _query(CLEAN).explain(epsilon=1.0).steps
    assert any("refuse" in s and "null/NaN" in s for s in steps)
    steps = _query(CLEAN, missing="drop").explain(epsilon=1.0).steps
    assert any(s.startswith("drop rows with null/NaN") for s in steps)


@pytest.mark.parametrize("missing", ["ignore", None, 0])
def test_unknown_policy_is_refused_at_construction(missing: object) -> None:
    with pytest.raises(DataError, match="missing must be"):
        dpf.Query(CLEAN, privacy_unit="user", missing=missing)  # type: ignore[arg-type]
