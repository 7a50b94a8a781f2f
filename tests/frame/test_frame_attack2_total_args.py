"""A step whose *argument* comes from a column can fail on one record's value.

``check_total`` listed ``str.extract``, ``str.count_matches``, ``str.replace``, ``str.slice`` and
``dt.truncate`` as total, which they are for literal arguments (a bad literal pattern fails on
every table, empty included: a parameter error). With the pattern, length or duration taken
from a column, Polars parses each row's value: a record holding ``"("`` (no regex), a negative
length or ``"x"`` (no duration) made the release fail exactly when that record existed, and a
column pattern with ``literal=True`` failed only on an *empty* input (whether any row passed a
filter). Those arguments must now be literals, checked from the expression alone.
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError

BENIGN = pl.DataFrame(
    {
        "user": [1],
        "s": ["abc"],
        "t": ["a"],
        "i": [1],
        "d": [dt.datetime(2020, 1, 1)],
        "p": ["1d"],
    }
)
# a neighbour: one more unit, whose values break the step
HOSTILE = pl.concat(
    [
        BENIGN,
        pl.DataFrame(
            {
                "user": [2],
                "s": ["abc"],
                "t": ["("],
                "i": [-1],
                "d": [dt.datetime(2020, 1, 1)],
                "p": ["x"],
            }
        ),
    ]
)

s = pl.col("s")
STEPS = {
    "extract with a column pattern": s.str.extract(pl.col("t"), 1),
    "count_matches with a column pattern": s.str.count_matches(pl.col("t")),
    "replace with a column pattern": s.str.replace(pl.col("t"), "x"),
    "replace_all with a column pattern": s.str.replace_all(pl.col("t"), "x"),
    "slice with a column length": s.str.slice(0, pl.col("i")),
    "truncate with a column duration": pl.col("d").dt.truncate(pl.col("p")),
}


def _release(df: pl.DataFrame, step: pl.Expr, keep: pl.Expr | None = None) -> object:
    q = dpf.Query(df, privacy_unit="user")
    if keep is not None:
        q = q.filter(keep)
    q = q.with_columns(o=step).filter(pl.col("o").is_not_null())
    return q.agg(dpf.count(), max_rows=1).release(epsilon=1.0)


@pytest.mark.parametrize("name", list(STEPS))
def test_column_argument_is_refused_whatever_the_data(name: str) -> None:
    for df in (BENIGN, HOSTILE):
        with pytest.raises(DataError, match="literal"):
            dpf.Query(df, privacy_unit="user").with_columns(o=STEPS[name])


def test_literal_replace_with_column_pattern_refused() -> None:
    # failed only when no row reached it: an oracle for "does any record pass the filter"
    step = s.str.replace(pl.col("t"), "x", literal=True)
    with pytest.raises(DataError, match="literal"):
        _release(BENIGN, step, keep=pl.col("i") > 5)


def test_literal_arguments_still_answer_on_both_neighbours() -> None:
    step = s.str.extract("(b)", 1)
    for df in (BENIGN, HOSTILE):
        _release(df, step)
    _release(BENIGN, pl.col("d").dt.truncate("1d"))
    _release(HOSTILE, s.str.slice(0, 2))
