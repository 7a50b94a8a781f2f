"""Demo section: SQL compiled to a private frame query, in dpkit's dialect and BigQuery's."""

from __future__ import annotations

import numpy as np

SEED = 2024  # reproducible demo; real releases use rng=None (secure)


def demo() -> None:
    """Print a private grouped SQL query, its plan and cost, and a refusal."""
    import polars as pl

    import dpkit.sql as dps
    from dpkit.errors import QueryRefusedError
    from dpkit.random import seeded

    print("\n== SQL (dpkit.sql) ==")
    g = np.random.default_rng(SEED)
    n = 100_000
    pums = pl.DataFrame(
        {
            "pid": g.integers(0, 40_000, n),
            "age": g.integers(0, 100, n),
            "educ": g.choice(["hs", "ba", "ma", "phd"], n, p=[0.5, 0.3, 0.15, 0.05]),
            "income": np.round(g.lognormal(10.5, 0.6, n), 2),
        }
    )
    catalog = dps.Catalog(
        [
            dps.Table(
                "pums",
                [
                    dps.Column("pid", "int"),
                    dps.Column("age", "int", bounds=(0, 100)),
                    dps.Column("educ", "string"),
                    dps.Column("income", "float", bounds=(0, 200_000)),
                ],
                privacy_unit="pid",
                max_groups=1,
                max_rows=3,
            )
        ]
    )
    sql = (
        "SELECT educ, COUNT(*) AS n, AVG(income) / 1000 AS k_income FROM pums "
        "WHERE age >= 18 GROUP BY educ ORDER BY n DESC"
    )
    print(sql)
    q = dps.SQLQuery(sql, catalog)
    print(q.explain({"pums": pums}, epsilon=1.0, delta=1e-6))
    r = q.release({"pums": pums}, epsilon=1.0, delta=1e-6, rng=seeded(SEED))
    with pl.Config(tbl_rows=10, tbl_cols=8, float_precision=1):
        print(r.frame)
    print(
        "The same query runs on a Spark table, bit-identical for the same seed: "
        'q.release({"pums": spark_df}, ...) or a registered table\'s name (docs/sql.md).'
    )
    bq = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6, privacy_unit_column=pid) "
        "educ, AVG(income, contribution_bounds_per_group => (0, 200000)) AS avg_income "
        "FROM pums GROUP BY educ"
    )
    print("BigQuery's dialect (average of per-person averages, groups kept by a noisy count):")
    with pl.Config(tbl_rows=10, tbl_cols=8, float_precision=1):
        print(dps.query(bq, {"pums": pums}, catalog=catalog, rng=seeded(SEED)).sort("educ"))
    try:
        dps.SQLQuery(
            "SELECT COUNT(*) FROM pums WHERE income > (SELECT AVG(income) FROM pums)", catalog
        )
    except QueryRefusedError as exc:
        print(f"refused before reading any data: {exc}")
