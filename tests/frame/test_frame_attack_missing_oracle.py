"""``missing="raise"`` refuses the data's own nulls, not nulls a step makes from a predicate.

The refusal of a null in an aggregated column is allowed (it reveals that the data hold one).
But a row-wise step can *make* a null from any predicate on private values:
``with_columns(y=pl.when(pl.col("user") == 123).then(None).otherwise(1.0))`` (or a left join
with a public table lacking one key) and ``sum("y")`` was refused, before any charge, exactly
when user 123 was in the table: a membership oracle at ε = 0. The check now reads the table as
it was given (the aggregated columns it has); a null a step makes is dropped, a row-wise filter.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, PureDP
from dpkit.errors import DataError

Step = Callable[[dpf.Query], dpf.Query]
PUBLIC = pl.DataFrame({"k": [0, 1, 2], "w": [1.0, 2.0, 3.0]})  # lacks key 7

STEPS: dict[str, Step] = {
    "when": lambda q: q.with_columns(y=pl.when(pl.col("user") == 123).then(None).otherwise(1.0)),
    "nan": lambda q: q.with_columns(
        y=pl.when(pl.col("user") == 123).then(float("nan")).otherwise(1.0)
    ),
    "left join": lambda q: q.join(PUBLIC, on="k", how="left").with_columns(y=pl.col("w")),
}


def _outcome(df: pl.DataFrame, step: Step) -> str:
    acct = Accountant(PureDP(epsilon=10.0))
    try:
        q = step(dpf.Query(df, privacy_unit="user"))
        q.agg(dpf.sum("y", bounds=(0, 5)), max_rows=1).release(epsilon=1.0, accountant=acct)
    except DataError:
        assert not acct.ledger
        return "refused"
    return "ok"


@pytest.mark.parametrize("name", sorted(STEPS))
def test_a_null_made_by_a_step_is_no_oracle(name: str) -> None:
    base = pl.DataFrame({"user": [1, 2, 3], "k": [0, 1, 2]})
    target = pl.concat([base, pl.DataFrame({"user": [123], "k": [7]})])
    assert _outcome(base, STEPS[name]) == _outcome(target, STEPS[name]) == "ok"


def test_the_datas_own_null_is_still_refused() -> None:
    df = pl.DataFrame({"user": [1, 2], "y": [1.0, None]})
    assert _outcome(df, lambda q: q) == "refused"
    assert _outcome(df, lambda q: q.with_columns(y=pl.col("y") * 2)) == "refused"
    assert _outcome(df.with_columns(pl.col("y").fill_null(1.0)), lambda q: q) == "ok"
