"""Synthesizer.fit on a Spark DataFrame: the table is encoded by Spark SQL and every marginal is
one Spark aggregation; the model fitted on the driver is the one fitted from the same data in
memory, for the same seed (the same noisy marginals, the same network, the same samples)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from dpkit.accounting import ZCDP, Accountant
from dpkit.errors import DataError
from dpkit.release import Categorical, Domain, Numeric, Synthesizer

pytest.importorskip("pyspark")


def _data() -> pl.DataFrame:
    g = np.random.default_rng(7)
    n = 2500
    a = g.choice(["x", "y", "z", "w"], n)  # "w" is not a category: goes to "other"
    age = np.round(g.normal(40, 15, n))  # beyond [18, 90] too: clamped
    age[:5] = [np.inf, -np.inf, 18.5, 89.5, 0.0]  # ±inf, half-way ties of the integer grid
    score = g.uniform(-0.2, 1.2, n)
    score[:3] = [0.0, 0.5, 1.0]  # atoms and edges
    level = g.integers(0, 5, n)  # 4 is not listed, no other: the record is dropped
    return pl.DataFrame({"a": a, "age": age, "score": score, "level": level})


def _domain() -> Domain:
    return Domain(
        {
            "a": Categorical(["x", "y", "z", "other"], other="other"),
            "age": Numeric(18, 90, bins=6, integer=True),
            "score": Numeric(0, 1, bins=4, atoms=[0, 1]),
            "level": Categorical([0, 1, 2, 3.0]),
        }
    )


def test_fit_on_spark_equals_fit_in_memory(spark: Any) -> None:
    method = "mst"  # AIM reads marginals the same way (one job each), only more of them
    df = _data()
    sdf = spark.createDataFrame(df.to_arrow()).repartition(3)
    syn = Synthesizer(_domain(), epsilon=2.0, delta=1e-6, method=method)
    a, b = syn.fit(df, rng=5), syn.fit(sdf, rng=5)
    assert a.n_estimate == b.n_estimate and a.measured == b.measured
    assert any(len(m) == 2 for m in a.measured)
    sa, sb = a.sample(400, rng=9, output="dict"), b.sample(400, rng=9, output="dict")
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)


def test_missing_values_and_schema_on_spark(spark: Any) -> None:
    df = _data().with_columns(
        pl.when(pl.col("level") == 2).then(None).otherwise(pl.col("score")).alias("score")
    )
    sdf = spark.createDataFrame(df.to_arrow())
    syn = Synthesizer(_domain(), epsilon=1.0, delta=1e-6, method="independent")
    acct = Accountant(ZCDP(rho=10.0))
    with pytest.raises(DataError, match="missing value"):
        syn.fit(sdf, accountant=acct)
    assert not acct.ledger
    a = syn.fit(df, rng=2, missing="drop")
    b = syn.fit(sdf, rng=2, missing="drop")
    assert a.n_estimate == b.n_estimate
    with pytest.raises(DataError, match="lacks"):
        syn.fit(sdf.drop("age"), accountant=acct)
    with pytest.raises(DataError, match="numeric"):
        syn.fit(sdf.withColumn("age", sdf["a"]), accountant=acct)
    assert not acct.ledger


def test_all_null_column_on_spark_is_missing_as_in_memory(spark: Any) -> None:
    # Spark infers NullType from the values when every one is null: the column is missing
    # everywhere (refused under "raise", every record dropped under "drop"), as in memory,
    # not refused for its type (which would depend on the records)
    from pyspark.sql.types import LongType, NullType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("a", StringType()),
            StructField("level", LongType()),
            StructField("s", NullType()),
        ]
    )
    sdf = spark.createDataFrame([("x", 1, None), ("y", 2, None)], schema)
    df = pl.DataFrame({"a": ["x", "y"], "level": [1, 2], "s": [None, None]})
    dom = Domain(
        {
            "a": Categorical(["x", "y"]),
            "level": Categorical([1, 2]),
            "s": Categorical(["u", "v"]),
        }
    )
    syn = Synthesizer(dom, epsilon=1.0, delta=1e-6, method="independent")
    acct = Accountant(ZCDP(rho=10.0))
    with pytest.raises(DataError, match="missing value"):
        syn.fit(sdf, accountant=acct)
    assert not acct.ledger
    a, b = syn.fit(df, rng=2, missing="drop"), syn.fit(sdf, rng=2, missing="drop")
    assert a.n_estimate == b.n_estimate and a.measured == b.measured


def test_wide_table_on_spark_equals_fit_in_memory(spark: Any) -> None:
    # Spark groups by at most 64 columns in one GROUPING SETS job: a 70-column table is
    # counted in several jobs, with the same counts as in memory
    d = 70
    df = pl.DataFrame({f"v{i}": [0, 1, i % 2, 1] for i in range(d)})
    dom = Domain({f"v{i}": Categorical([0, 1]) for i in range(d)})
    syn = Synthesizer(dom, epsilon=1.0, delta=1e-6, method="independent")
    a, b = syn.fit(df, rng=4), syn.fit(spark.createDataFrame(df.to_arrow()), rng=4)
    assert a.n_estimate == b.n_estimate and a.measured == b.measured
