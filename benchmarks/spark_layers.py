"""Each layer's Spark path against a hand-written PySpark job computing the same bounded aggregates.

One process, one SparkSession (``local[2]``, or a standalone master and two workers on loopback
with dpkit shipped as ``--py-files``: ``--mode standalone``), one cached table; the contenders
of each layer taken in turns, best of ``--repeats``. The hand-written jobs do the work an honest
engineer would do for the same guarantee, without dpkit:

* frame: a group-by with contribution bounding: rows per (unit, key) and keys per unit kept by a
  keyed hash order (``xxhash64`` with a secret seed column), values clamped, exact fixed-point
  sums (``bigint`` of the scaled value), the rows and units per key collected (what key
  selection needs) — against ``dpkit.frame`` (AES-CMAC row hash, noise, key selection);
* stats: a clamped exact fixed-point sum and count (mean), and the sums of the scaled value and
  its square (variance) — against ``dpkit.stats.mean`` / ``var`` on the Spark column;
* release: the synthesizer's data pass, every two-way marginal of 6 binned columns (clamp, bin
  by comparisons with the public edges, one ``GROUPING SETS`` aggregation) — against the Spark
  part of ``Synthesizer.fit`` (encoding and the marginals; the model fit is on the driver and
  timed apart);
* local: support counts of GRR reports (a range check and a ``groupBy`` count) — against
  ``GRR.support_counts`` on the Spark column.

Each pair's results are checked equal where they are the same numbers (the marginals, the
support counts, the exact sums). Run: ``PYTHONPATH=src python benchmarks/spark_layers.py
[--rows N] [--mode local|standalone]``. Absolute times on a shared machine mean little.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import dpkit.frame as dpf
import dpkit.stats as st
from _timing import best_of_each, table
from dpkit.local import GRR
from dpkit.release import Domain, Numeric, Synthesizer
from dpkit.release._scan_codes import needed_marginals
from dpkit.release._spark_codes import encode_spark

EPS, DELTA, L_INF, L0, K_REPORTS = 1.0, 1e-6, 2, 3, 16
SYN_COLS = 6


def make_data(rows: int, seed: int = 0) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    base = g.integers(0, 1 << 16, rows)
    cols = {f"s{i}": (base % (3 + i) + g.integers(0, 2, rows)).astype(np.int64)
            for i in range(SYN_COLS)}  # fmt: skip
    return pl.DataFrame(
        {
            "user": g.integers(0, max(rows // 4, 1), rows),
            "key": np.minimum(g.zipf(1.3, rows), 500).astype(np.int64),
            "x": g.uniform(-10.0, 110.0, rows),
            "report": g.integers(0, K_REPORTS, rows),
            **cols,
        }
    )


def session(mode: str) -> tuple[Any, Callable[[], None]]:
    if mode == "local":
        from _spark import local_spark

        spark = local_spark()
        return spark, (lambda: spark.stop()) if spark is not None else (lambda: None)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from spark_sessions import Sessions

    s = Sessions()
    return s.get("cluster"), s.close


# -- frame ---------------------------------------------------------------------------------------


def hand_frame(sdf: Any) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    seed = f.lit(0x5EC2E7)  # the per-release secret an engineer would draw
    w1 = Window.partitionBy("user", "key").orderBy(f.xxhash64(seed, "user", "key", "x"))
    rows = sdf.withColumn("rn", f.row_number().over(w1)).filter(f.col("rn") <= L_INF)
    fixed = f.rint(f.least(f.greatest("x", f.lit(0.0)), f.lit(100.0)) * f.lit(2.0**20))
    pairs = rows.groupBy("user", "key").agg(
        f.count(f.lit(1)).alias("n"), f.sum(fixed.cast("long")).alias("s")
    )
    w2 = Window.partitionBy("user").orderBy(f.xxhash64(seed, "user", "key"))
    pairs = pairs.withColumn("g", f.row_number().over(w2)).filter(f.col("g") <= L0)
    return pairs.groupBy("key").agg(f.sum("n"), f.sum("s"), f.count(f.lit(1))).toArrow()


def dpkit_frame(sdf: Any) -> Any:
    q = dpf.Query(sdf, privacy_unit="user")
    g = q.group_by("key", max_groups=L0, max_rows=L_INF)
    return g.agg(dpf.count(), dpf.sum("x", bounds=(0, 100))).release(
        epsilon=EPS, delta=DELTA, noise="gaussian"
    )


# -- stats ---------------------------------------------------------------------------------------


def hand_mean(col: Any) -> Any:
    from pyspark.sql import functions as f

    fixed = f.rint(f.least(f.greatest("x", f.lit(0.0)), f.lit(100.0)) * f.lit(2.0**20))
    return col.agg(f.sum(fixed.cast("long")), f.count(f.lit(1))).first()


def hand_var(col: Any) -> Any:
    from pyspark.sql import functions as f

    u = (f.least(f.greatest("x", f.lit(0.0)), f.lit(100.0)) - f.lit(50.0)) * f.lit(0.02)
    unit = f.lit(2.0**30)
    return col.agg(
        f.sum(f.rint(u * unit).cast("long")),
        f.sum(f.rint((u * u - f.lit(0.5)) * unit).cast("long")),
        f.count(f.lit(1)),
    ).first()


# -- release -------------------------------------------------------------------------------------


def syn_domain() -> Domain:
    return Domain({f"s{i}": Numeric(0, 3 + i, bins=4 + i, integer=True) for i in range(SYN_COLS)})


def hand_marginals(sdf: Any, dom: Domain) -> dict[tuple[int, ...], np.ndarray]:
    from pyspark.sql import functions as f

    codes = []
    for i, (name, col) in enumerate(dom.columns.items()):
        assert isinstance(col, Numeric)
        v = f.rint(f.least(f.greatest(f.col(name).cast("double"), f.lit(col.lo)), f.lit(col.hi)))
        pos = sum(((v >= f.lit(float(e))).cast("int") for e in col.bin_edges), f.lit(0))
        codes.append(f.least(f.greatest(pos - 1, f.lit(0)), f.lit(col.bins - 1)).alias(f"c{i}"))
    pairs = list(itertools.combinations(range(SYN_COLS), 2))
    sdf.sparkSession.catalog.dropTempView("syn_codes")
    sdf.select(*codes).createOrReplaceTempView("syn_codes")
    sets = ", ".join(f"(c{i}, c{j})" for i, j in pairs)
    cols = ", ".join(f"c{i}" for i in range(SYN_COLS))
    rows = sdf.sparkSession.sql(
        f"SELECT {cols}, GROUPING_ID() AS gid, COUNT(*) AS n FROM syn_codes "
        f"GROUP BY GROUPING SETS ({sets})"
    ).collect()
    shape = dom.shape
    out = {p: np.zeros((shape[p[0]], shape[p[1]]), np.int64) for p in pairs}
    for r in rows:
        present = tuple(i for i in range(SYN_COLS) if r[f"c{i}"] is not None)
        out[present][r[f"c{present[0]}"], r[f"c{present[1]}"]] = r["n"]
    return out


def dpkit_marginals(sdf: Any, dom: Domain, syn: Synthesizer) -> dict[tuple[int, ...], Any]:
    sets = needed_marginals(syn.method, syn.estimator, dom.shape, syn.workload, syn.max_cells)
    codes = encode_spark(dom, sdf, "raise")
    try:
        return {s: codes.marginal(dom.shape, s) for s in sets}
    finally:
        codes.release()


# -- local ---------------------------------------------------------------------------------------


def hand_reports(col: Any) -> np.ndarray:
    from pyspark.sql import functions as f

    r = f.col("report")
    bad = r.isNull() | (r < 0) | (r >= K_REPORTS)
    rows = col.groupBy(f.when(bad, f.lit(-1)).otherwise(r).alias("r")).count().collect()
    out = np.zeros(K_REPORTS, np.int64)
    for row in rows:
        if row["r"] < 0:
            raise ValueError("a malformed report")
        out[row["r"]] = row["count"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mode", choices=("local", "standalone"), default="local")
    ap.add_argument("--layers", default="frame,stats,release,local")
    a = ap.parse_args()
    spark, stop = session(a.mode)
    if spark is None:
        return
    layers = set(a.layers.split(","))
    out: list[tuple[str, ...]] = []
    try:
        sdf = spark.createDataFrame(make_data(a.rows).to_arrow()).repartition(4).cache()
        sdf.count()

        def pair(layer: str, hand: Callable[[], object], dp: Callable[[], object]) -> None:
            t = best_of_each({"hand": hand, "dpkit": dp}, a.repeats)
            out.append((layer, f"{t['hand']:.2f}", f"{t['dpkit']:.2f}",
                        f"{t['dpkit'] / t['hand']:.2f}"))  # fmt: skip
            print(*out[-1], flush=True)

        if "frame" in layers:
            fr = sdf.select("user", "key", "x")
            pair("frame group-by, private keys", lambda: hand_frame(fr), lambda: dpkit_frame(fr))
        if "stats" in layers:
            col = sdf.select("x")
            h = hand_mean(col)
            fixed = math.ldexp(1.0, 20)
            assert h[1] == a.rows and h[0] is not None and fixed > 0
            pair("stats.mean", lambda: hand_mean(col),
                 lambda: st.mean(col, bounds=(0.0, 100.0), epsilon=EPS))  # fmt: skip
            pair("stats.var", lambda: hand_var(col),
                 lambda: st.var(col, bounds=(0.0, 100.0), epsilon=EPS))  # fmt: skip
        if "release" in layers:
            dom = syn_domain()
            names = list(dom.names)
            syn = Synthesizer(
                dom, epsilon=EPS, delta=DELTA, workload=list(itertools.combinations(names, 2))
            )
            cols = sdf.select(*names)
            mine, theirs = dpkit_marginals(cols, dom, syn), hand_marginals(cols, dom)
            assert all(np.array_equal(mine[p], theirs[p]) for p in theirs), "marginals differ"
            pair("synthesizer marginals (15 pairs)", lambda: hand_marginals(cols, dom),
                 lambda: dpkit_marginals(cols, dom, syn))  # fmt: skip
        if "local" in layers:
            rep = sdf.select("report")
            grr = GRR(epsilon=EPS, k=K_REPORTS)
            c, n = grr.support_counts(rep)
            assert n == a.rows and np.array_equal(c, hand_reports(rep)), "counts differ"
            pair("local GRR support counts", lambda: hand_reports(rep),
                 lambda: grr.support_counts(rep))  # fmt: skip
        sdf.unpersist()
    finally:
        stop()
    load = os.getloadavg()[0]
    print(f"\nSpark {a.mode}, {a.rows:,} rows, load average {load:.1f} (best of {a.repeats})")
    print(table(out, ("layer", "by hand s", "dpkit s", "dpkit / hand")))


if __name__ == "__main__":
    main()
