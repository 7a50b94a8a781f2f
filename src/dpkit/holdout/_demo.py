"""Demo section: the reusable holdout (Dwork et al. 2015) at a small size, and its plot."""

from __future__ import annotations

import os

import numpy as np

from dpkit.holdout._experiment import HoldoutCurves, reusable_holdout_experiment

__all__ = ["demo", "plot_curves"]


def plot_curves(curves: HoldoutCurves, path: str, *, title: str) -> None:
    """Draw the accuracies against the number of selected features, as in the paper's Fig. 2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=80)
    ax.plot(curves.k, curves.train, "-", color="0.6", label="training set")
    ax.plot(curves.k, curves.standard_holdout, "-o", ms=3, label="standard holdout (reused)")
    ax.plot(curves.k, curves.thresholdout, "-s", ms=3, label="Thresholdout")
    ax.plot(curves.k, curves.fresh, "--", color="k", label="fresh data (true accuracy)")
    ax.axhline(0.5, color="0.8", lw=0.8)
    ax.set_xlabel("number of features selected (k)")
    ax.set_ylabel("accuracy")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def demo() -> None:
    """Print the reusable-holdout experiment at n = d = 1,000 and plot it (a few seconds)."""
    print("\n== The reusable holdout (dpkit.holdout, Dwork et al. 2015) ==")
    c = reusable_holdout_experiment(n=1000, d=1000, k_values=(0, 20, 50, 100, 200), rng=2024)
    print("n = d = 1,000, labels independent of the features (true accuracy 0.5)")
    print(" k    train  reused holdout  Thresholdout  fresh data")
    for i, k in enumerate(c.k):
        print(
            f"{int(k):>3}   {c.train[i]:.3f}  {c.standard_holdout[i]:.3f}"
            f"           {c.thresholdout[i]:.3f}         {c.fresh[i]:.3f}"
        )
    print(f"Thresholdout: {c.over_threshold} of {c.queries} queries crossed the threshold")
    print(
        "(when training and holdout differ by less than the noisy threshold T = 4/√n ≈ 0.13 at"
        " this n,\n Thresholdout answers the training value, so a small n lets a training value"
        " through;\n at n = 10,000, T = 0.04 and its answers stay at 0.50: docs/holdout.md)"
    )
    plot_curves(c, "demo_output/holdout.png", title="Reusable holdout, n = d = 1,000")
    print("plot: demo_output/holdout.png")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    demo()
