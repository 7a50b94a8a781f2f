"""dpkit.frame vs raw Polars, hand-written bounding, OpenDP, PipelineDP and hand-written PySpark.

Workload (issue 8): 10M rows, 1M privacy units, Zipf keys (~5,000 distinct), L∞ = 1, L0 = 5,
count + sum + mean of a value in [0, 100], ε = 1, δ = 1e-6; private key selection, and public
keys (all 5,000). Everything runs in one process on the same data; ratios matter, absolute times
on a shared machine do not.

    PYTHONPATH=src flock /tmp/dpkit-heavy.lock python benchmarks/frame.py [--rows N]
    PYTHONPATH=src flock /tmp/dpkit-heavy.lock python benchmarks/frame.py --parquet 100000000

``--parquet N`` writes N rows to a temporary Parquet file (1M units, Zipf keys), runs the release
from ``pl.scan_parquet`` in a child process, reports its time and peak resident memory, and
deletes the file. ``--partitions P`` (default 16) bounds the units in P hash partitions, one pass
each; ``--engine streaming`` (default) or ``auto`` (Polars' in-memory engine, per partition).
``--partitions 1`` is the single pass.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import polars as pl

import dpkit.frame as dpf
import dpkit.stats as st
from _spark import local_spark
from _timing import best_of, print_targets, table, target

EPS, DELTA, L_INF, L0, KEYS = 1.0, 1e-6, 1, 5, 5000


def make_data(rows: int, seed: int = 0) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "user": g.integers(0, max(rows // 10, 1), rows),
            "key": np.minimum(g.zipf(1.3, rows), KEYS).astype(np.int32),
            "x": g.uniform(0.0, 100.0, rows),
        }
    )


def raw_polars(df: pl.DataFrame) -> Any:
    return (
        df.lazy()
        .group_by("key")
        .agg(pl.len(), pl.col("x").sum(), pl.col("x").mean().alias("m"))
        .collect()
    )


def hand_bounded_polars(df: pl.DataFrame) -> Any:
    """The limit: the same bounds written by hand (first rows by data order, no noise)."""
    pairs = (
        df.lazy()
        .group_by("user", "key")
        .agg(pl.col("x").clip(0, 100).head(L_INF).sum(), pl.len().clip(0, L_INF).alias("n"))
    )
    pairs = pairs.filter(pl.int_range(pl.len()).over("user") < L0)
    return pairs.group_by("key").agg(pl.col("n").sum(), pl.col("x").sum()).collect()


def hand_bounded_polars_sorted(df: pl.DataFrame) -> Any:
    """The same bounds by one stable sort and running counts (no per-pair group-by, no window):
    the first L∞ rows of each (unit, key) in data order, the unit's first L0 keys in key order."""
    u, k = pl.col("user"), pl.col("key")
    new_user = u.ne_missing(u.shift(1))
    new_pair = new_user | k.ne_missing(k.shift(1))
    rows = (
        df.lazy()
        .sort("user", "key", maintain_order=True)
        .with_columns(
            new_user.alias("nu"),
            new_pair.alias("np"),
            pl.int_range(pl.len(), dtype=pl.Int64).alias("i"),
        )
        .with_columns(pl.col("np").cast(pl.Int64).cum_sum().alias("p"))
    )
    first_pair = pl.when(pl.col("nu")).then(pl.col("p")).forward_fill()
    first_row = pl.when(pl.col("np")).then(pl.col("i")).forward_fill()
    kept = rows.filter((pl.col("p") - first_pair < L0) & (pl.col("i") - first_row < L_INF))
    return (
        kept.group_by("key")
        .agg(pl.len().alias("n"), pl.col("x").clip(0, 100).sum(), pl.col("np").sum())
        .collect()
    )


def dpkit_query(data: Any, public: bool) -> Any:
    keys = list(range(1, KEYS + 1)) if public else None
    q = dpf.Query(data, privacy_unit="user").group_by(
        "key", public_keys=keys, max_rows=L_INF, max_groups=L0
    )
    return q.agg(dpf.count(), dpf.sum("x", bounds=(0, 100)), dpf.mean("x", bounds=(0, 100)))


def opendp_release(df: pl.DataFrame, sums: bool = True) -> Any:
    """The same query in OpenDP's Polars API (0.16), end to end (calibration + run).

    - privacy unit: ``unit_of(contributions=1, identifier=pl.col("user"))``, one user changes
      (``contributions=[]`` gives no bound on changed users, so no truncation bound is derived
      and 0.16 falls back to margins: ``max_groups · max_length`` = 5000 · 10^7 overflows u32);
    - margins: at most 5,000 keys (``Margin(by=["key"], max_groups=5000)``) and at most
      ``df.height`` rows (``Margin(by=[], max_length=n)``), which float sums and means need;
    - L∞ = 1: ``truncate_per_group(1, by=["key"])`` (a shuffled row per (user, key));
    - L0 = 5: ``truncate_num_groups(6, by=["key"], keep="first")``: 0.16 keeps the rows with
      ``rank("dense") < k`` and dense ranks start at 1, so k = 6 keeps 5 keys per user, the same
      bounded table as ours (its accounting assumes 6, a little more noise); ``keep="sample"``
      (the default) ranks ``struct(hash, struct)`` whose two fields share a name and fails at
      collect time (Polars DuplicateError), so "first" (the user's smallest keys) is used;
    - private key selection: OpenDP's own threshold (a group-by without public keys under
      approximate DP), count + sum + mean of ``x`` clamped to [0, 100], ε = 1, δ = 1e-6.
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    ctx = dp.Context.compositor(
        data=df.lazy(),
        privacy_unit=dp.unit_of(contributions=1, identifier=pl.col("user")),
        privacy_loss=dp.loss_of(epsilon=EPS, delta=DELTA),
        split_evenly_over=1,
        margins=[
            dp.polars.Margin(by=["key"], max_groups=KEYS),
            dp.polars.Margin(by=[], max_length=df.height),
        ],
    )
    x = pl.col("x").fill_nan(0.0).fill_null(0.0)
    q = (
        ctx.query()
        .truncate_per_group(L_INF, by=["key"])
        .truncate_num_groups(L0 + 1, by=["key"], keep="first")
        .group_by("key")
        .agg(
            pl.len().dp.noise(),
            *(
                (x.dp.sum((0.0, 100.0)).alias("sum"), x.dp.mean((0.0, 100.0)).alias("mean"))
                if sums
                else ()
            ),
        )
    )
    return q.release().collect()


def pipelinedp_release(df: pl.DataFrame) -> Any:
    import pipeline_dp

    rows = list(zip(df["user"].to_list(), df["key"].to_list(), df["x"].to_list(), strict=True))
    budget = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPS, total_delta=DELTA)
    engine = pipeline_dp.DPEngine(budget, pipeline_dp.LocalBackend())
    m = pipeline_dp.Metrics
    params = pipeline_dp.AggregateParams(
        metrics=[m.COUNT, m.SUM, m.MEAN],
        max_partitions_contributed=L0,
        max_contributions_per_partition=L_INF,
        min_value=0.0,
        max_value=100.0,
    )
    ext = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0],
        partition_extractor=lambda r: r[1],
        value_extractor=lambda r: r[2],
    )
    out = engine.aggregate(rows, params, ext)
    budget.compute_budgets()
    return list(out)


def hand_bounded_spark(sdf: Any) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    w1 = Window.partitionBy("user", "key").orderBy(f.xxhash64("user", "key", "x"))
    rows = sdf.withColumn("rn", f.row_number().over(w1)).filter(f.col("rn") <= L_INF)
    pairs = rows.groupBy("user", "key").agg(
        f.count(f.lit(1)).alias("n"), f.sum(f.greatest(f.least("x", f.lit(100.0)), f.lit(0.0)))
    )
    w2 = Window.partitionBy("user").orderBy(f.xxhash64("user", "key"))
    pairs = pairs.withColumn("g", f.row_number().over(w2)).filter(f.col("g") <= L0)
    return pairs.groupBy("key").agg(f.sum("n"), f.count(f.lit(1))).toArrow()


def run_spark(df: pl.DataFrame, rows: list[tuple[str, ...]], base: float | None) -> None:
    spark = local_spark()
    if spark is None:
        return
    try:
        sdf = spark.createDataFrame(df.to_arrow()).cache()
        sdf.count()
        t_hand = best_of(lambda: hand_bounded_spark(sdf), 2)
        q = dpkit_query(sdf, public=False)
        t_dp = best_of(lambda: q.release(epsilon=EPS, delta=DELTA), 2)
        rows.append(
            (f"PySpark hand-written bounding ({df.height:,} rows)", f"{t_hand:.2f}", "1.00")
        )
        rows.append(("dpkit.frame on Spark, private keys", f"{t_dp:.2f}", f"{t_dp / t_hand:.2f}"))
        col = sdf.select("x")
        t_sum = best_of(lambda: hand_clamped_sum_spark(col), 2)
        t_mean = best_of(lambda: st.mean(col, bounds=(0.0, 100.0), epsilon=EPS), 2)
        t_var = best_of(lambda: st.var(col, bounds=(0.0, 100.0), epsilon=EPS), 2)
        rows.append(("PySpark hand-written clamped sum and count", f"{t_sum:.2f}", "1.00"))
        rows.append(("dpkit.stats.mean on Spark (exact fixed point)", f"{t_mean:.2f}",
                     f"{t_mean / t_sum:.2f}"))  # fmt: skip
        rows.append(("dpkit.stats.var on Spark (exact fixed point)", f"{t_var:.2f}",
                     f"{t_var / t_sum:.2f}"))  # fmt: skip
    finally:
        spark.stop()


def hand_clamped_sum_spark(col: Any) -> Any:
    """What a hand-written job computes for a mean: a float sum of clamped values and a count."""
    from pyspark.sql import functions as f

    x = f.least(f.greatest(f.col("x"), f.lit(0.0)), f.lit(100.0))
    return col.agg(f.sum(x), f.count(f.lit(1))).first()


def row_hash_part(rows_n: int, rows: list[tuple[str, ...]]) -> None:
    """dpkit's row hash (AES-CMAC, the same on every engine) against Polars' own hash."""
    from dpkit.frame._rowhash import hash_series

    df = make_data(rows_n).with_columns(pl.col("key").cast(pl.String))
    names = ["user", "key", "x"]
    t_pl = best_of(lambda: df.select(pl.struct(names).hash(seed=1)), 3)
    t_dp = best_of(lambda: df.select(hash_series(names, (1, 2))), 3)
    rows.append((f"Polars struct hash ({rows_n:,} rows, 3 columns)", f"{t_pl:.2f}", "1.00"))
    rows.append(("dpkit row hash (AES-CMAC, BLAKE2b for text)", f"{t_dp:.2f}",
                 f"{t_dp / t_pl:.2f}"))  # fmt: skip


def polars_part(
    rows_n: int, rows: list[tuple[str, ...]], goals: list[tuple[str, str, str, str]]
) -> pl.DataFrame:
    df = make_data(rows_n)
    t_raw = best_of(lambda: raw_polars(df))
    t_group = best_of(lambda: hand_bounded_polars(df))
    t_sort = best_of(lambda: hand_bounded_polars_sorted(df))
    t_hand = min(t_group, t_sort)  # the limit is the faster of two competent hand-written plans
    priv, pub = dpkit_query(df, public=False), dpkit_query(df, public=True)
    t_priv = best_of(lambda: priv.release(epsilon=EPS, delta=DELTA))
    t_pub = best_of(lambda: pub.release(epsilon=EPS))
    rows.append(
        (f"raw Polars count+sum+mean ({rows_n:,} rows)", f"{t_raw:.3f}", f"{t_raw / t_hand:.2f}")
    )
    rows.append(
        ("hand-written bounding, group-by + window", f"{t_group:.3f}", f"{t_group / t_hand:.2f}")
    )
    rows.append(("hand-written bounding, one sort", f"{t_sort:.3f}", f"{t_sort / t_hand:.2f}"))
    rows.append(("dpkit.frame, private key selection", f"{t_priv:.3f}", f"{t_priv / t_hand:.2f}"))
    rows.append(("dpkit.frame, 5,000 public keys", f"{t_pub:.3f}", f"{t_pub / t_hand:.2f}"))
    goals.append(
        target("dpkit.frame private keys 10M vs hand bounding", t_priv / t_hand, at_most=1.5)
    )
    goals.append(
        target("dpkit.frame public keys 10M vs hand bounding", t_pub / t_hand, at_most=1.5)
    )
    odp_speedup = float("nan")
    try:
        t_odp = best_of(lambda: opendp_release(df), 1)
        rows.append(("OpenDP Polars API (end to end)", f"{t_odp:.3f}", f"{t_odp / t_hand:.2f}"))
        print(f"dpkit is {t_odp / t_priv:.1f}x faster than OpenDP")
        odp_speedup = t_odp / t_priv
    except ImportError:
        print("skip OpenDP: not installed (pip install 'opendp[polars]')")
    except Exception as exc:  # a peer's failure is reported, not fatal
        print(f"OpenDP fails on this workload: {type(exc).__name__}: {str(exc)[:300]}")
        try:
            t_odp = best_of(lambda: opendp_release(df, sums=False), 1)
            rows.append(("OpenDP Polars API, count only", f"{t_odp:.3f}", f"{t_odp / t_hand:.2f}"))
            print(f"dpkit (count+sum+mean) is {t_odp / t_priv:.1f}x faster than OpenDP (count)")
        except Exception as exc2:
            print(f"skip OpenDP: count only fails too: {type(exc2).__name__}: {str(exc2)[:300]}")
    goals.append(target("dpkit.frame vs OpenDP Polars API, end to end", odp_speedup, at_least=10))
    return df


def pipelinedp_part(rows: list[tuple[str, ...]]) -> None:
    df = make_data(1_000_000, seed=1)
    try:
        import pipeline_dp  # noqa: F401
    except ImportError:
        print("skip PipelineDP: not installed")
        return
    q = dpkit_query(df, public=False)
    t_dp = best_of(lambda: q.release(epsilon=EPS, delta=DELTA))
    try:
        t_pdp = best_of(lambda: pipelinedp_release(df), 1)
    except Exception as exc:  # a peer's failure is reported, not fatal
        print(f"skip PipelineDP: it fails on this workload: {type(exc).__name__}: {exc}")
        return
    rows.append(("dpkit.frame, private keys (1,000,000 rows)", f"{t_dp:.3f}", "1.00"))
    rows.append(
        ("PipelineDP local backend (1,000,000 rows)", f"{t_pdp:.3f}", f"{t_pdp / t_dp:.2f}")
    )


def parquet_child(path: str, partitions: int, engine: str) -> None:
    lf = pl.scan_parquet(path)
    q = dpkit_query(lf, public=False)
    t = time.perf_counter()
    r = q.release(epsilon=EPS, delta=DELTA, streaming=engine == "streaming", partitions=partitions)
    dt = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB → GiB
    print(
        f"{path} ({engine} engine, {partitions} partition(s)): {r.frame.height} keys released "
        f"in {dt:.1f} s, peak RSS {peak:.2f} GiB (Polars {pl.__version__})"
    )


def parquet_part(rows_n: int, partitions: int, engine: str) -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("DPKIT_BENCH_TMP")) as tmp:
        path = os.path.join(tmp, "frame.parquet")
        chunk = 10_000_000
        with_schema = None
        writer: Any = None
        import pyarrow.parquet as pq

        for i in range(0, rows_n, chunk):
            part = make_data(min(chunk, rows_n - i), seed=100 + i // chunk)
            part = part.with_columns(pl.col("user") + (i // chunk) * 0)  # same 1M-unit space
            table_ = part.to_arrow()
            if writer is None:
                with_schema = table_.schema
                writer = pq.ParquetWriter(path, with_schema)
            writer.write_table(table_)
        writer.close()
        size = os.path.getsize(path) / 1024**3
        print(f"wrote {rows_n:,} rows to Parquet ({size:.2f} GiB)")
        child = [sys.executable, __file__, "--child", path, "--partitions", str(partitions)]
        subprocess.run([*child, "--engine", engine], check=True)
    print("Parquet file deleted")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--spark-rows", type=int, default=1_000_000)
    ap.add_argument("--parquet", type=int, default=0)
    ap.add_argument("--child", default="")
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--engine", choices=("streaming", "auto"), default="streaming")
    ap.add_argument("--no-spark", action="store_true")
    a = ap.parse_args()
    if a.child:
        parquet_child(a.child, a.partitions, a.engine)
        return
    if a.parquet:
        parquet_part(a.parquet, a.partitions, a.engine)
        return
    rows: list[tuple[str, ...]] = []
    goals: list[tuple[str, str, str, str]] = []
    polars_part(a.rows, rows, goals)
    row_hash_part(min(a.rows, 1_000_000), rows)
    pipelinedp_part(rows)
    if not a.no_spark:
        try:
            run_spark(make_data(a.spark_rows, seed=2), rows, None)
        except Exception as exc:
            print(f"Spark part failed: {type(exc).__name__}: {str(exc)[:300]}")
    print(f"Polars {pl.__version__}; machine load {os.getloadavg()[0]:.1f} (shared: ratios only)")
    print(table(rows, ("what", "seconds", "ratio")))
    print_targets(goals)


if __name__ == "__main__":
    main()
