"""A null privacy unit is no unit: such rows are dropped before bounding, on both engines.

Refusing them (as the frame engines once did) told whoever saw the refusal that a row with a null
unit exists. Now whether a release succeeds, what it charges and what it releases (same seed) do
not depend on whether such rows exist, whatever they hold (a NaN under ``missing="raise"``, a
value far outside the bounds, a key of its own), and Polars and Spark agree.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, PureDP

PUB = ["a", "b", "c"]
pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)


def _table() -> pl.DataFrame:
    g = np.random.default_rng(3)
    n = 300
    return pl.DataFrame(
        {
            # text ids: a pandas integer column with a null would turn float, other ids
            "user": [f"u{i}" for i in g.integers(0, 80, n)],
            "key": g.choice(PUB, n),
            "x": g.uniform(0.0, 10.0, n),
        }
    )


def _with_null_units(df: pl.DataFrame) -> pl.DataFrame:
    # rows a refusal would reveal: a NaN (missing="raise" refuses it in a unit's row), a huge
    # value, a key of their own; their unit is null, interleaved with the real rows
    extra = pl.DataFrame(
        {
            "user": [None, None, None],
            "key": ["a", "zz", "b"],
            "x": [float("nan"), 1e9, 5.0],
        },
        schema=df.schema,
    )
    return pl.concat([extra.head(2), df, extra.tail(1)])


def _release(data: Any, acct: Accountant) -> pl.DataFrame:
    q = dpf.Query(data, privacy_unit="user").group_by(
        "key", public_keys=PUB, max_groups=2, max_rows=2
    )
    rel = q.agg(dpf.count(), dpf.sum("x", bounds=(0, 10))).release(
        epsilon=1.0, accountant=acct, rng=11
    )
    out = rel.frame
    return (pl.from_pandas(out) if not isinstance(out, pl.DataFrame) else out).sort("key")


def _both(make: Any) -> None:
    df = _table()
    a, b = Accountant(PureDP(epsilon=5.0)), Accountant(PureDP(epsilon=5.0))
    plain = _release(make(df), a)
    nulls = _release(make(_with_null_units(df)), b)
    assert plain.equals(nulls)
    assert [e.event for e in a.ledger] == [e.event for e in b.ledger]
    assert len(a.ledger) == 1


def test_polars_drops_null_units() -> None:
    _both(lambda df: df)


def test_pandas_drops_null_units() -> None:
    pytest.importorskip("pandas")
    _both(lambda df: df.to_pandas())


def test_a_table_of_null_units_only_releases_like_an_empty_one() -> None:
    df = _with_null_units(_table()).filter(pl.col("user").is_null())
    a, b = Accountant(PureDP(epsilon=5.0)), Accountant(PureDP(epsilon=5.0))
    assert _release(df, a).equals(_release(df.clear(), b))
    assert len(a.ledger) == len(b.ledger) == 1


def _float_units(df: pl.DataFrame, nan: bool) -> pl.DataFrame:
    # a float unit column; NaN is pandas' null, so a NaN unit must be no unit on Polars too
    ids = df.with_columns(pl.col("user").str.slice(1).cast(pl.Float64))
    if not nan:
        return ids
    extra = pl.DataFrame(
        {"user": [float("nan")] * 3, "key": ["a", "zz", "b"], "x": [1.0, 1e9, 5.0]},
        schema=ids.schema,
    )
    return pl.concat([extra.head(2), ids, extra.tail(1)])


@pytest.mark.parametrize("engine", ["polars", "pandas"])
def test_a_nan_unit_is_dropped_on_both_engines(engine: str) -> None:
    # Polars kept NaN units (pooled as one unit of their own) while pandas, whose NaN arrives
    # as null, dropped them: the same table released different counts on the two engines
    if engine == "pandas":
        pytest.importorskip("pandas")
    make = (lambda d: d) if engine == "polars" else (lambda d: d.to_pandas())
    df = _table()
    a, b = Accountant(PureDP(epsilon=5.0)), Accountant(PureDP(epsilon=5.0))
    plain = _release(make(_float_units(df, nan=False)), a)
    nans = _release(make(_float_units(df, nan=True)), b)
    assert plain.equals(nans)


def test_a_nan_unit_is_dropped_on_spark(spark: Any) -> None:
    # Spark's isNotNull keeps NaN; the table drops a NaN unit there too, as on Polars and pandas
    df = _table()
    a, b = Accountant(PureDP(epsilon=5.0)), Accountant(PureDP(epsilon=5.0))
    plain = _release(_float_units(df, nan=False), a)
    nans = _release(spark.createDataFrame(_float_units(df, nan=True).to_arrow()), b)
    assert plain.equals(nans)
