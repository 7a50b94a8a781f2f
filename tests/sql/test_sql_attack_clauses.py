"""Attacks on dpkit.sql: SQL clauses that the compiler would drop silently."""

from __future__ import annotations

import pytest
from _sql_tables import make_catalog, make_tables

import dpkit.sql as dps
from dpkit.errors import DataError, QueryRefusedError
from dpkit.random import seeded

CAT = make_catalog()
T = make_tables(400)


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("SELECT COUNT(*) AS n FROM pums TABLESAMPLE (1 PERCENT)", None),
        ("SELECT COUNT(*) AS n FROM pums PREWHERE age > 50", "clickhouse"),
    ],
)
def test_attack_clauses_dropped_silently_are_refused(sql: str, dialect: str | None) -> None:
    """A clause the compiler does not read ran as if absent: TABLESAMPLE released the whole
    table's count, ClickHouse's PREWHERE released an unfiltered count. Broken, fixed: refused
    from the text, before any data are read."""
    with pytest.raises(QueryRefusedError):
        dps.SQLQuery(sql, CAT, dialect=dialect)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(FLOOR(score)) AS n FROM pums",
        "SELECT SUM(CAST(educ AS INT)) AS n FROM pums",
        "SELECT COUNT(*) AS n FROM pums WHERE age IN ('a', 1)",
    ],
)
def test_attack_unbounded_or_mixed_expressions_get_a_clean_refusal(sql: str) -> None:
    """An unbounded side (a column without bounds, a cast from text) under FLOOR, CEIL or
    CAST to an integer raised OverflowError, and IN with literals of two types a TypeError,
    from the compiler: not the clean refusal every bad query gets. Broken, fixed."""
    with pytest.raises((QueryRefusedError, DataError)):
        dps.query(sql, T, catalog=CAT, epsilon=1.0, rng=seeded(0))


def test_a_cast_from_text_in_where_runs() -> None:
    """WHERE CAST(educ AS INT) % 2 = 1 raised OverflowError while compiling; a row filter
    needs no bounds, so it now runs (a text that does not convert is NULL: the row is out)."""
    out = dps.query(
        "SELECT COUNT(*) AS n FROM pums WHERE CAST(educ AS INT) % 2 = 1",
        T,
        catalog=CAT,
        epsilon=1.0,
        rng=seeded(0),
    )
    assert out.height == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex ORDER BY 1.5",
        "SELECT SUM(ROUND(age, 99999999999999999999)) AS s FROM pums",
        "SELECT SUM(ROUND(age, 1e400)) AS s FROM pums",
        "SELECT SUM(ROUND(age, 2.5)) AS s FROM pums",
    ],
)
def test_attack_odd_literals_get_a_clean_refusal(sql: str) -> None:
    """ORDER BY 1.5 raised ValueError and ROUND(x, 10^20) OverflowError from the compiler.
    Broken, fixed: a refusal, from the text."""
    with pytest.raises(QueryRefusedError):
        dps.SQLQuery(sql, CAT)


@pytest.mark.parametrize(
    "agg",
    [
        "SUM(age, contribution_bounds_per_row => (0, 100))",
        "PERCENTILE_CONT(age, 0.5, contribution_bounds_per_group => (0, 100))",
    ],
)
def test_attack_bigquery_bounds_of_the_wrong_kind_are_refused(agg: str) -> None:
    """SUM with per-row bounds was run with them as per-unit bounds (another meaning than the
    text's; BigQuery refuses it). Broken, fixed: refused from the text."""
    sql = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, privacy_unit_column=pid) "
        f"sex, {agg} AS v FROM pums GROUP BY sex"
    )
    with pytest.raises(QueryRefusedError):
        dps.SQLQuery(sql, CAT)
