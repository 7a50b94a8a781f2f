"""dpkit.sql on a Spark table vs dpkit.frame written by hand on Spark vs hand-written PySpark.

One query, ``SELECT key, COUNT(*), SUM(x), AVG(x) FROM t WHERE age >= 18 GROUP BY key`` (private
keys), on local-mode Spark (``local[2]``), in one process, the contenders taken in turns:

* PySpark written by hand: the filter, the same bounds (rows per (user, key) and keys per user
  by a hash order), clamped float sums; no noise, no exactness (the limit);
* dpkit.frame by hand: the filter in Spark, then ``Query(sdf).group_by(...).agg(...)``;
* dpkit.sql: the SQL text on the Spark table (its WHERE runs on the executors as a Polars step).

Run: ``PYTHONPATH=src python benchmarks/sql_spark.py [--rows N]``. Absolute times on a shared
machine mean little; compare the ratios.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np
import polars as pl

import dpkit.frame as dpf
import dpkit.sql as dps
from _spark import local_spark
from _timing import best_of_each, table

EPS, DELTA, L_INF, L0 = 1.0, 1e-6, 2, 3
SQL = "SELECT key, COUNT(*) AS n, SUM(x) AS s, AVG(x) AS m FROM t WHERE age >= 18 GROUP BY key"


def make_data(rows: int, seed: int = 0) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "user": g.integers(0, max(rows // 4, 1), rows),
            "key": np.minimum(g.zipf(1.3, rows), 500).astype(np.int64),
            "age": g.integers(0, 100, rows),
            "x": g.uniform(0.0, 100.0, rows),
        }
    )


def catalog() -> dps.Catalog:
    cols = [
        dps.Column("user", "int"),
        dps.Column("key", "int"),
        dps.Column("age", "int", bounds=(0, 100)),
        dps.Column("x", "float", bounds=(0, 100)),
    ]
    return dps.Catalog([dps.Table("t", cols, privacy_unit="user", max_groups=L0, max_rows=L_INF)])


def hand_spark(sdf: Any) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    sdf = sdf.filter(f.col("age") >= 18)
    w1 = Window.partitionBy("user", "key").orderBy(f.xxhash64("user", "key", "x"))
    rows = sdf.withColumn("rn", f.row_number().over(w1)).filter(f.col("rn") <= L_INF)
    x = f.greatest(f.least("x", f.lit(100.0)), f.lit(0.0))
    pairs = rows.groupBy("user", "key").agg(f.count(f.lit(1)).alias("n"), f.sum(x).alias("s"))
    w2 = Window.partitionBy("user").orderBy(f.xxhash64("user", "key"))
    pairs = pairs.withColumn("g", f.row_number().over(w2)).filter(f.col("g") <= L0)
    return pairs.groupBy("key").agg(f.sum("n"), f.sum("s"), f.count(f.lit(1))).toArrow()


def frame_spark(sdf: Any) -> Any:
    from pyspark.sql import functions as f

    q = dpf.Query(sdf.filter(f.col("age") >= 18), privacy_unit="user")
    g = q.group_by("key", max_groups=L0, max_rows=L_INF)
    aggs = [dpf.count(), dpf.sum("x", bounds=(0, 100)), dpf.mean("x", bounds=(0, 100))]
    return g.agg(*aggs).release(epsilon=EPS, delta=DELTA, noise="gaussian")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    spark = local_spark()
    if spark is None:
        return
    try:
        df = make_data(a.rows)
        sdf = spark.createDataFrame(df.to_arrow()).cache()
        sdf.count()
        q = dps.SQLQuery(SQL, catalog())
        times = best_of_each(
            {
                "hand": lambda: hand_spark(sdf),
                "frame": lambda: frame_spark(sdf),
                "sql": lambda: q.release({"t": sdf}, epsilon=EPS, delta=DELTA, noise="gaussian"),
            },
            a.repeats,
        )
        load = os.getloadavg()[0]
        rows = [
            (f"PySpark by hand, no privacy ({a.rows:,} rows)", f"{times['hand']:.2f}", "1.00", ""),
            ("dpkit.frame on Spark, by hand", f"{times['frame']:.2f}",
             f"{times['frame'] / times['hand']:.2f}", "1.00"),
            ("dpkit.sql on Spark", f"{times['sql']:.2f}", f"{times['sql'] / times['hand']:.2f}",
             f"{times['sql'] / times['frame']:.2f}"),
        ]  # fmt: skip
        print(f"SQL on Spark, local[2], load average {load:.1f}: {SQL}")
        print(table(rows, ("contender", "best s", "/ PySpark", "/ frame")))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
