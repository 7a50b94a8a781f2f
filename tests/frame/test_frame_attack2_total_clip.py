"""``clip`` with a bound of another type failed on a non-empty input only.

``pl.col("i").clip(pl.col("s"))`` (a number clipped by a text column; also a date or an
unsigned integer by text or a date) passes Polars' schema check and fails when it meets a row,
so a query with it failed exactly when some record survived the steps before it (a filter:
"does anyone earn more than x?"), and answered on a table where none did. ``check_total`` now
accepts a ``clip`` only when its bounds have the input's type (or both are numeric, or both
temporal), from the schema alone.
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError

DF = pl.DataFrame({"user": [1, 2], "i": [1, 900], "s": ["a", "b"], "f": [0.5, 2.5]})


@pytest.mark.parametrize("threshold", [0, 5_000])  # some record passes the filter / none does
def test_clip_by_text_refused_whatever_the_data(threshold: int) -> None:
    q = dpf.Query(DF, privacy_unit="user").filter(pl.col("i") > threshold)
    with pytest.raises(DataError, match="clip"):
        q.with_columns(o=pl.col("i").clip(pl.col("s")))


def test_numeric_clip_still_answers() -> None:
    q = dpf.Query(DF, privacy_unit="user").with_columns(
        o=pl.col("i").clip(pl.col("f"), 100), p=pl.col("f").clip(0, pl.col("i"))
    )
    q = q.filter(pl.col("o").is_not_null() & pl.col("p").is_not_null())
    q.agg(dpf.count(), max_rows=1).release(epsilon=1.0)
