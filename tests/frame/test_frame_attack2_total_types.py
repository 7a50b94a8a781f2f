"""Steps that Polars type-checks but whose inputs it casts on each row, and can fail there.

``check_total`` looked at each function's name, not at its inputs' types. Polars then casts an
input on every row, and some of those casts fail on some values only (measured on Polars 2):
a list or a duration to text, a number to a category, a category to a number (even with
``strict=False``), a text or NaN length in ``str.head``, the two branches of a ``when`` of
different types (the cast runs on the rows of the branch taken: the failure depends on the
predicate, i.e. on a record), integers ``&`` text, a sum of lists (fails on a null list), a
``str.to_integer`` base from a column. Each made a release fail exactly when some record held
such a value. Now the inputs' types are checked from the schema alone: one kind per operator
and per ``when``, integer lengths, text arguments for text functions, listed casts only.
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError

SCHEMA = {
    "user": pl.Int64, "s": pl.String, "i": pl.Int64, "f": pl.Float64, "b": pl.Boolean,
    "l": pl.List(pl.Int64), "c": pl.Categorical, "du": pl.Duration("us"),
}  # fmt: skip
BENIGN = pl.DataFrame(  # every step below succeeds on it
    {"user": [1], "s": ["2"], "i": [1], "f": [1.0], "b": [True], "l": [None], "c": [None],
     "du": [None]},
    schema=SCHEMA,
)  # fmt: skip
HOSTILE = pl.concat(  # a neighbour: one more unit, on which each step fails
    [
        BENIGN,
        pl.DataFrame(
            {"user": [2], "s": ["x"], "i": [1], "f": [float("nan")], "b": [False],
             "l": [[1]], "c": ["a"], "du": [dt.timedelta(1)]},
            schema=SCHEMA,
        ),
    ]
)  # fmt: skip

c = pl.col
STEPS = {
    "list to text, lenient": c("l").cast(pl.String, strict=False),
    "duration to text": c("du").cast(pl.String),
    "number to category": c("i").cast(pl.Categorical),
    "category to number, lenient": c("c").cast(pl.Int64, strict=False),
    "str.head with a text length": c("s").str.head(c("s")),
    "str.head with a float length": c("s").str.head(c("f")),
    "when with branches of two types": pl.when(c("b")).then(c("s")).otherwise(c("l")),
    "fill_null of text with a list": c("s").fill_null(c("l")),
    "integer and text": c("i") & c("s"),
    "sum of lists": pl.sum_horizontal(c("l"), c("l")),
    "concat_str with a duration": pl.concat_str(c("s"), c("du")),
    "starts_with a list": c("s").str.starts_with(c("l")),
    "to_integer with a base from a column": c("s").str.to_integer(base=c("i"), strict=False),
    "sqrt of a category": c("c").sqrt(),
}


def _outcome(df: pl.DataFrame, step: pl.Expr) -> str:
    try:
        q = dpf.Query(df, privacy_unit="user").with_columns(o=step)
    except DataError:
        return "refused"
    q = q.filter(c("o").is_not_null() | c("o").is_null())  # the step runs on every row
    try:
        q.agg(dpf.count(), max_rows=1).release(epsilon=1.0)
    except DataError:
        return "failed"
    return "answered"


@pytest.mark.parametrize("name", list(STEPS))
def test_a_step_that_casts_on_a_row_is_refused_on_both_neighbours(name: str) -> None:
    assert {_outcome(df, STEPS[name]) for df in (BENIGN, HOSTILE)} == {"refused"}


def test_steps_of_one_kind_still_answer_on_both_neighbours() -> None:
    steps = [
        c("i") + c("f"),
        pl.when(c("b")).then(c("i")).otherwise(c("f")),
        c("s").str.head(c("i")),
        pl.concat_str(c("s"), c("i").cast(pl.String)),
        c("f").fill_null(c("i")),
        c("s").cast(pl.Int64, strict=False),
        c("i").cast(pl.String),
    ]
    for step in steps:
        assert {_outcome(df, step) for df in (BENIGN, HOSTILE)} == {"answered"}


def test_a_category_compared_with_text_still_answers() -> None:
    df = BENIGN.with_columns(c=pl.lit("a", dtype=pl.Categorical))
    assert _outcome(df, (c("c") == "a") | (c("c") < c("s"))) == "answered"
