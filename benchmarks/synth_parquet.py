"""Synthesizer.fit streamed from a Parquet file: time and peak memory against the row count.

Writes a Parquet file of ``--rows`` records of 8 small-domain integer columns (in chunks, so
the writer never holds the table), then fits, each in a process of its own so that its peak
resident memory is its own:

* Polars scan + NumPy by hand, no privacy (the limit): one pass over the file in batches, the
  28 two-way marginal counts by ``np.bincount`` of combined codes;
* dpkit: ``Synthesizer(method="aim", workload=every pair).fit(path)`` — the same one pass
  (clamping, binning, validation), then the private fit (noise, selection, the graphical model)
  on the driver; its memory does not grow with the rows.

Run: ``PYTHONPATH=src python benchmarks/synth_parquet.py [--rows 100000000]`` (default 2M rows;
the file goes to a temporary directory and is deleted). Absolute times on a shared machine mean
little; compare the ratio.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

SIZES = (2, 3, 4, 5, 6, 8, 10, 12)  # cells per column
CHUNK = 5_000_000


def write_file(path: str, rows: int, seed: int = 0) -> None:
    """``rows`` records in row groups of 1M, generated and written a chunk at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    g = np.random.default_rng(seed)
    schema = pa.schema([(f"c{i}", pa.int16()) for i in range(len(SIZES))])
    with pq.ParquetWriter(path, schema) as w:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            base = g.integers(0, 1 << 16, n)  # a shared latent value: correlated columns
            cols = {
                f"c{i}": ((base % k + (g.random(n) < 0.3) * g.integers(0, k, n)) % k).astype(
                    np.int16
                )
                for i, k in enumerate(SIZES)
            }
            w.write_table(pa.table(cols, schema=schema), row_group_size=1 << 20)


def fit_by_hand(path: str) -> None:
    import polars as pl

    counts = {
        p: np.zeros(SIZES[p[0]] * SIZES[p[1]], np.int64)
        for p in itertools.combinations(range(len(SIZES)), 2)
    }
    lf = pl.scan_parquet(path)
    for batch in lf.collect_batches(chunk_size=1 << 20, maintain_order=False):
        cols = [np.clip(batch[f"c{i}"].to_numpy().astype(np.int64), 0, k - 1)
                for i, k in enumerate(SIZES)]  # fmt: skip
        for (i, j), c in counts.items():
            c += np.bincount(cols[i] * SIZES[j] + cols[j], minlength=c.size)


def fit_dpkit(path: str) -> None:
    from dpkit.release import Domain, Numeric, Synthesizer

    dom = Domain({f"c{i}": Numeric(0, k - 1, bins=k, integer=True) for i, k in enumerate(SIZES)})
    pairs = list(itertools.combinations(dom.names, 2))
    model = Synthesizer(dom, epsilon=1.0, delta=1e-9, workload=pairs).fit(path, rng=0)
    print(f"  fitted: {len(model.measured)} measurements, n̂ = {model.n_estimate:,.0f}")


def child(kind: str, path: str) -> tuple[float, float]:
    """Wall seconds and peak resident GiB of one fit in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", kind, path])
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"the {kind} fit failed ({proc.returncode})")
    return time.perf_counter() - start, usage.ru_maxrss / 2**20  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        {"hand": fit_by_hand, "dpkit": fit_dpkit}[a.child[0]](a.child[1])
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        path = os.path.join(tmp, "synth.parquet")
        t = time.perf_counter()
        write_file(path, a.rows)
        size = os.path.getsize(path) / 2**20
        print(f"wrote {a.rows:,} rows ({size:,.0f} MiB) in {time.perf_counter() - t:.0f} s")
        hand = child("hand", path)
        dp = child("dpkit", path)
    load = os.getloadavg()[0]
    print(f"Synthesizer.fit on Parquet, {a.rows:,} rows x 8 columns, load average {load:.1f}")
    print(f"  {'contender':<44} {'wall s':>8} {'peak RSS GiB':>13}")
    for name, (wall, peak) in (
        ("Polars scan + np.bincount by hand, no privacy", hand),
        ("dpkit Synthesizer(aim, every pair).fit(path)", dp),
    ):
        print(f"  {name:<44} {wall:>8.1f} {peak:>13.2f}")
    print(f"  time ratio dpkit / by hand: {dp[0] / hand[0]:.2f}")


if __name__ == "__main__":
    main()
