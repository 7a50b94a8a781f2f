"""Demo section: the ways to release a whole dataset, on one sample."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from dpkit.accounting import Accountant, ApproxDP
from dpkit.random import seeded
from dpkit.release._bernstein import bernstein_density
from dpkit.release._density_grid import DensityRelease
from dpkit.release._histogram_density import histogram_density
from dpkit.release._kde import kde_density
from dpkit.release._ks_mechanism import ks_synthetic
from dpkit.release._series import series_density
from dpkit.release._series_accuracy import series_density_accuracy

__all__ = ["demo"]

SEED = 2024


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    t = np.sort(np.r_[a, b])
    fa = np.searchsorted(np.sort(a), t, side="right") / a.size
    fb = np.searchsorted(np.sort(b), t, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def demo() -> None:
    """Release a bimodal sample five ways, each charged to one accountant; plot the densities."""
    print("== Private densities and synthetic data (Wasserman & Zhou 2010) ==")
    rng = np.random.default_rng(SEED)
    n = 5000
    x = np.where(rng.random(n) < 0.6, rng.normal(3.0, 0.8, n), rng.normal(7.0, 1.0, n))
    x = np.clip(x, 0.0, 10.0)
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-6))
    box = (0.0, 10.0)
    planned = series_density_accuracy(bounds=box, epsilon=1.0, expected_n=n)
    print(f"  cosine series: planned L2 half-width of its noise (95%) {planned:.3f}")
    releases = {
        "histogram (§5.2)": histogram_density(
            x, bounds=box, epsilon=1.0, accountant=acct, rng=seeded(SEED)
        ),
        "cosine series (§5.3)": series_density(
            x, bounds=box, epsilon=1.0, expected_n=n, accountant=acct, rng=seeded(SEED)
        ),
        "kernel, HRW (§5.4)": kde_density(
            x, bounds=box, bandwidth=0.4, epsilon=1.0, delta=1e-6, accountant=acct, rng=seeded(SEED)
        ),
        "kernel, Bernstein (§5.4)": bernstein_density(
            x, bounds=box, bandwidth=0.4, epsilon=1.0, accountant=acct, rng=seeded(SEED)
        ),
    }
    for name, dens in releases.items():
        z = dens.sample(n, rng=SEED)
        print(f"  {name:<26} cells={dens.probabilities.size:<4} KS(sample, data)={_ks(z, x):.3f}")
    synth = ks_synthetic(x, bounds=box, epsilon=1.0, accountant=acct, rng=seeded(SEED))
    print(
        f"  {'KS mechanism (§5.1)':<26} k={synth.k:<6} KS(sample, data)={_ks(synth.values, x):.3f}"
    )
    spent = acct.spent
    assert isinstance(spent, ApproxDP)
    print(f"  spent epsilon={spent.epsilon:.2f}, delta={spent.delta:.1e} of (5, 1e-6); n={n}")
    _plot(x, releases)


def _plot(x: np.ndarray, releases: Mapping[str, DensityRelease]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - plotting is optional
        print("  (install 'dpkit[plot]' for the plot)")
        return
    os.makedirs("demo_output", exist_ok=True)
    t = np.linspace(0.0, 10.0, 801)
    fig, ax = plt.subplots(figsize=(7, 3.5), dpi=90)
    ax.hist(x, bins=80, range=(0, 10), density=True, color="0.85", label="data (not private)")
    for name, dens in releases.items():
        ax.plot(t, dens.pdf(t), lw=1.3, label=name)
    ax.set_xlabel("x")
    ax.set_ylabel("density")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join("demo_output", "release_density.png")
    fig.savefig(path)
    plt.close(fig)
    print(f"  plot: {path}")
