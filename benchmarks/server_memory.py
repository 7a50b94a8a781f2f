"""The curator service's memory with one and with two worker processes, on a 10,000,000-row
Parquet dataset (7 numeric columns and 1 categorical: a 640 MB stored file).

Target (issue "the service without N copies"): two workers use less than 1.3 times the memory
of one, measured as total resident memory. Each worker is a Python process with its own
:class:`~dpkit.server._service.Curator` over one ledger and data directory (what ``dpkit serve``
with ``workers = 2`` runs), which answers a ``mean`` of every numeric column and a
``histogram`` of the categorical one, so that every page of the data has been read; then, with
every worker alive, the benchmark reads ``/proc/<pid>/smaps_rollup`` of each:

* ``PSS`` (proportional set size: a page shared by k processes counts 1/k in each), summed over
  the workers: their total resident memory, each shared page counted once;
* ``anon``: each worker's private memory (heap: its own copies of anything).

``copies`` runs the same workers holding their own copy of every column (as the service did
before datasets were mapped: ``np.load`` of each column), for comparison. No peer library
serves DP queries from a shared store, so the comparison is with that former design.

Linux only. ``PYTHONPATH=src .venv/bin/python benchmarks/server_memory.py [--rows N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 1 << 20
NUMERIC = [f"x{i}" for i in range(7)]

_WORKER = r"""
import gc, json, sys
from pathlib import Path
import numpy as np
from dpkit.server import ServerConfig, Table
from dpkit.server._service import Curator

d, key, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
cur = Curator(ServerConfig(ledger=str(d / "l.db"), data_dir=d / "data", import_dir=d / "imp"))
cur.start()
if mode == "copies":  # the former design: every column loaded into this process's memory
    t = cur.tables["big"]
    copied = Table(t.schema, {k: np.array(v) for k, v in t.columns.items()})
    cur._install(copied, cur.versions["big"])
    del t, copied  # the mapped table is dropped, and the file unmapped with it
    gc.collect()
who = cur.authenticate(key)
for name in json.loads(sys.argv[4]):
    q = {"query": "mean", "column": name}
    assert cur.query(who, {"dataset": "big", "epsilon": 0.1, **q})["status"] == "released"
q = {"query": "histogram", "column": "c"}
assert cur.query(who, {"dataset": "big", "epsilon": 0.1, **q})["status"] == "released"
print("ready", flush=True)
sys.stdin.readline()
"""


def _rollup(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts[0] in ("Rss:", "Pss:", "Anonymous:"):
                out[parts[0][:-1].lower()] = int(parts[1]) * 1024
    return out


def _parquet(path: Path, rows: int) -> None:
    """The dataset, written one row group at a time (the generator never holds all of it)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    gen = np.random.default_rng(0)
    cats = np.array(["a", "b", "c", "d"])
    step = 1_000_000
    writer = None
    for start in range(0, rows, step):
        n = min(step, rows - start)
        cols = {name: gen.uniform(0, 100, n) for name in NUMERIC}
        cols["c"] = cats[gen.integers(0, 4, n)]
        table = pa.table(cols)
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    assert writer is not None
    writer.close()


def _setup(root: Path, rows: int) -> str:
    from dpkit.server import ServerConfig
    from dpkit.server._service import Curator

    (root / "imp").mkdir(parents=True)
    _parquet(root / "imp" / "big.parquet", rows)
    cfg = ServerConfig(ledger=str(root / "l.db"), data_dir=root / "data", import_dir=root / "imp")
    cur = Curator(cfg)
    cur.start()
    columns = [{"name": n, "type": "float", "bounds": [0, 100]} for n in NUMERIC]
    columns.append({"name": "c", "type": "category", "categories": ["a", "b", "c", "d"]})
    cur.register_dataset(
        {"name": "big", "source": "big.parquet", "total_epsilon": 1e5, "columns": columns}
    )
    a = cur.add_analyst("ann")
    cur.ledger.set_budget(a["id"], "big", 1e5, 0.0)
    cur.close()
    return str(a["key"])


def _measure(root: Path, key: str, mode: str, workers: int) -> list[dict[str, int]]:
    cmd = [sys.executable, "-c", _WORKER, str(root), key, mode, json.dumps(NUMERIC)]
    pipe = subprocess.PIPE
    procs = [subprocess.Popen(cmd, stdin=pipe, stdout=pipe, text=True) for _ in range(workers)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        return [_rollup(p.pid) for p in procs]
    finally:
        for p in procs:
            p.communicate("\n", timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        key = _setup(root, args.rows)
        # the registering Curator is gone, but its mapped table may wait in a reference cycle:
        # collected now, so that this process (not a worker) holds no share of the file's pages
        gc.collect()
        from dpkit.server._store import DATA_FILE

        stored = (root / "data" / "big" / DATA_FILE).stat().st_size
        took, load = time.perf_counter() - t0, os.getloadavg()[0]
        print(f"{args.rows:,} rows registered from Parquet in {took:.0f} s; "
              f"stored file {stored / MB:.0f} MB; load average {load:.1f}")  # fmt: skip
        print(f"{'mode':8} {'workers':>7} {'total PSS MB':>13} {'anon MB each':>14} "
              f"{'vs 1 worker':>12}")  # fmt: skip
        for mode in ("mapped", "copies"):
            one = None
            for n in (1, 2):
                rows = _measure(root, key, mode, n)
                total = sum(r["pss"] for r in rows)
                one = one or total
                anon = " ".join(f"{r['anonymous'] / MB:.0f}" for r in rows)
                print(f"{mode:8} {n:>7} {total / MB:>13.0f} {anon:>14} {total / one:>11.2f}x")
    print("target: mapped, 2 workers <= 1.3x of 1 worker")


if __name__ == "__main__":
    main()
