"""SQL on Spark tables: the same release as the Polars path, the same refusals.

Local-mode Spark (the ``spark`` fixture of ``tests/conftest.py``, shared by the run). A Spark
query and its Polars twin under the same ``rng`` draw the same hash key and the same noise,
so equal released tables mean equal exact bounded totals (the frame layer's guarantee), here
through the SQL layer's row-wise steps on the executors and BigQuery's per-unit windows.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from _sql_tables import make_catalog, make_tables

import dpkit.sql as dps
from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import DataError, PrivacyParameterError, QueryRefusedError

pytest.importorskip("pyspark")

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

# a public join, a WHERE, an expression key, a nullable sum and a mean; BigQuery's per-unit
# windows; row privacy with a quantile tree (the frame's row path)
SAME = [
    (
        "SELECT r.region, CASE WHEN age < 40 THEN 'young' ELSE 'old' END AS band, "
        "COUNT(*) AS n, AVG(age) AS a, SUM(income) AS s "
        "FROM pums p JOIN regions r ON p.educ = r.educ WHERE p.married GROUP BY 1, 2",
        {"epsilon": 1.0, "delta": 1e-6},
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, max_groups_contributed=2, "
        "privacy_unit_column=pid) educ, COUNT(*) AS n, AVG(age, contribution_bounds_per_group => "
        "(0, 90)) AS a, SUM(age, contribution_bounds_per_group => (0, 150)) AS s "
        "FROM pums GROUP BY educ",
        {},
    ),
    (
        "SELECT sex, COUNT(*) AS n, MEDIAN(age) AS med FROM pums_rows WHERE age > 17 GROUP BY sex",
        {"epsilon": 1.0},
    ),
]


@pytest.fixture(scope="module")
def catalog() -> dps.Catalog:
    return make_catalog()


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    return make_tables(n=2000)


@pytest.fixture
def spark_tables(spark: Any, tables: dict[str, pl.DataFrame]) -> dict[str, Any]:
    return {k: spark.createDataFrame(v.to_arrow()) for k, v in tables.items()}


@pytest.mark.parametrize(("sql", "budget"), SAME)
def test_spark_release_equals_the_polars_release(
    catalog: dps.Catalog, tables: dict, spark_tables: dict, sql: str, budget: dict
) -> None:
    q = dps.SQLQuery(sql, catalog)
    a = q.release(tables, rng=7, **budget)
    b = q.release(spark_tables, rng=7, **budget)
    assert a.frame.height > 0
    assert a.frame.equals(b.frame)
    assert a.event == b.event
    assert str(a.explanation) == str(b.explanation)


def test_spark_tables_by_name_and_session(
    spark: Any, catalog: dps.Catalog, tables: dict, spark_tables: dict
) -> None:
    """A registered table, by name or through the session: the same plan (explain runs no job)."""
    spark_tables["pums"].createOrReplaceTempView("pums_view")
    spark_tables["pums"].createOrReplaceTempView("pums")
    sql = "SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM pums WHERE age > 17 GROUP BY sex"
    q = dps.SQLQuery(sql, catalog)
    want = str(q.explain(tables, epsilon=1.0))
    assert str(q.explain({"pums": "pums_view"}, epsilon=1.0)) == want
    assert str(q.explain(spark, epsilon=1.0)) == want
    assert q.frame_query(spark).explain(epsilon=1.0).epsilon == pytest.approx(1.0)
    with pytest.raises(DataError, match="no Spark table"):
        q.explain({"pums": "no_such_view"}, epsilon=1.0)


def _refusal(q: dps.SQLQuery, data: object, **kw: Any) -> tuple[type, str]:
    acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-3))
    with pytest.raises((DataError, PrivacyParameterError, QueryRefusedError)) as info:
        q.release(data, accountant=acct, epsilon=1.0, delta=1e-6, **kw)
    assert not acct.ledger  # refused before anything is charged
    return type(info.value), str(info.value)


def test_spark_refusals_are_the_polars_refusals(
    spark: Any, catalog: dps.Catalog, tables: dict, spark_tables: dict
) -> None:
    """Refused from the schema and the text, before any Spark job, with the same error."""
    as_text = tables["pums"].with_columns(pl.col("age").cast(pl.String))
    q = dps.SQLQuery("SELECT sex, AVG(age) FROM pums GROUP BY sex", catalog)
    want = _refusal(q, {"pums": as_text})
    assert "declared int" in want[1]
    assert _refusal(q, {"pums": spark.createDataFrame(as_text.to_arrow())}) == want
    # HAVING comparing a released number with a key's text: the post-processing check
    q = dps.SQLQuery("SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex HAVING n > sex", catalog)
    want = _refusal(q, tables)
    assert want[0] is QueryRefusedError
    assert _refusal(q, spark_tables) == want
    # the frame's own check (an unknown noise name), raised by the Polars plan of the schema
    q = dps.SQLQuery("SELECT COUNT(*) FROM pums", catalog)
    assert _refusal(q, spark_tables, noise="cauchy") == _refusal(q, tables, noise="cauchy")
    # private tables on two engines
    q = dps.SQLQuery(
        "SELECT COUNT(*), SUM(v.minutes) FROM pums p JOIN visits v ON p.pid = v.pid", catalog
    )
    kind, text = _refusal(q, {"pums": spark_tables["pums"], "visits": tables["visits"]})
    assert kind is DataError and "one engine" in text
