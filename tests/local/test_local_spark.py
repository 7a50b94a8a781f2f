"""Reports stored in Spark are aggregated where they are: the executors check and count them with
the protocol's own code and the driver adds the integer counts, so the estimate equals the
in-memory one exactly, and a malformed report is refused without changing anything."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpkit.errors import DataError
from dpkit.local import GRR, OLH, OUE

pytest.importorskip("pyspark")

pytestmark = pytest.mark.filterwarnings(  # pyspark's notice about the installed pandas
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)


def _spark_reports(spark: Any, values: Any) -> Any:
    import pyarrow as pa

    if values.ndim == 1:
        col = pa.array(values.astype(np.int64))
    else:
        col = pa.array(values.astype(np.int64).tolist(), type=pa.list_(pa.int64()))
    return spark.createDataFrame(pa.table({"report": col})).repartition(3)


def test_estimates_from_spark_equal_in_memory(spark: Any) -> None:
    x = np.random.default_rng(0).integers(0, 6, 3000)
    for oracle in (GRR(epsilon=1.0, k=6), OUE(epsilon=1.0, k=6), OLH(epsilon=1.0, k=6)):
        reports = oracle.randomize(x, rng=1)
        sdf = _spark_reports(spark, reports.values)
        c_mem, n_mem = oracle.support_counts(reports)
        c_spark, n_spark = oracle.support_counts(sdf)
        assert n_mem == n_spark == x.size and np.array_equal(c_mem, c_spark), oracle.name
        a, b = oracle.estimate(reports), oracle.estimate(sdf)
        assert np.array_equal(a.counts, b.counts)
        agg = oracle.aggregator()
        agg.add(sdf)
        agg.add(reports)
        assert agg.n == 2 * x.size


def test_malformed_reports_in_spark_change_nothing(spark: Any) -> None:
    grr = GRR(epsilon=1.0, k=4)
    agg = grr.aggregator()
    agg.add(grr.randomize([0, 1, 2, 3] * 50, rng=0))
    before = (agg.n, agg.estimate().counts.copy())
    bad = _spark_reports(spark, np.array([0, 1, 7, 2]))  # 7 is not a code of k = 4
    with pytest.raises(DataError, match="Spark job counting"):
        agg.add(bad)
    with pytest.raises(DataError, match="one column"):
        agg.add(bad.withColumn("other", bad["report"]))
    assert agg.n == before[0] and np.array_equal(agg.estimate().counts, before[1])
