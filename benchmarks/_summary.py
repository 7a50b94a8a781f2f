"""Every speed target ``make bench`` measured, in one table at the end of its output.

Each benchmark prints its own target rows (``_timing.print_targets``) and, when
``$DPKIT_BENCH_TARGETS`` names a file, appends them to it; this script reads that file and prints
all the rows together, each with its NumPy line and the load when it was measured, then lists
the rows of issue 21's table that no script reported (a benchmark that failed or was skipped),
so that a missing figure is as visible as a short one. The core rows (noise, mean, median) are
expected on both NumPy lines: the peers' environment (1.26) and the project's own (2.x).

Run with ``python benchmarks/_summary.py FILE`` (``make bench`` does).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import table

CORE = (
    "float-safe Laplace vs NumPy laplace (unsafe)",
    "float-safe Laplace vs OpenDP",
    "discrete Gaussian sigma=10 vs OpenDP",
    "DP mean of 10M vs numpy.mean",
    "DP median of 1M vs numpy.median",
)
"""Rows expected from both NumPy lines (``make bench`` runs noise.py and stats.py in both)."""

OTHERS = (
    "dpkit.frame private keys 10M vs hand bounding",
    "dpkit.frame vs OpenDP Polars API, end to end",
    "local GRR throughput vs pure-ldp",
    "local OUE throughput vs pure-ldp",
    "curator DP mean vs no-op endpoint (SQLite)",
)
"""The other rows of issue 21's table (peers' environment only)."""


def _line(numpy: str) -> str:
    return "NumPy 1.x" if numpy.startswith("1.") else "NumPy 2.x"


def missing(rows: list[dict[str, str]]) -> list[str]:
    """Issue 21's rows that no benchmark reported (core rows: on each NumPy line)."""
    seen = {(r["work"], _line(r["numpy"])) for r in rows}
    works = {r["work"] for r in rows}
    lines = ("NumPy 1.x", "NumPy 2.x")
    out = [f"{w} ({line})" for w in CORE for line in lines if (w, line) not in seen]
    return out + [w for w in OTHERS if w not in works]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python benchmarks/_summary.py FILE", file=sys.stderr)
        return 2
    path = Path(argv[1])
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    rows = [json.loads(line) for line in lines if line.strip()]
    print("\n== Speed targets: every row measured by this run ==")
    shown = [
        (r["work"], r["numpy"], r["target"], r["measured"], r["mark"], f"{r['load']:.2f}")
        for r in rows
    ]
    print(table(shown, ("work", "NumPy", "target", "measured", "mark", "load")))
    marks = [r["mark"] for r in rows]
    counts = ", ".join(f"{marks.count(m)} {m}" for m in ("pass", "SHORT", "n/a"))
    print(f"{len(rows)} rows: {counts}.")
    for work in missing(rows):
        print(f"not run: {work}")
    return 0  # a report: a short row is printed, not an error (timings depend on the machine)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
