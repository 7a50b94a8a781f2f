"""The local-model section of ``make demo``: telemetry collected without a trusted curator."""

from __future__ import annotations

import os

import numpy as np

from dpkit.local import HybridMean, choose_protocol, shuffle_epsilon

SEED = 2024  # reproducible demo; real clients use rng=None (secure)


def demo() -> None:
    """Print the local-model section and save ``demo_output/local_frequencies.png``."""
    print("== Local model: telemetry without a trusted curator (dpkit.local) ==")
    rng = np.random.default_rng(SEED)
    k, n, eps = 64, 200_000, 1.0
    weights = 1.0 / np.arange(1, k + 1) ** 1.2
    pages = rng.choice(k, size=n, p=weights / weights.sum())  # each user's home page
    truth = np.bincount(pages, minlength=k)

    oracle = choose_protocol(epsilon=eps, k=k)
    reports = oracle.randomize(pages, rng=SEED)  # runs on each device
    est = oracle.estimate(reports)  # runs on the server
    half = est.ci(0.05)
    print(
        f"{n:,} users, k = {k} pages, ε = {eps} per user; protocol chosen: {oracle.name} "
        f"({oracle.message_bits} bits per report)"
    )
    print("page   true   estimate ± 95% CI")
    for v in range(6):
        print(f"{v:>4} {truth[v]:>6} {est.counts[v]:>10.0f} ± {half[v]:.0f}")
    covered = np.mean(np.abs(est.counts - truth) <= half)
    print(f"true count inside its 95% interval for {covered:.0%} of the {k} pages")

    seconds = rng.uniform(0, 600, n)  # session length, public bounds [0, 600] s
    mech = HybridMean(epsilon=eps)
    mean = mech.estimate_mean(mech.randomize(seconds / 300.0 - 1.0, rng=SEED + 1))
    print(
        f"mean session length: {300 * (mean.value + 1):.1f} s ± {300 * mean.ci():.1f} "
        f"(true {seconds.mean():.1f} s), hybrid mechanism"
    )
    central = shuffle_epsilon(epsilon0=eps, n=n, delta=1e-8)
    print(
        f"with a trusted shuffler the same reports are ({central:.3f}, 1e-8)-DP centrally "
        "(Feldman-McMillan-Talwar numerical bound)"
    )
    _plot(truth, est.counts, half)


def _plot(truth: np.ndarray, counts: np.ndarray, half: np.ndarray) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - the plot extra is optional
        print("(matplotlib missing: pip install 'dpkit[plot]' for the plot)")
        return
    top = 20
    x = np.arange(top)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(x, truth[:top], color="lightgray", label="true count")
    ax.errorbar(x, counts[:top], yerr=half[:top], fmt="o", color="C0", label="estimate ± 95% CI")
    ax.set_xlabel("page")
    ax.set_ylabel("users")
    ax.set_title("Local-model frequency estimates against the truth")
    ax.legend()
    os.makedirs("demo_output", exist_ok=True)
    path = os.path.join("demo_output", "local_frequencies.png")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"plot: {path}")
