"""dpkit.stats on a Spark column: the same exact aggregates, hence the same release, bit for bit.

Spark computes the per-record fixed-point integers and their exact (DECIMAL) sums with SQL
expressions; the driver noises them with the code of the NumPy path. So for the same data and
seed, every statistic equals the NumPy one exactly (``==`` on floats and arrays), including on
values chosen to stress the float steps: ties at half a grid step, signed zeros, ±inf beyond the
bounds, integers beyond 2^53, and subnormals.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpkit.stats as st
from dpkit.accounting import Accountant, Neighbouring, PureDP
from dpkit.errors import DataError

pytest.importorskip("pyspark")


def _values() -> np.ndarray[Any, np.dtype[np.float64]]:
    g = np.random.default_rng(3)
    x = g.normal(40, 30, 3000)
    edge = [0.0, -0.0, 100.0, -1e300, 1e300, np.inf, -np.inf, 5e-324, 2.0**53 + 1, 49.5, 50.5]
    ties = np.arange(-5, 105) + 0.5  # halfway points of an integer grid: rint's ties
    return np.concatenate([x, edge, ties, np.round(x[:500], 1)])


def _frame(spark: Any, x: Any, name: str = "x") -> Any:
    return _arrow(spark, {name: x}).repartition(3)


def _arrow(spark: Any, columns: dict[str, Any]) -> Any:
    import pyarrow as pa

    return spark.createDataFrame(pa.table({k: pa.array(v) for k, v in columns.items()}))


@pytest.mark.parametrize("bounds", [(0.0, 100.0), (-7.25, 3.0), (-1e-3, 1e-3)])
def test_moments_are_bit_identical(spark: Any, bounds: tuple[float, float]) -> None:
    x = _values()
    sdf = _frame(spark, x)
    settings = ((1.0, 0.0), (0.5, 1e-7)) if bounds == (0.0, 100.0) else ((0.5, 1e-7),)
    for eps, dlt in settings:  # few Spark jobs: each statistic is one
        kw: dict[str, Any] = {"epsilon": eps, "delta": dlt, "rng": 11}
        assert st.count(sdf, **kw).value == st.count(x, **kw).value
        for f in (st.sum, st.mean, st.var, st.std):
            a, b = f(x, bounds=bounds, **kw), f(sdf, bounds=bounds, **kw)
            assert a.value == b.value and a.ci(0.05) == b.ci(0.05), f.__name__
        n_kw = {**kw, "n": x.size}
        assert st.mean(sdf, bounds=bounds, **n_kw).value == st.mean(x, bounds=bounds, **n_kw).value
    rep = {"epsilon": 1.0, "rng": 2, "neighbouring": Neighbouring.REPLACE}
    assert st.var(sdf, bounds=bounds, **rep).value == st.var(x, bounds=bounds, **rep).value


def test_clamped_sum_integers_are_the_numpy_ones(spark: Any) -> None:
    """The exact integers themselves, not only the released values."""
    from dpkit.stats._aggregate import clamped_sum

    x = _values()
    for bounds in ((0.0, 100.0), (-3.0, 1e9), (-(2.0**-30), 2.0**-30)):
        a, b = clamped_sum(x, bounds), clamped_sum(_frame(spark, x), bounds)
        assert (a.total, a.size, a.exponent) == (b.total, b.size, b.exponent)


def test_histograms_are_bit_identical(spark: Any) -> None:
    x = _values()
    bins = [-10.0, 0.0, 25.0, 49.5, 50.5, 100.0]  # data on the edges, the last edge closed
    kw: dict[str, Any] = {"epsilon": 1.0, "rng": 5}
    a, b = st.histogram(x, bins=bins, **kw), st.histogram(_frame(spark, x), bins=bins, **kw)
    assert np.array_equal(a.value, b.value)
    g = np.random.default_rng(1)
    xy = np.column_stack([g.uniform(0, 10, 2000), g.integers(0, 5, 2000).astype(float)])
    sxy = _arrow(spark, {"a": xy[:, 0], "b": xy[:, 1]})
    edges = [[0, 2.5, 5, 10], [0, 1, 2, 3, 4]]
    for d in (0.0, 1e-6):
        a2 = st.histogram(xy, bins=edges, epsilon=1.0, delta=d, rng=9)
        b2 = st.histogram(sxy, bins=edges, epsilon=1.0, delta=d, rng=9)
        assert a2.value.shape == (3, 4) and np.array_equal(a2.value, b2.value)


def test_missing_values_and_bad_columns(spark: Any) -> None:
    """The missing-value policy as on NumPy (refused before any charge, or dropped, with the
    same result), and a schema that cannot hold the data refused from the schema alone."""
    x = _values()
    holes = x.copy()
    holes[[3, 700]] = np.nan
    sdf = _arrow(spark, {"x": holes})
    nulls = spark.createDataFrame([(1.0,), (None,), (3.0,)], "x double")
    acct = Accountant(PureDP(epsilon=10.0))
    for data in (sdf, nulls):
        for f in (st.sum, st.mean, st.var):
            with pytest.raises(DataError, match="missing value"):
                f(data, bounds=(0, 100), epsilon=1.0, accountant=acct)
        with pytest.raises(DataError, match="missing value"):
            st.count(data, epsilon=1.0, accountant=acct)
        with pytest.raises(DataError, match="missing value"):
            st.histogram(data, bins=[0, 50, 100], epsilon=1.0, accountant=acct)
    assert not acct.ledger
    kw: dict[str, Any] = {"bounds": (0, 100), "epsilon": 1.0, "rng": 4, "missing": "drop"}
    assert st.mean(sdf, **kw).value == st.mean(holes, **kw).value
    assert st.var(sdf, **kw).value == st.var(holes, **kw).value
    with pytest.raises(DataError, match="numeric"):
        st.mean(spark.createDataFrame([("a",)], "s string"), bounds=(0, 1), epsilon=1.0)
    with pytest.raises(DataError, match="exactly 1 column"):
        st.sum(_frame(spark, x).withColumn("y", _col("x")), bounds=(0, 1), epsilon=1.0)
    # an empty table is answered like any other (its size is private under add/remove)
    empty = spark.createDataFrame([], "x double")
    assert (
        st.mean(empty, bounds=(0, 1), epsilon=1.0, rng=1).value
        == st.mean(np.array([]), bounds=(0, 1), epsilon=1.0, rng=1).value
    )


def _col(name: str) -> Any:
    from pyspark.sql import functions as f

    return f.col(name)
