"""A step that looks at other rows is refused when it is added (from the expression alone).

The guarantee of :meth:`GroupedQuery.release` holds for row-wise steps only, which the docs left
to the caller. ``filter(pl.col("x") > pl.col("x").mean())`` is a plain-looking predicate: one
added row with a large ``x`` moves the mean past every other row, and the bounded count moved by
9 where one row may move it by 1 (a deterministic distinguisher). Windows, ranks, shifts, row
numbers, membership in another column's values and Python functions (which can keep state) are
the same. Every step expression is now checked, node by node, with Polars' own row-separability
and length-preservation analysis, before any data is read.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError

Step = Callable[[dpf.Query], dpf.Query]


def _count(df: pl.DataFrame, step: Step) -> int:
    q = step(dpf.Query(df, privacy_unit=None))
    out = q.agg(dpf.count()).bounded_aggregates(seed=1)
    return int(out["__rows"][0])


def test_a_predicate_reading_the_mean_is_refused() -> None:
    step: Step = lambda q: q.filter(pl.col("x") > pl.col("x").mean())  # noqa: E731
    base = pl.DataFrame({"x": [0.0] * 10 + [1.0] * 10})
    neighbour = pl.concat([base, pl.DataFrame({"x": [100.0]})])
    with pytest.raises(DataError, match="row-wise"):
        moved = abs(_count(base, step) - _count(neighbour, step))
        assert moved <= 1, f"one added row moved the bounded count by {moved}"


x = pl.col("x")
NOT_ROWWISE: dict[str, Step] = {
    "mean": lambda q: q.filter(x > x.mean()),
    "fill with median": lambda q: q.with_columns(y=x.fill_null(x.median())),
    "window": lambda q: q.with_columns(y=x.sum().over("g")),
    "rank": lambda q: q.filter(x.rank() <= 3),
    "shift": lambda q: q.with_columns(y=x.shift(1)),
    "row number": lambda q: q.filter(pl.int_range(pl.len()) < 5),
    "length": lambda q: q.with_columns(y=pl.len()),
    "unique": lambda q: q.filter(x.is_unique()),
    "other column's values": lambda q: q.filter(x.is_in(pl.col("g").implode())),
    "cumulative": lambda q: q.with_columns(y=x.cum_sum()),
    "min-max scaling": lambda q: q.with_columns(y=(x - x.min()) / (x.max() - x.min())),
    "filtered column": lambda q: q.with_columns(y=x.filter(x > 0)),
    "series literal": lambda q: q.with_columns(y=pl.lit(pl.Series([1, 2, 3]))),
    "series": lambda q: q.with_columns(y=pl.Series([1, 2])),
    "array": lambda q: q.with_columns(y=np.array([1, 2])),
    "python function": lambda q: q.with_columns(y=x.map_batches(lambda s: s.shift(1))),
    "python element function": lambda q: q.with_columns(
        y=x.map_elements(lambda v: v, return_dtype=pl.Float64)
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_ROWWISE))
def test_a_step_that_reads_other_rows_is_refused(name: str) -> None:
    q = dpf.Query(pl.DataFrame({"x": [1.0, 2.0], "g": [1.0, 2.0]}), privacy_unit=None)
    with pytest.raises(DataError, match="row-wise"):
        NOT_ROWWISE[name](q)


ROWWISE: dict[str, Step] = {
    "arithmetic": lambda q: q.with_columns(y=x * 2 + 1, z=pl.lit(3)),
    "when": lambda q: q.with_columns(y=pl.when(x > 1).then(x).otherwise(0.0)),
    "cast and clip": lambda q: q.with_columns(y=x.cast(pl.Int64, strict=False).clip(0, 5)),
    "membership in a list": lambda q: q.filter(x.is_in([1.0, 2.0])),
    "fill with a constant": lambda q: q.with_columns(y=x.fill_null(0.0)),
    "strings": lambda q: q.with_columns(s=pl.concat_str(x.cast(pl.String), pl.lit("!"))),
    "struct hash": lambda q: q.with_columns(h=pl.struct("x", "g").hash()),
    "two predicates": lambda q: q.filter(x > 0, pl.col("g") < 5),
    "unit column": lambda q: q.with_columns(g=x),
    "date literal": lambda q: q.with_columns(d=datetime.date(2020, 1, 1)),
}


@pytest.mark.parametrize("name", sorted(ROWWISE))
def test_row_wise_steps_are_accepted(name: str) -> None:
    df = pl.DataFrame({"x": [1.0, 2.0, 3.0], "g": [1.0, 2.0, 3.0]})
    assert _count(df, ROWWISE[name]) >= 0
