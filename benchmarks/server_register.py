"""Registering a large categorical file in the curator service: 10,000,000 rows, three text
columns of about 1,000 categories (5% of the cells undeclared) and one numeric column, from
Parquet and from CSV.

Times :func:`dpkit.server._ingest.read_source` (read and clean: what registration does before
writing the Arrow file) against pyarrow reading the same columns with no cleaning at all (the
limit), in one process, and prints the ratio. Wall and CPU seconds; on a shared machine the CPU
time is the steadier figure.

``PYTHONPATH=src .venv/bin/python benchmarks/server_register.py [--rows N] [--csv]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dpkit.server._ingest import read_source
from dpkit.server._schema import DatasetSchema

CATEGORIES = [f"c{i:04d}" for i in range(1000)]
DECLARED = CATEGORIES[:950]


def _write(folder: Path, rows: int, csv: bool) -> list[Path]:
    gen = np.random.default_rng(0)
    cats = np.array(CATEGORIES)
    cols = {f"s{j}": pa.array(cats[gen.integers(0, 1000, rows)]) for j in range(3)}
    cols["x"] = pa.array(gen.uniform(0, 100, rows))
    table = pa.table(cols)
    paths = [folder / "big.parquet"]
    pq.write_table(table, paths[0])
    if csv:
        paths.append(folder / "big.csv")
        pacsv.write_csv(table, paths[1])
    return paths


def _timed(fn: object) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()  # type: ignore[operator]
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--csv", action="store_true", help="also time a CSV file (slow to write)")
    args = ap.parse_args()
    schema = DatasetSchema.from_dict({"name": "big", "columns": [
        *[{"name": f"s{j}", "type": "category", "categories": DECLARED} for j in range(3)],
        {"name": "x", "type": "float", "bounds": [0, 100]}]})  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for path in _write(Path(tmp), args.rows, args.csv):

            def plain(path: Path = path) -> None:
                if path.suffix == ".csv":
                    pacsv.read_csv(path)
                else:
                    pq.read_table(path)

            base = _timed(plain)
            ours = _timed(lambda path=path: read_source(path, schema))
            print(f"{path.suffix[1:]:8s} {args.rows:,} rows: read_source {ours[0]:.2f} s wall "
                  f"{ours[1]:.2f} s CPU; pyarrow read alone {base[0]:.2f} s wall {base[1]:.2f} s "
                  f"CPU; ratio (CPU) {ours[1] / base[1]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
