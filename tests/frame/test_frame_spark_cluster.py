"""On a real Spark standalone cluster (a master and two workers on loopback, separate JVMs),
with dpkit shipped to the executors as a zip: the same exact aggregates as Polars and NumPy.

The cluster is started once per test run (``tests/spark_sessions.py``); local mode keeps the
other Spark tests fast.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
import dpkit.stats as st

pytest.importorskip("pyspark")

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)


def test_executors_import_dpkit_from_the_shipped_zip(spark_cluster: Any) -> None:
    def _where_dpkit(_: object) -> list[str]:  # nested: pickled by value (no test module there)
        import dpkit
        import dpkit.frame._rowhash as rowhash

        return [dpkit.__file__ or "", rowhash.__file__ or ""]

    sc = spark_cluster.sparkContext
    seen = sc.parallelize(range(4), 4).map(_where_dpkit).collect()
    assert len(seen) == 4
    for paths in seen:
        for p in paths:
            assert "dpkit.zip" in p and "/src/dpkit" not in p, p
    executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    assert executors == 2


def test_bounded_aggregates_on_the_cluster_equal_polars(spark_cluster: Any) -> None:
    g = np.random.default_rng(2)
    n = 1500
    df = pl.DataFrame(
        {
            "user": g.integers(0, 300, n),
            "city": g.choice(["a", "b", "c", "d"], n),
            "x": np.round(g.uniform(-10, 110, n), 3),
        }
    )
    sdf = spark_cluster.createDataFrame(df.to_arrow()).repartition(4)
    aggs = [dpf.count(), dpf.sum("x", bounds=(0, 100)), dpf.quantiles("x", 0.5, bounds=(0, 100))]
    kw = {"max_groups": 2, "max_rows": 2, "max_rows_per_unit": 3}
    a = dpf.Query(df, privacy_unit="user").group_by("city", **kw).agg(*aggs)
    b = dpf.Query(sdf, privacy_unit="user").group_by("city", **kw).agg(*aggs)
    pa, sb = a.bounded_aggregates(seed=8), b.bounded_aggregates(seed=8)
    assert isinstance(pa, tuple) and isinstance(sb, tuple)
    assert pa[0].equals(sb[0].select(pa[0].columns)) and pa[1].equals(sb[1])


def test_statistics_on_the_cluster_equal_numpy(spark_cluster: Any) -> None:
    import pyarrow as pa

    x = np.random.default_rng(4).normal(50, 25, 4000)
    sdf = spark_cluster.createDataFrame(pa.table({"x": x})).repartition(4)
    kw: dict[str, Any] = {"epsilon": 1.0, "rng": 6}
    assert st.mean(sdf, bounds=(0, 100), **kw).value == st.mean(x, bounds=(0, 100), **kw).value
    assert st.var(sdf, bounds=(0, 100), **kw).value == st.var(x, bounds=(0, 100), **kw).value
    h = {"bins": [0, 20, 50, 80, 100], **kw}
    assert np.array_equal(st.histogram(sdf, **h).value, st.histogram(x, **h).value)
