"""Per-partition clamping and planned accuracy: dpkit.frame against PipelineDP.

Each privacy unit has several rows in each of a few partitions; each unit's total per partition
is clamped (dpkit: ``dpf.sum(..., unit_total=)``; PipelineDP: ``min_sum_per_partition`` /
``max_sum_per_partition``), with public partitions and the same ε, δ and contribution bounds. In
one process, on the same data, it prints:

* best-of-k times of one release and their ratio (dpkit / PipelineDP);
* over R releases of each, the empirical 95th percentile of |released − exact clamped sum| over
  every partition, next to dpkit's planned 95% half-width (``explain().accuracy()``, computed
  before any charge), and the ratios empirical / planned (dpkit's should be about 1: it is the
  exact quantile of the noise it draws) and PipelineDP / dpkit (their noise for the same bounds).

The data make the bounding deterministic (each unit in exactly ``L0`` partitions, every row
within the row bounds), so both libraries release noisy versions of the same exact sums.

    PYTHONPATH=src /tmp/fresh/.venv-bench/bin/python benchmarks/per_partition.py [--units N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import dpkit.frame as dpf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_of, table

# Public partitions need no δ: both libraries add Laplace noise (pure ε-DP) to the sums.
EPS, DELTA, L0, ROWS, PARTS, TOTAL = 1.0, 0.0, 2, 3, 20, 150.0


def make_data(units: int, seed: int = 0) -> pl.DataFrame:
    g = np.random.default_rng(seed)
    parts = np.stack([g.choice(PARTS, L0, replace=False) for _ in range(units)])
    user = np.repeat(np.arange(units), L0 * ROWS)
    key = np.repeat(parts.ravel(), ROWS)
    return pl.DataFrame({"user": user, "key": key, "x": g.uniform(0.0, 100.0, user.size)})


def exact_sums(df: pl.DataFrame) -> dict[int, float]:
    per_unit = df.group_by("user", "key").agg(pl.col("x").sum().clip(0.0, TOTAL).alias("t"))
    out = per_unit.group_by("key").agg(pl.col("t").sum())
    return dict(zip(out["key"].to_list(), out["t"].to_list(), strict=True))


def dpkit_query(df: pl.DataFrame) -> Any:
    return (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", public_keys=list(range(PARTS)), max_groups=L0, max_rows=ROWS)
        .agg(dpf.sum("x", bounds=(0.0, 100.0), unit_total=(0.0, TOTAL), alias="s"))
    )


def dpkit_release(q: Any) -> dict[int, float]:
    f = q.release(epsilon=EPS, delta=DELTA).frame
    return dict(zip(f["key"].to_list(), f["s"].to_list(), strict=True))


def pipelinedp_release(rows: list[tuple[int, int, float]]) -> dict[int, float] | None:
    import pipeline_dp

    budget = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPS, total_delta=DELTA)
    engine = pipeline_dp.DPEngine(budget, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.SUM],
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=L0,
        max_contributions_per_partition=ROWS,
        min_sum_per_partition=0.0,
        max_sum_per_partition=TOTAL,
    )
    ext = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0],
        partition_extractor=lambda r: r[1],
        value_extractor=lambda r: r[2],
    )
    out = engine.aggregate(rows, params, ext, public_partitions=list(range(PARTS)))
    budget.compute_budgets()
    return {int(k): float(v.sum) for k, v in out}


def errors(release: Any, exact: dict[int, float], repeats: int) -> np.ndarray:
    return np.array(
        [abs(v - exact[k]) for _ in range(repeats) for k, v in release().items()], dtype=float
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=20_000)
    ap.add_argument("--releases", type=int, default=30)
    args = ap.parse_args()
    df = make_data(args.units)
    exact = exact_sums(df)
    q = dpkit_query(df)
    start = time.perf_counter()
    planned = q.explain(epsilon=EPS, delta=DELTA).accuracy(0.05)["s"]  # before any charge
    t_plan = time.perf_counter() - start
    t_dp = best_of(lambda: dpkit_release(q), 3)
    e_dp = errors(lambda: dpkit_release(q), exact, args.releases)
    q95_dp = float(np.quantile(e_dp, 0.95))
    rows = [
        (f"dpkit.frame release ({df.height:,} rows)", f"{t_dp:.3f}", "", ""),
        ("dpkit explain().accuracy() (before charge)", f"{t_plan:.3f}", f"{planned:.1f}", ""),
        ("dpkit empirical 95% |error|", "", f"{q95_dp:.1f}", f"{q95_dp / planned:.2f}"),
    ]
    try:
        import pipeline_dp  # noqa: F401
    except ImportError:
        print("skip PipelineDP: not installed")
    else:
        tuples = list(zip(df["user"].to_list(), df["key"].to_list(), df["x"].to_list(),
                          strict=True))  # fmt: skip
        t_pdp = best_of(lambda: pipelinedp_release(tuples), 3)
        e_pdp = errors(lambda: pipelinedp_release(tuples), exact, args.releases)
        q95_pdp = float(np.quantile(e_pdp, 0.95))
        rows.insert(1, ("PipelineDP release (LocalBackend)", f"{t_pdp:.3f}", "", ""))
        rows.append(("PipelineDP empirical 95% |error|", "", f"{q95_pdp:.1f}",
                     f"{q95_pdp / planned:.2f}"))  # fmt: skip
        rows.append(("time ratio dpkit / PipelineDP", f"{t_dp / t_pdp:.3f}", "", ""))
        rows.append(("error ratio PipelineDP / dpkit", "", f"{q95_pdp / q95_dp:.2f}", ""))
    print(f"{args.units:,} units, {L0} partitions each, {ROWS} rows per partition, "
          f"unit total in [0, {TOTAL:g}], epsilon={EPS}, delta={DELTA}, {PARTS} public partitions, "
          f"{args.releases} releases per library")  # fmt: skip
    print(table(rows, ("what", "seconds", "half-width", "/ planned")))


if __name__ == "__main__":
    main()
