"""Private densities (dpkit.release) against their non-private NumPy/SciPy equivalents.

Run with ``PYTHONPATH=src python benchmarks/release_density.py``. For each method, one fit (the
release, including its noise) and one draw of 100,000 synthetic records are timed on the same data
(n = 100,000, 1-d, on [0, 1]) and printed as ratios to the non-private computation. diffprivlib's
histogram is timed as a peer where it is installed. Best of 3; absolute times on a shared machine
mean little, ratios a little more.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from dpkit.release import (
    bernstein_density,
    histogram_density,
    kde_density,
    ks_synthetic,
    series_density,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_of, table

N = 100_000
EPS = 1.0


def main() -> None:
    x = np.random.default_rng(0).beta(2, 5, size=N)
    grid = (np.arange(128) + 0.5) / 128
    rows: list[tuple[str, ...]] = []

    def add(name: str, private: float, plain: float) -> None:
        rows.append((name, f"{private * 1e3:.1f}", f"{plain * 1e3:.1f}", f"{private / plain:.1f}"))

    hist = histogram_density(x, bounds=(0, 1), epsilon=EPS, n=N, rng=1)
    m = hist.probabilities.size
    add(
        "histogram fit",
        best_of(lambda: histogram_density(x, bounds=(0, 1), epsilon=EPS, n=N)),
        best_of(lambda: np.histogram(x, bins=m, range=(0, 1))),
    )
    add(
        "histogram sample 1e5",
        best_of(lambda: hist.sample(N)),
        best_of(lambda: np.random.default_rng().choice(x, N)),
    )
    try:
        from diffprivlib.tools import histogram as dpl_histogram

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer = best_of(lambda: dpl_histogram(x, epsilon=EPS, bins=m, range=(0, 1)))
        mine = best_of(lambda: histogram_density(x, bounds=(0, 1), epsilon=EPS, n=N))
        rows.append(
            ("histogram: diffprivlib", f"{peer * 1e3:.1f}", "-", f"dpkit/peer {mine / peer:.1f}")
        )
    except ImportError:
        print("  (diffprivlib not installed: peer histogram skipped)")

    add(
        "cosine series fit (m=32)",
        best_of(lambda: series_density(x, bounds=(0, 1), epsilon=EPS, degree=32, n=N)),
        best_of(lambda: (np.sqrt(2) * np.cos(np.pi * np.outer(x, np.arange(1, 33)))).mean(0)),
    )
    kde = stats.gaussian_kde(x, bw_method=0.05 / x.std())
    add(
        "HRW kernel fit (G=128)",
        best_of(
            lambda: kde_density(x, bounds=(0, 1), bandwidth=0.05, epsilon=EPS, delta=1e-6, n=N)
        ),
        best_of(lambda: kde(grid)),
    )
    add(
        "Bernstein fit (k=40)",
        best_of(lambda: bernstein_density(x, bounds=(0, 1), bandwidth=0.05, epsilon=EPS, n=N)),
        best_of(lambda: kde(np.arange(41) / 40)),
    )
    add(
        "KS mechanism (k=2155)",
        best_of(lambda: ks_synthetic(x, bounds=(0, 1), epsilon=EPS, n=N), repeats=1),
        best_of(lambda: np.sort(np.random.default_rng().choice(x, 2155))),
    )
    print(f"dpkit.release densities, n = {N:,}, ε = {EPS} (best of 3; shared machine)")
    print(table(rows, ("task", "dpkit ms", "non-private ms", "ratio")))


if __name__ == "__main__":
    main()
