"""Constant-work kernels: the exact fixed-point sum and permute-and-flip, against NumPy and
diffprivlib, in one process.

Run with ``make bench`` (or ``PYTHONPATH=src .venv-bench/bin/python benchmarks/selection.py``).
dpkit's sum clamps every record and its permute-and-flip flips every coin whatever the data (no
timing channel); the peers stop early or skip work. Best of 7 calls; the ratios matter.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import best_of, table
from dpkit.mechanisms import PermuteAndFlip
from dpkit.stats._fixed import fixed_sum, power_exponent

REPEATS = 7


def main() -> None:
    warnings.simplefilter("ignore")
    x = np.random.default_rng(0).uniform(0, 100, 10_000_000)
    bounds = (0.0, 100.0)
    k = power_exponent(bounds)
    t_np = best_of(lambda: np.sum(x), REPEATS)
    t_clip = best_of(lambda: np.clip(x, *bounds).sum(), REPEATS)
    t_fx = best_of(lambda: fixed_sum(x, bounds, k), REPEATS)
    print("Sum of 10,000,000 floats clamped to (0, 100), no noise (best of 7)")
    rows = [
        ("numpy.sum (no clamp, float rounding)", f"{t_np * 1e3:8.2f}", "1.00"),
        ("numpy clip + sum (float rounding)", f"{t_clip * 1e3:8.2f}", f"{t_clip / t_np:5.2f}"),
        ("dpkit exact fixed-point sum", f"{t_fx * 1e3:8.2f}", f"{t_fx / t_np:5.2f}"),
    ]
    print(table(rows, ("kernel", "ms", "x numpy.sum")))

    pf = PermuteAndFlip(epsilon=1.0)
    g = np.random.default_rng(1)
    print("\nPermute-and-flip over 1,000 candidates, ε = 1 (best of 7; dpkit with secure noise)")
    rows = []
    for name, scores in (
        ("uniform(0, 1)", g.uniform(0, 1, 1000)),
        ("0, 1, ..., 999", np.arange(1000.0)),
        ("normal(0, 10)", g.normal(0, 10, 1000)),
    ):
        t_dp = best_of(lambda s=scores: pf.select_index(s), REPEATS)
        peer = _diffprivlib(scores)
        t_peer = best_of(peer, REPEATS) if peer is not None else float("nan")
        rows.append((name, f"{t_dp * 1e3:7.3f}", f"{t_peer * 1e3:7.3f}", f"{t_peer / t_dp:6.2f}"))
    print(table(rows, ("scores", "dpkit ms", "diffprivlib ms", "speed-up")))


def _diffprivlib(scores: np.ndarray) -> Callable[[], object] | None:  # type: ignore[type-arg]
    try:
        from diffprivlib.mechanisms import PermuteAndFlip as DplPermuteAndFlip
    except ImportError:
        print("  (diffprivlib not installed: skipped)")
        return None
    utility = scores.tolist()
    mech = DplPermuteAndFlip(epsilon=1.0, sensitivity=1.0, utility=utility)
    return mech.randomise


if __name__ == "__main__":
    main()
