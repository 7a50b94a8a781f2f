"""The Spark engine's row step in Spark SQL (all but the keyed hash) equals the Polars ``prepare``
on the values where floating point could tell them apart.

Values on and beyond the bounds, ±inf, −0.0, NaN and null (dropped), integer and float columns;
float keys with −0.0, 0.0 and NaN (one group each for ±0 and NaN, one label); every value
transform (plain sums, centred means, squared variances), the quantile tree's buckets and a
histogram's edges. Local-mode Spark (the ``spark`` fixture of ``tests/conftest.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.frame._finish import _bucket_matrix, public_totals

pytest.importorskip("pyspark")

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)


def _edge_table() -> pl.DataFrame:
    g = np.random.default_rng(11)
    n = 1500
    x = np.round(g.uniform(-20, 120, n), 3)
    special = [0.0, -0.0, 100.0, 100.0000001, -1e-300, np.inf, -np.inf, np.nan, 50.0, 99.9999]
    x[: len(special)] = special
    key = g.choice([-0.0, 0.0, 1.5, np.nan], n)
    df = pl.DataFrame(
        {
            "user": g.integers(0, 300, n),
            "k": key,
            "x": x,
            "i": g.integers(-50, 150, n).astype(np.int32),
        }
    )
    # nulls in a value column: dropped rows (null keys: the test below)
    return df.with_columns(
        pl.when(pl.col("x") > 118).then(None).otherwise(pl.col("x")).alias("x"),
    )


def test_spark_sql_prepare_equals_polars_prepare(spark: Any) -> None:
    df = _edge_table()
    sdf = spark.createDataFrame(df.to_arrow())
    aggs = [
        dpf.count(),
        dpf.sum("x", bounds=(0, 100)),
        dpf.mean("i", bounds=(-10, 130)),
        dpf.var("x", bounds=(-5.5, 100.25)),
        dpf.quantiles("x", [0.25, 0.5], bounds=(0, 100)),
        dpf.histogram("i", bins=[-50, 0, 33.3, 100, 150]),
    ]
    kw = {"max_groups": 2, "max_rows": 3, "max_rows_per_unit": 5}
    a = dpf.Query(df, privacy_unit="user", missing="drop").group_by("k", **kw).agg(*aggs)
    b = dpf.Query(sdf, privacy_unit="user", missing="drop").group_by("k", **kw).agg(*aggs)
    pa, sb = a.bounded_aggregates(seed=21), b.bounded_aggregates(seed=21)
    assert isinstance(pa, tuple) and isinstance(sb, tuple)
    order = [pl.col("k").is_nan(), "k"]
    ta, tb = pa[0].sort(order), sb[0].select(pa[0].columns).sort(order)
    assert ta.height == 3  # ±0 one group, 1.5, NaN
    assert ta.equals(tb)
    labels = {str(v) for v in ta["k"].to_list()}
    assert "0.0" in labels and "-0.0" not in labels  # +0.0, not some row's −0.0
    cols = pa[1].columns
    assert pa[1].sort(cols).equals(sb[1].select(cols).sort(cols))


def test_null_key_is_a_group_in_the_row_path_on_both_engines(spark: Any) -> None:
    # A null key value is a group of its own (docs/frame.md): in the row path
    # (max_rows_per_unit, quantiles, histograms) its rows and bucket counts must be kept, and
    # the two engines must agree. The key joins once matched nulls to nothing (rows 0, sums 0,
    # and on Spark the group's bucket counts dropped).
    df = pl.DataFrame(
        {
            "user": [1, 1, 2, 2, 3, 3, 4],
            "k": ["a", None, None, None, "a", None, "b"],
            "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        }
    )
    sdf = spark.createDataFrame(df.to_arrow())
    aggs = [dpf.count(), dpf.sum("x", bounds=(0, 10)), dpf.histogram("x", bins=[0, 5, 10])]
    kw = {"max_groups": 2, "max_rows": 2, "max_rows_per_unit": 3}
    a = dpf.Query(df, privacy_unit="user").group_by("k", **kw).agg(*aggs)
    b = dpf.Query(sdf, privacy_unit="user").group_by("k", **kw).agg(*aggs)
    pa, sb = a.bounded_aggregates(seed=3), b.bounded_aggregates(seed=3)
    assert isinstance(pa, tuple) and isinstance(sb, tuple)
    ta, tb = pa[0].sort("k"), sb[0].select(pa[0].columns).sort("k")
    null = ta.filter(pl.col("k").is_null())
    assert null.height == 1
    assert null["__rows"].item() == 4  # user 1: 1, user 2: 2, user 3: 1
    assert ta.equals(tb)
    bc = pa[1].columns
    assert pa[1].sort(bc, nulls_last=True).equals(sb[1].select(bc).sort(bc, nulls_last=True))
    assert pa[1].filter(pl.col("k").is_null())["__count"].sum() == 4
    # the release's joins to the released keys match the null key too
    totals, buckets = public_totals(pa[0], pa[1], pl.DataFrame({"k": [None, "a"]}), ["k"])
    assert totals.sort("k")["__rows"].to_list() == [4, 2]
    hist = next(m for m in a._measures() if m.kind == "bucket")
    assert _bucket_matrix(buckets, totals.sort("k"), ["k"], hist).sum(axis=1).tolist() == [4, 2]
