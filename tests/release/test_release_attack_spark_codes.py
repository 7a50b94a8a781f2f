"""Attacks on the synthesizer's Spark encoding: a categorical value must get the cell that
:meth:`Domain.encode` gives it in memory, bit for bit.

A numeric category that no double equals exactly (an integer beyond ``2**53``) was compared on
Spark as ``double(x) == double(category)``: the value ``2**53`` matched the category
``2**53 + 1`` (Python, hence the in-memory path, compares exactly and sends it to ``other``),
so the same data gave another marginal, hence another model, on Spark.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from dpkit.release import Categorical, Domain
from dpkit.release._spark_codes import encode_spark

pytest.importorskip("pyspark")


def test_unrepresentable_integer_category_matches_exactly(spark: Any) -> None:
    big = 2**53 + 1
    dom = Domain({"c": Categorical([big, 1.5, "other"], other="other")})
    df = pl.DataFrame({"c": [float(2**53), 1.5, 3.0]})
    want = dom.encode(df)
    codes = encode_spark(dom, spark.createDataFrame(df.to_arrow()), "raise")
    try:
        got = codes.marginal((3,), [0])
    finally:
        codes.release()
    assert np.array_equal(got, np.bincount(want[:, 0], minlength=3))


def test_infinite_and_fractional_categories_match_as_in_memory(spark: Any) -> None:
    from fractions import Fraction

    dom = Domain({"c": Categorical([float("inf"), Fraction(1, 3), 2, "other"], other="other")})
    for values in ([float("inf"), 1 / 3, 2.0, -1.0], [2, 3, 2**62]):
        df = pl.DataFrame({"c": values})
        want = np.bincount(dom.encode(df)[:, 0], minlength=4)
        codes = encode_spark(dom, spark.createDataFrame(df.to_arrow()), "raise")
        try:
            assert np.array_equal(codes.marginal((4,), [0]), want)
        finally:
            codes.release()
