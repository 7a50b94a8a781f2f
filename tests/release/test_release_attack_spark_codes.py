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


@pytest.mark.parametrize("missing", ["drop", "raise"])
def test_a_record_that_fails_the_job_is_refused_before_the_charge(spark: Any, missing: str) -> None:
    """Under ``"drop"`` the encoded table was cached outside any guard: a record that makes the
    input fail (here a lineage that raises on one value, as an ANSI cast of a bad string does)
    escaped as Spark's own exception, whose message may quote the record; and a cache that did
    not read the records left the failure to the first marginal, after the charge. Now every
    record is encoded before the charge, and a failure is a DataError that charges nothing."""
    from pyspark.sql import functions as f

    from dpkit.accounting import ZCDP, Accountant
    from dpkit.errors import DataError
    from dpkit.release import Numeric, Synthesizer

    df = spark.createDataFrame(pl.DataFrame({"x": [0.1, 0.5, 0.9, 7.0]}).to_arrow())
    bad = df.select(
        f.when(f.col("x") > 5, f.raise_error(f.lit("bad"))).otherwise(f.col("x")).alias("x")
    )
    syn = Synthesizer(
        Domain({"x": Numeric(0, 1, bins=2)}), epsilon=1.0, delta=1e-6, method="independent"
    )
    acct = Accountant(ZCDP(rho=10.0))
    with pytest.raises(DataError):
        syn.fit(bad, accountant=acct, rng=0, missing=missing)
    assert not acct.ledger
