"""Attacks on dpkit.sql: errors, refusals or charges that depend on one unit's values (a free
membership oracle)."""

from __future__ import annotations

import polars as pl
import pytest
from _sql_tables import make_catalog, make_tables

import dpkit.sql as dps
from dpkit.accounting import Accountant, ApproxDP
from dpkit.random import seeded

CAT = make_catalog()
T = make_tables(400)


def _outcome(sql: str, tables: dict[str, pl.DataFrame]) -> tuple[str, float]:
    """(error class or "ok", epsilon spent) of one release."""
    acct = Accountant(ApproxDP(epsilon=100.0, delta=1e-3))
    kw = {} if "DIFFERENTIAL_PRIVACY" in sql else {"epsilon": 1.0, "delta": 1e-6}
    try:
        dps.query(sql, tables, catalog=CAT, accountant=acct, rng=seeded(1), **kw)  # type: ignore[arg-type]
        return "ok", acct.spent.epsilon
    except Exception as exc:
        return type(exc).__name__, acct.spent.epsilon


def _odd(p: pl.DataFrame) -> pl.DataFrame:
    """One unit (pid 3) given values no honest record has: a string where numbers are,
    NaN and NULL in declared non-null columns, a key outside the declared keys, a huge int."""
    one = pl.col("pid") == 3
    return p.with_columns(
        pl.when(one).then(pl.lit("x")).otherwise(pl.col("educ")).alias("educ"),
        pl.when(one).then(pl.lit(10**17)).otherwise(pl.col("age")).alias("age"),
        pl.when(one).then(pl.lit("zz")).otherwise(pl.col("sex")).alias("sex"),
        pl.when(one).then(float("nan")).otherwise(pl.col("income")).alias("income"),
        pl.when(one).then(None).otherwise(pl.col("married")).alias("married"),
    )


ORACLE_QUERIES = [
    "SELECT COUNT(*) AS n FROM pums WHERE CAST(educ AS INT) > 2",
    "SELECT SUM(LEAST(GREATEST(CAST(educ AS FLOAT), 0), 10)) AS n FROM pums",
    "SELECT COUNT(*) AS n FROM pums WHERE age * 9223372036854775807 > 0",
    "SELECT COUNT(*) AS n FROM pums WHERE age / (age - 5) > 1",
    "SELECT SUM(income) AS s, AVG(income) AS a, COUNT(income) AS c FROM pums",
    "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex",
    "SELECT married, SUM(age) AS n FROM pums GROUP BY married",
    "SELECT age > 50 AS k, VAR(age) AS v FROM pums GROUP BY age > 50",
    "SELECT COUNT(*) AS n FROM pums WHERE educ = 2",  # a type error: fails either way
    "SELECT COUNT(*) AS n FROM pums WHERE LOWER(educ) = 'x'",
    "SELECT SUM(GREATEST(LEAST(educ, 10), 0)) AS n FROM pums",  # text under LEAST: schema error
    "SELECT AVG(GREATEST(LEAST(CAST(educ AS FLOAT), 10), 0)) AS n FROM pums",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, privacy_unit_column=pid) "
    "sex, AVG(income) AS a, SUM(age, contribution_bounds_per_group => (0, 100)) AS s "
    "FROM pums GROUP BY sex",
]


@pytest.mark.parametrize("sql", ORACLE_QUERIES)
def test_attack_error_oracle_held(sql: str) -> None:
    """A free membership oracle would be a release that succeeds on one table and fails (or
    fails differently, or charges differently) when one unit holds odd values: held."""
    base = _outcome(sql, T)
    odd = _outcome(sql, {**T, "pums": _odd(T["pums"])})
    assert base == odd


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n, SUM(age) AS s FROM pums",
        "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex",
        "SELECT COUNT(*) AS n FROM pums JOIN regions USING (educ)",
        "SELECT COUNT(*) AS n FROM visits JOIN pums USING (pid)",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, privacy_unit_column=pid) "
        "sex, COUNT(*) AS n FROM pums GROUP BY sex",
    ],
)
def test_attack_null_unit_is_no_oracle(sql: str) -> None:
    """The frame refuses a table whose unit column holds a NULL (DataError), so a release
    succeeded or failed by whether one more unit, the one whose id is NULL, was in the table:
    neighbours told apart with certainty. Broken, fixed: the SQL layer drops rows without a
    unit (a row-wise filter), as it drops rows whose aggregated value is missing."""
    p = T["pums"]
    ghost = p.head(5).with_columns(pl.lit(None, dtype=p.schema["pid"]).alias("pid"))
    base = _outcome(sql, T)
    with_ghost = _outcome(sql, {**T, "pums": pl.concat([p, ghost])})
    assert base == with_ghost
    assert base[0] == "ok"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT AVG(age) AS a, VAR(age) AS v, STDDEV(income) AS s FROM pums "
        "WHERE income IS NOT NULL",
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) AS m FROM pums",
        "SELECT sex, COUNT(DISTINCT pid) AS n FROM pums GROUP BY sex HAVING n > 3 "
        "ORDER BY n LIMIT 1",
        "SELECT AVG(age) / COUNT(*) AS r, SQRT(VAR(age)) AS s FROM pums",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, privacy_unit_column=pid) "
        "sex, AVG(age) AS a, PERCENTILE_CONT(age, 0.5) AS m FROM pums GROUP BY sex",
    ],
)
def test_attack_empty_table_is_no_oracle(sql: str) -> None:
    """An empty table (or one emptied by WHERE) against a table of one unit: a mean, variance,
    percentile or post-processing that failed on no rows would tell them apart. Held."""
    p = T["pums"]
    assert _outcome(sql, {**T, "pums": p.head(0)}) == _outcome(sql, {**T, "pums": p.head(1)})


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(age * 2) AS s FROM pums",
        "SELECT AVG(income) AS s FROM pums",
        "SELECT SUM(married) AS s FROM pums",
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, privacy_unit_column=pid) "
        "AVG(age) AS a FROM pums",
    ],
)
def test_attack_text_in_a_numeric_column_is_no_oracle(sql: str) -> None:
    """A column declared numeric but given as text: the clamp's strict cast to float ran per
    value, so the release succeeded on numeric text and failed when one unit held "abc".
    Broken, fixed: the data's types are checked against the metadata before anything runs,
    a refusal from the schema alone (the same on both tables)."""
    p = T["pums"].with_columns(
        pl.col("age").cast(pl.String),
        pl.col("income").cast(pl.String),
        pl.col("married").cast(pl.String),
    )
    one = pl.col("pid") == 3
    bad = p.with_columns(
        pl.when(one).then(pl.lit("abc")).otherwise(pl.col(c)).alias(c)
        for c in ("age", "income", "married")
    )
    clean = _outcome(sql, {**T, "pums": p})
    assert clean == _outcome(sql, {**T, "pums": bad})
    assert clean[1] == 0.0


def test_a_nan_unit_is_no_unit_as_in_the_frame() -> None:
    """A float unit column's NaN is null too (as in dpkit.frame on every engine): rows whose
    unit is NaN are dropped, not pooled into one unit of their own."""
    sql = "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex"
    p = T["pums"].with_columns(pl.col("pid").cast(pl.Float64))
    ghost = p.head(5).with_columns(pl.lit(float("nan")).alias("pid"))
    base = _outcome(sql, {**T, "pums": p})
    with_ghost = _outcome(sql, {**T, "pums": pl.concat([p, ghost])})
    assert base == with_ghost
    assert base[0] == "ok"
