"""The Spark engine gives bit-identical bounded aggregates and the same release shape.

The local SparkSession (``local[2]``) of ``tests/conftest.py``, shared by the run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError

pyspark = pytest.importorskip("pyspark")

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)


def _table() -> pl.DataFrame:
    g = np.random.default_rng(0)
    n = 4000
    return pl.DataFrame(
        {
            "user": g.integers(0, 400, n),
            "city": g.choice(["a", "b", "c", "d", "e"], n),
            "x": np.round(g.uniform(-10, 110, n), 4),
        }
    )


def test_bounded_aggregates_bit_identical(spark: Any) -> None:
    df = _table()
    sdf = spark.createDataFrame(df.to_arrow())
    aggs = [
        dpf.count(),
        dpf.count_units(),
        dpf.sum("x", bounds=(0, 100)),
        dpf.var("x", bounds=(0, 100)),
    ]
    # fast path (L∞, L0) with weighted-Gaussian weights
    a = dpf.Query(df, privacy_unit="user").group_by("city", max_groups=2, max_rows=2).agg(*aggs)
    b = dpf.Query(sdf, privacy_unit="user").group_by("city", max_groups=2, max_rows=2).agg(*aggs)
    pa, sb = a.bounded_aggregates(seed=3), b.bounded_aggregates(seed=3)
    assert isinstance(pa, pl.DataFrame) and isinstance(sb, pl.DataFrame)
    assert pa.equals(sb.select(pa.columns))
    # row path (L1) with a quantile tree and a histogram
    more = [*aggs, dpf.quantiles("x", 0.5, bounds=(0, 100)), dpf.histogram("x", bins=[0, 50, 100])]
    kw = {"max_groups": 3, "max_rows": 2, "max_rows_per_unit": 4}
    c = dpf.Query(df, privacy_unit="user").group_by("city", **kw).agg(*more)
    d = dpf.Query(sdf, privacy_unit="user").group_by("city", **kw).agg(*more)
    pc, sd = c.bounded_aggregates(seed=5), d.bounded_aggregates(seed=5)
    assert isinstance(pc, tuple) and isinstance(sd, tuple)
    assert pc[0].equals(sd[0].select(pc[0].columns))
    assert pc[1].equals(sd[1])


def test_one_row_per_pair_bit_identical(spark: Any) -> None:
    """L∞ = 1: Spark's min_by over the row hash and the in-memory sorted plan keep the same row
    of every pair; with weighted-Gaussian weights (L0 = 3) and two value transforms."""
    df = _table()
    sdf = spark.createDataFrame(df.to_arrow())
    aggs = [dpf.count(), dpf.sum("x", bounds=(0, 100)), dpf.mean("x", bounds=(0, 100))]
    a = dpf.Query(df, privacy_unit="user").group_by("city", max_groups=3, max_rows=1).agg(*aggs)
    b = dpf.Query(sdf, privacy_unit="user").group_by("city", max_groups=3, max_rows=1).agg(*aggs)
    for seed in (1, 2):
        pa, sb = a.bounded_aggregates(seed=seed), b.bounded_aggregates(seed=seed)
        assert isinstance(pa, pl.DataFrame) and isinstance(sb, pl.DataFrame)
        assert pa.equals(sb.select(pa.columns))
        assert int(pa["__weight"].sum()) > 0


def test_row_units_bit_identical_and_order_free(spark: Any) -> None:
    """Each row its own unit: a row's integers depend on its content and occurrence among
    identical rows, not on its position (Spark's row ids depend on the partitioning), so Spark
    and Polars agree, and a reordered input gives the same totals."""
    df = _table().drop("user")
    df = pl.concat([df, df.head(50)])  # identical rows too
    aggs = [dpf.count(), dpf.sum("x", bounds=(0, 100)), dpf.mean("x", bounds=(0, 100))]
    a = dpf.Query(df, privacy_unit=None).group_by("city").agg(*aggs)
    pa = a.bounded_aggregates(seed=4)
    for frame in (df, df.reverse()):
        sdf = spark.createDataFrame(frame.to_arrow()).repartition(3)
        b = dpf.Query(sdf, privacy_unit=None).group_by("city").agg(*aggs)
        sb = b.bounded_aggregates(seed=4)
        assert isinstance(pa, pl.DataFrame) and isinstance(sb, pl.DataFrame)
        assert pa.equals(sb.select(pa.columns))


def test_release_same_shape_and_errors(spark: Any) -> None:
    df = _table()
    sdf = spark.createDataFrame(df.to_arrow())
    aggs = [dpf.count(), dpf.mean("x", bounds=(0, 100))]
    pub = ["a", "b", "zz"]
    a = (
        dpf.Query(df, privacy_unit="user")
        .group_by("city", public_keys=pub, max_groups=1, max_rows=1)
        .agg(*aggs)
    )
    b = (
        dpf.Query(sdf, privacy_unit="user")
        .group_by("city", public_keys=pub, max_groups=1, max_rows=1)
        .agg(*aggs)
    )
    ra, rb = a.release(epsilon=1.0, rng=7), b.release(epsilon=1.0, rng=7)
    # same seed, same hash key, same exact totals: the same noise, so the same release
    assert ra.frame.equals(rb.frame)
    with pytest.raises(DataError):
        dpf.Query(sdf, privacy_unit="usr").group_by(
            "city", public_keys=pub, max_groups=1, max_rows=1
        ).agg(*aggs).release(epsilon=1.0)
    with pytest.raises(DataError):
        dpf.Query(sdf, privacy_unit="user").filter(pl.col("x") > 0)
    # A null privacy unit is no unit: such rows are dropped before bounding, never refused
    # (a refusal revealed that one exists); the release and the charge are those of the table
    # without them, as on Polars (tests/frame/test_frame_null_units.py).
    from dpkit.accounting import Accountant, PureDP

    extra = pl.DataFrame({"user": [None, None], "city": ["a", "zz"], "x": [float("nan"), 1e9]})
    nulls = pl.concat([df, extra.cast(dict(df.schema))], how="diagonal_relaxed")
    acct = Accountant(PureDP(epsilon=5.0))
    g = (
        dpf.Query(spark.createDataFrame(nulls.to_arrow()), privacy_unit="user")
        .group_by("city", public_keys=pub, max_groups=1, max_rows=1)
        .agg(*aggs)
    )
    assert g.release(epsilon=1.0, accountant=acct, rng=7).frame.equals(ra.frame)
    assert [e.event for e in acct.ledger] == [ra.event]


def test_spark_job_failures_are_data_errors_and_charge_nothing(spark: Any, tmp_path: Any) -> None:
    """A real failing Spark job (a Parquet file deleted after it was planned; a transformation
    that fails on a row and quotes it) is a DataError that quotes nothing, and charges nothing."""
    from pyspark.sql import functions as f

    from dpkit.accounting import Accountant, PureDP

    path = str(tmp_path / "t.parquet")
    _table().write_parquet(path)
    sdf = spark.read.parquet(path)  # the file list and schema are read now
    os.remove(path)
    acct = Accountant(PureDP(epsilon=5.0))
    q = dpf.Query(sdf, privacy_unit="user").group_by(
        "city", public_keys=["a", "b"], max_groups=1, max_rows=1
    )
    with pytest.raises(DataError, match="Spark job") as err:
        q.agg(dpf.count()).release(epsilon=1.0, accountant=acct)
    assert "t.parquet" not in str(err.value) and err.value.__cause__ is None
    assert not acct.ledger
    secret = "SECRET-7731"
    failing = spark.createDataFrame(_table().to_arrow()).withColumn(
        "x",
        f.when(
            f.col("x") > 109, f.raise_error(f.concat(f.lit(secret), f.col("x").cast("string")))
        ).otherwise(f.col("x")),
    )
    g = dpf.Query(failing, privacy_unit="user").group_by("city", max_groups=1, max_rows=1)
    with pytest.raises(DataError, match="Spark job") as err2:
        g.agg(dpf.sum("x", bounds=(0, 100))).release(epsilon=1.0, delta=1e-6, accountant=acct)
    assert secret not in str(err2.value) and "109." not in str(err2.value)
    assert not acct.ledger


def test_missing_policy_is_the_same_on_spark(spark: Any) -> None:
    """missing="raise" (default) refuses a null value before any charge, as on Polars;
    missing="drop" drops the same rows (bit-identical bounded aggregates)."""
    from dpkit.accounting import Accountant, PureDP

    df = _table().with_columns(
        pl.when(pl.col("user") == 7).then(None).otherwise(pl.col("x")).alias("x")
    )
    sdf = spark.createDataFrame(df.to_arrow())
    aggs = [dpf.count(), dpf.mean("x", bounds=(0, 100))]
    pub = ["a", "b", "c", "d", "e"]
    acct = Accountant(PureDP(epsilon=5.0))
    g = (
        dpf.Query(sdf, privacy_unit="user")
        .group_by("city", public_keys=pub, max_groups=1, max_rows=1)
        .agg(*aggs)
    )
    with pytest.raises(DataError, match="missing value"):
        g.release(epsilon=1.0, accountant=acct)
    assert not acct.ledger
    a, b = (
        dpf.Query(d, privacy_unit="user", missing="drop")
        .group_by("city", public_keys=pub, max_groups=1, max_rows=1)
        .agg(*aggs)
        .bounded_aggregates(seed=4)
        for d in (df, sdf)
    )
    assert isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame)
    assert a.equals(b.select(a.columns))


def test_identity_is_fixed_when_the_query_is_made(spark: Any) -> None:
    """As on Polars: the unit's identity column is added by Query (reserved names refused from
    the schema, no job), and a query without keys bounds the same rows on both engines."""
    from dpkit.frame._table import UNIT_ID

    df = _table()
    sdf = spark.createDataFrame(df.to_arrow())
    with pytest.raises(DataError, match="reserved"):
        dpf.Query(sdf.withColumnRenamed("x", UNIT_ID), privacy_unit="user")
    with pytest.raises(DataError, match="unknown"):
        dpf.Query(sdf, privacy_unit="usr")
    aggs = (dpf.count(), dpf.sum("x", bounds=(0, 100)))
    a = dpf.Query(df, privacy_unit="user").agg(*aggs, max_rows=2).bounded_aggregates(seed=3)
    b = dpf.Query(sdf, privacy_unit="user").agg(*aggs, max_rows=2).bounded_aggregates(seed=3)
    assert isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame)
    assert a.equals(b.select(a.columns))


def test_row_hash_and_kept_rows_are_the_same_on_spark(spark: Any) -> None:
    """The executors compute dpkit's row hash (not Spark's or their Polars'): the same words
    for every supported type as the driver, hence the same rows kept by every bound."""
    import datetime as dt

    from dpkit.frame._rowhash import hash_series

    key = (0x0706050403020100, 0x0F0E0D0C0B0A0908)
    rows = pl.DataFrame(
        {
            "i": pl.Series([0, -1, 2**62, None, 7], dtype=pl.Int64),
            "f": pl.Series([0.0, -0.0, float("nan"), 1.5, None], dtype=pl.Float64),
            "s": pl.Series(["", "a", "é", None, "dpkit"], dtype=pl.String),
            "b": pl.Series([True, False, None, True, False]),
            "d": [dt.date(1970, 1, 1), dt.date(2024, 2, 29), None, None, dt.date(2000, 1, 1)],
        }
    )
    names = rows.columns

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            frame = pl.from_arrow(b)
            assert isinstance(frame, pl.DataFrame)
            yield from frame.select(hash_series(names, key).alias("h")).to_arrow().to_batches()

    sdf = spark.createDataFrame(rows.to_arrow()).repartition(2)
    out = sdf.mapInArrow(run, "h long").toArrow().column("h").to_pylist()
    want = rows.select(hash_series(names, key).alias("h"))["h"].to_list()
    assert sorted(out) == sorted(want)
    assert 0x4BD9029C18389004 in out  # the first pinned vector, on an executor
    # kept rows, through the public API: each row its own key, so a key's count says whether
    # its row survived (L0 by pair hash; then L1 by row hash)
    df = _table().head(600).with_row_index("rid").with_columns(pl.col("rid").cast(pl.Int64))
    sdf = spark.createDataFrame(df.to_arrow())
    for kw in (
        {"max_groups": 1, "max_rows": 1},
        {"max_groups": 3, "max_rows": 1, "max_rows_per_unit": 2},
    ):
        kept = []
        for d in (df, sdf):
            q = dpf.Query(d, privacy_unit="user").group_by("rid", **kw).agg(dpf.count())
            t = q.bounded_aggregates(seed=11)
            t = t[0] if isinstance(t, tuple) else t
            kept.append(sorted(t.filter(pl.col("__rows") > 0)["rid"].to_list()))
        assert kept[0] == kept[1]
        assert 0 < len(kept[0]) < df.height
