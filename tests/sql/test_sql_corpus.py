"""A corpus of SQL queries: accepted ones with their known frame plans, refused ones with their
known errors (decided from the text and the metadata, before any data), BigQuery's dialect."""

from __future__ import annotations

import polars as pl
import pytest
from _sql_tables import make_catalog, make_tables

import dpkit.sql as dps
from dpkit.errors import QueryRefusedError

# (sql, the frame aggregations it compiles to as (stat, column-or-None, bounds), keys public?)


@pytest.fixture(scope="module")
def catalog() -> dps.Catalog:
    return make_catalog()


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    return make_tables()


ACCEPTED: list[
    tuple[str, list[tuple[str, str | None, tuple[float, float] | None]], bool | None]
] = [
    ("SELECT COUNT(*) FROM pums", [("count", None, None)], None),
    (
        "SELECT COUNT(*), VAR(age) FROM pums",
        [("count", None, None), ("var", "age", (0, 100))],
        None,
    ),
    ("SELECT AVG(age) FROM pums", [("mean", "age", (0, 100))], None),
    ("SELECT SUM(age) FROM pums", [("sum", "age", (0, 100))], None),
    ("SELECT STDDEV(age) FROM pums", [("std", "age", (0, 100))], None),
    ("SELECT VARIANCE(age) FROM pums", [("var", "age", (0, 100))], None),
    ("SELECT VAR_POP(age) FROM pums", [("var", "age", (0, 100))], None),
    ("SELECT MEDIAN(age) FROM pums", [("quantiles", "age", (0, 100))], None),
    (
        "SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) FROM pums",
        [("quantiles", "age", (0, 100))],
        None,
    ),
    ("SELECT COUNT(DISTINCT pid) FROM pums", [("count_units", None, None)], None),
    ("SELECT COUNT(age) FROM pums", [("count", None, None)], None),
    ("SELECT COUNT(income) FROM pums", [("sum", "*", (0, 1))], None),
    ("SELECT SUM(income) FROM pums", [("sum", "*", (0, 100_000))], None),
    ("SELECT AVG(income) FROM pums", [("sum", "*", (0, 100_000)), ("sum", "*", (0, 1))], None),
    (
        "SELECT AVG(income) FROM pums WHERE income IS NOT NULL",
        [("mean", "income", (0, 100_000))],
        None,
    ),
    (
        "SELECT VAR(income) FROM pums WHERE income IS NOT NULL",
        [("var", "income", (0, 100_000))],
        None,
    ),
    ("SELECT SUM(age + 1) FROM pums", [("sum", "*", (0, 101))], None),
    ("SELECT SUM(age * 2 - 10) FROM pums", [("sum", "*", (-10, 190))], None),
    ("SELECT SUM(age / 4) FROM pums", [("sum", "*", (0, 25))], None),
    ("SELECT SUM(-age) FROM pums", [("sum", "*", (-100, 0))], None),
    ("SELECT SUM(ABS(age - 50)) FROM pums", [("sum", "*", (0, 50))], None),
    ("SELECT SUM(age + COALESCE(income, 0)) FROM pums", [("sum", "*", (0, 100_100))], None),
    ("SELECT SUM(CASE WHEN age > 90 THEN 1 ELSE 0 END) FROM pums", [("sum", "*", (0, 1))], None),
    ("SELECT SUM(CASE WHEN married THEN age END) FROM pums", [("sum", "*", (0, 100))], None),
    ("SELECT SUM(LEAST(age, 50)) FROM pums", [("sum", "*", (0, 50))], None),
    (
        "SELECT AVG(CAST(age AS FLOAT)) FROM pums",
        [("sum", "*", (0, 100)), ("sum", "*", (0, 1))],
        None,
    ),
    ("SELECT SUM(married) FROM pums", [("sum", "*", (0, 1))], None),
    (
        "SELECT AVG(age) + 3, SUM(age) / 10 FROM pums",
        [("mean", "age", (0, 100)), ("sum", "age", (0, 100))],
        None,
    ),
    ("SELECT COUNT(*) FROM pums WHERE age > 90 AND educ = '8'", [("count", None, None)], None),
    (
        "SELECT COUNT(*) FROM pums WHERE educ IN ('1', '2') OR age BETWEEN 10 AND 20",
        [("count", None, None)],
        None,
    ),
    ("SELECT COUNT(*) FROM pums WHERE score > 1.5", [("count", None, None)], None),
    ("SELECT COUNT(*) FROM pums WHERE pid < 100", [("count", None, None)], None),
    (
        "SELECT COUNT(*) FROM pums WHERE LOWER(note) = 'a' AND note IS NOT NULL",
        [("count", None, None)],
        None,
    ),
    ("SELECT sex, COUNT(*) FROM pums GROUP BY sex", [("count", None, None)], True),
    ("SELECT educ, COUNT(*) FROM pums GROUP BY educ", [("count", None, None)], False),
    ("SELECT sex, educ, AVG(age) FROM pums GROUP BY sex, educ", [("mean", "age", (0, 100))], False),
    ("SELECT married, COUNT(*) FROM pums GROUP BY married", [("count", None, None)], True),
    ("SELECT age > 50 AS old, COUNT(*) FROM pums GROUP BY age > 50", [("count", None, None)], True),
    (
        "SELECT married, CASE WHEN age > 90 THEN 'old' ELSE 'young' END AS a, SUM(age) FROM pums "
        "GROUP BY married, a",
        [("sum", "age", (0, 100))],
        True,
    ),
    (
        "SELECT CASE WHEN age < 18 THEN 'minor' END AS m, COUNT(*) FROM pums GROUP BY 1",
        [("count", None, None)],
        False,
    ),
    (
        "SELECT educ, COUNT(DISTINCT pid) FROM pums GROUP BY educ",
        [("count_units", None, None)],
        False,
    ),
    (
        "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex HAVING COUNT(*) > 50",
        [("count", None, None)],
        True,
    ),
    (
        "SELECT sex, COUNT(*) FROM pums GROUP BY sex HAVING AVG(age) > 40",
        [("count", None, None), ("mean", "age", (0, 100))],
        True,
    ),
    (
        "SELECT sex, educ, SUM(income) AS s FROM pums GROUP BY sex, educ ORDER BY sex, s LIMIT 10",
        [("sum", "*", (0, 100_000))],
        False,
    ),
    (
        "SELECT educ, AVG(age) AS a FROM pums GROUP BY educ ORDER BY a DESC LIMIT 5",
        [("mean", "age", (0, 100))],
        False,
    ),
    ("SELECT sex, COUNT(*) FROM pums GROUP BY sex ORDER BY 2 DESC", [("count", None, None)], True),
    ("SELECT sex, SQRT(VAR(age)) FROM pums GROUP BY sex", [("var", "age", (0, 100))], True),
    ("SELECT sex, ROUND(AVG(age), 1) FROM pums GROUP BY sex", [("mean", "age", (0, 100))], True),
    (
        "SELECT sex, MEDIAN(age), PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY age) FROM pums "
        "GROUP BY sex",
        [("quantiles", "age", (0, 100)), ("quantiles", "age", (0, 100))],
        True,
    ),
    (
        "SELECT r.region, COUNT(*) FROM pums p JOIN regions r ON p.educ = r.educ GROUP BY r.region",
        [("count", None, None)],
        True,
    ),
    (
        "SELECT region, AVG(age) FROM pums LEFT JOIN regions USING (educ) GROUP BY region",
        [("mean", "age", (0, 100))],
        True,
    ),
    (
        "SELECT COUNT(*), SUM(v.minutes) FROM pums p JOIN visits v ON p.pid = v.pid",
        [("count", None, None), ("sum", "minutes", (0, 60))],
        None,
    ),
    ("SELECT educ, COUNT(*) FROM pums_rows GROUP BY educ", [("count", None, None)], False),
    ("SELECT SUM(age) FROM pums_rows WHERE married", [("sum", "age", (0, 100))], None),
    ("select count(*) as N from PUMS", [("count", None, None)], None),
]

# (sql, a fragment of the error message)
REFUSED: list[tuple[str, str]] = [
    ("SELECT SUM(SUM(age)) FROM pums", "aggregates of aggregates"),
    ("SELECT * FROM (SELECT * FROM pums) s", "subqueries"),
    ("SELECT COUNT(*) FROM pums WHERE age > (SELECT AVG(age) FROM pums)", "subqueries"),
    ("SELECT COUNT(*) FROM pums WHERE educ IN (SELECT educ FROM regions)", "subqueries"),
    ("WITH a AS (SELECT * FROM pums) SELECT COUNT(*) FROM a", "WITH"),
    ("SELECT COUNT(*) FROM pums UNION SELECT COUNT(*) FROM pums", "UNION"),
    ("SELECT SUM(age) OVER (PARTITION BY sex) FROM pums", "window"),
    ("SELECT MIN(age) FROM pums", "PERCENTILE_CONT"),
    ("SELECT sex, MAX(income) FROM pums GROUP BY sex", "PERCENTILE_CONT"),
    ("SELECT pid, COUNT(*) FROM pums GROUP BY pid", "GROUP BY the privacy unit"),
    ("SELECT COUNT(*) FROM pums GROUP BY pid % 10", "GROUP BY the privacy unit"),
    ("SELECT SUM(pid) FROM pums", "privacy unit"),
    ("SELECT RANDOM(), COUNT(*) FROM pums", "non-deterministic"),
    ("SELECT COUNT(*) FROM pums WHERE RANDOM() < 0.5", "non-deterministic"),
    ("SELECT COUNT(*) FROM pums WHERE age > EXTRACT(YEAR FROM NOW())", "non-deterministic"),
    ("SELECT age FROM pums", "must release aggregates"),
    ("SELECT * FROM pums", "SELECT *"),
    ("SELECT DISTINCT educ FROM pums", "DISTINCT"),
    ("SELECT educ, age, COUNT(*) FROM pums GROUP BY educ", "GROUP BY key"),
    ("SELECT SUM(score) FROM pums", "unbounded sensitivity"),
    ("SELECT AVG(score * age) FROM pums", "unbounded sensitivity"),
    ("SELECT SUM(age / age) FROM pums", "unbounded sensitivity"),
    ("SELECT SUM(educ) FROM pums", "numeric"),
    ("SELECT COUNT(DISTINCT educ) FROM pums", "COUNT(DISTINCT x)"),
    ("SELECT VAR(income) FROM pums", "nullable"),
    (
        "SELECT a.age, COUNT(*) FROM pums a JOIN pums b ON a.age = b.age GROUP BY a.age",
        "privacy unit",
    ),
    ("SELECT COUNT(*) FROM pums p JOIN visits v ON p.educ = v.minutes", "privacy unit"),
    ("SELECT COUNT(*) FROM pums p CROSS JOIN regions r", "cross joins"),
    ("SELECT COUNT(*) FROM pums p FULL JOIN regions r ON p.educ = r.educ", "INNER and LEFT"),
    ("SELECT COUNT(*) FROM regions", "private table"),
    ("SELECT COUNT(*) FROM nosuch", "unknown table"),
    ("SELECT SUM(nosuch) FROM pums", "unknown column"),
    ("SELECT COUNT(*) FROM pums WHERE COUNT(*) > 1", "WHERE"),
    ("SELECT sex, COUNT(*) FROM pums GROUP BY ROLLUP (sex)", "ROLLUP"),
    ("SELECT PERCENTILE_CONT(2) WITHIN GROUP (ORDER BY age) FROM pums", "probability"),
    ("SELECT COUNT(*) FROM pums LIMIT -1", "LIMIT"),
    ("SELECT COUNT(*) FROM pums; SELECT COUNT(*) FROM pums", "one SQL statement"),
    ("SELEC COUNT(*) FRM pums", "not valid SQL"),
    ("SELECT ARRAY_AGG(age) FROM pums", "not supported"),
    ("SELECT COUNT(*) FROM pums WHERE age LIKE '1%'", "not supported"),
]

BIGQUERY: list[tuple[str, list[tuple[str, tuple[float, float] | None]]]] = [
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, privacy_unit_column=pid) "
        "sex, COUNT(*) AS n FROM pums GROUP BY sex",
        [("sum", (0, 2))],
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, max_groups_contributed=2, "
        "privacy_unit_column=pid) educ, AVG(age, contribution_bounds_per_group => (0, 90)) a, "
        "SUM(income, contribution_bounds_per_group => (0, 1e5)) s FROM pums GROUP BY educ",
        [("mean", (0, 90)), ("sum", (0, 100_000))],
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=2, delta=1e-6) "
        "PERCENTILE_CONT(age, 0.5, contribution_bounds_per_row => (0, 100)) AS med FROM pums",
        [("quantiles", (0, 100))],
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) "
        "COUNT(income, contribution_bounds_per_group => (0, 5)) FROM pums WHERE age > 18",
        [("sum", (0, 5))],
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) AVG(age) FROM pums",
        [("mean", (0, 100))],
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) "
        "SUM(age, contribution_bounds_per_group => (-5, 50)) FROM pums",
        [("sum", (-5, 50))],
    ),
]

BIGQUERY_REFUSED = [
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) SUM(age) FROM pums",
        "contribution_bounds",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, max_groups_contributed=NULL) "
        "COUNT(*) FROM pums",
        "NULL",
    ),
    (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, privacy_unit_column=age) "
        "COUNT(*) FROM pums",
        "privacy_unit_column",
    ),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta=1e-5) COUNT(*) FROM pums", "epsilon"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, colour=1) COUNT(*) FROM pums", "unknown"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) COUNT(*) FROM pums_rows", "privacy unit"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) VAR(age) FROM pums", "BigQuery"),
]


def _plan(q: dps.SQLQuery) -> list[tuple[str, str | None, tuple[float, float] | None]]:
    out = []
    for a in q._c.aggs:
        col = a.column if a.column is None or not a.column.startswith("__sql_") else "*"
        out.append((a.stat, col, a.bounds))
    return out


@pytest.mark.parametrize(("sql", "plan", "public"), ACCEPTED)
def test_accepted_queries_compile_to_known_plans(
    sql: str,
    plan: list[object],
    public: bool | None,
    catalog: dps.Catalog,
    tables: dict[str, pl.DataFrame],
) -> None:
    q = dps.SQLQuery(sql, catalog)
    assert _plan(q) == plan
    c = q._c
    if public is None:
        assert not c.keys
    else:
        assert all(v is not None for v in c.key_values) is public
    ex = q.explain(tables, epsilon=1.0, delta=1e-6)  # runs the plan on the schema, charges nothing
    assert ex.epsilon == 1.0


@pytest.mark.parametrize(("sql", "message"), REFUSED + BIGQUERY_REFUSED)
def test_refused_queries_say_why_from_text_and_metadata(
    sql: str, message: str, catalog: dps.Catalog
) -> None:
    # no data are given: the refusal cannot depend on them
    with pytest.raises(QueryRefusedError, match=None) as info:
        dps.SQLQuery(sql, catalog)
    assert message.lower() in str(info.value).lower()


@pytest.mark.parametrize(("sql", "plan"), BIGQUERY)
def test_bigquery_dialect_per_unit_plans(
    sql: str, plan: list[object], catalog: dps.Catalog, tables: dict[str, pl.DataFrame]
) -> None:
    q = dps.SQLQuery(sql, catalog)
    assert q.bigquery
    assert [(a.stat, a.bounds) for a in q._c.aggs] == plan
    # every aggregate reads a per-unit value (a window over unit and keys) or one row per unit
    assert all(a.column is not None and a.column.startswith("__sql_u") for a in q._c.aggs)
    ex = q.explain(tables)
    assert ex.epsilon == q._c.options["epsilon"]
    steps = "\n".join(ex.frame.steps)
    assert "keep <= 1 row(s) per (unit, key)" in steps


def test_corpus_size() -> None:
    assert len(ACCEPTED) + len(REFUSED) + len(BIGQUERY) + len(BIGQUERY_REFUSED) >= 60
