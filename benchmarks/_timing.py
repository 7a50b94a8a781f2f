"""Shared timing helpers for the benchmark scripts, and the speed targets they are held to."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    """Fastest wall time of ``repeats`` calls, in seconds (the least disturbed by other load)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def best_of_each(fns: dict[str, Callable[[], object]], repeats: int = 3) -> dict[str, float]:
    """Fastest wall time of each function, the calls taken in turns (``a b a b …``).

    On a shared machine the load drifts; interleaving lets a slow minute weigh on every
    contestant alike, so that their ratios stay meaningful.
    """
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    """Format rows as a fixed-width text table."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*header), line.format(*("-" * w for w in widths))]
    out += [line.format(*r) for r in rows]
    return "\n".join(out)


def target(
    work: str,
    value: float,
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    unit: str = "x",
) -> tuple[str, str, str, str]:
    """One row of the speed targets (issue 21): the work, its goal, the measured value, a mark.

    ``value`` is a ratio; it passes when it is ``>= at_least`` (throughput, speed-up) or
    ``<= at_most`` (time against a baseline). NaN (a peer that did not run) is marked "n/a".
    """
    if (at_least is None) == (at_most is None):
        raise ValueError("give exactly one of at_least and at_most")
    goal = f">= {at_least:.3g}{unit}" if at_least is not None else f"<= {at_most:.3g}{unit}"
    if value != value:
        return work, goal, "-", "n/a"
    ok = value >= at_least if at_least is not None else value <= at_most  # type: ignore[operator]
    shown = f"{value:.3g}{unit}" if abs(value) < 100 else f"{value:,.0f}{unit}"
    return work, goal, shown, "pass" if ok else "SHORT"


def print_targets(rows: list[tuple[str, str, str, str]]) -> None:
    """Print the target rows with the NumPy line and the machine's load (ratios move with it)."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nSpeed targets (issue 21) — NumPy {np.__version__}, {os.cpu_count()} CPUs, "
        f"load average {load}:"
    )
    print(table(rows, ("work", "target", "measured", "mark")))
    record_targets(rows)


TARGETS_FILE = "DPKIT_BENCH_TARGETS"
"""Environment variable naming a file that collects every target row (``make bench`` sets it and
prints them all at the end with ``benchmarks/_summary.py``)."""


def record_targets(rows: list[tuple[str, str, str, str]]) -> None:
    """Append the rows, with the script, NumPy line and load, to ``$DPKIT_BENCH_TARGETS``."""
    path = os.environ.get(TARGETS_FILE)
    if not path:
        return
    script = Path(sys.argv[0]).name
    load = os.getloadavg()[0]
    with open(path, "a", encoding="utf-8") as f:
        for work, goal, shown, mark in rows:
            line = {"script": script, "numpy": np.__version__, "load": round(load, 2)}
            line |= {"work": work, "target": goal, "measured": shown, "mark": mark}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
