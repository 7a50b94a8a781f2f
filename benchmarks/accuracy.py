"""Accuracy before release and planning ε: dpkit against OpenDP's accuracy utilities.

Run with ``.venv-bench/bin/python benchmarks/accuracy.py``. In one process, for a count
(sensitivity 1), it prints the 95% half-width each library states at several ε, the ε each plans
for a target half-width, and best-of-k times with ratios (dpkit / OpenDP). OpenDP's
``discrete_laplacian_scale_to_accuracy`` is a closed-form tail bound of the discrete Laplace;
dpkit's is the smallest integer quantile of the noise it samples, so the two may differ by one
unit. A missing peer is reported, not fatal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import dpkit.stats as st
from dpkit import plan

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_of

ALPHA = 0.05
EPSILONS = (0.1, 0.5, 1.0, 2.0)
TARGET = 25.0


def opendp_accuracy() -> tuple[Callable[[float], float], Callable[[float], float]] | None:
    try:
        import opendp.prelude as dp

        dp.enable_features("contrib")

        def half_width(eps: float) -> float:
            # a count: sensitivity 1, discrete Laplace of scale 1/ε
            return float(dp.discrete_laplacian_scale_to_accuracy(scale=1.0 / eps, alpha=ALPHA))

        def epsilon(target: float) -> float:
            scale = dp.accuracy_to_discrete_laplacian_scale(accuracy=target, alpha=ALPHA)
            return 1.0 / float(scale)

        return half_width, epsilon
    except Exception as exc:  # report rather than crash: peers change their APIs
        print(f"  (OpenDP accuracy utilities unavailable: {type(exc).__name__}: {exc})")
        return None


def main() -> None:
    peer = opendp_accuracy()
    print(f"count, sensitivity 1, {100 * (1 - ALPHA):g}% half-width of the noise")
    print(f"{'epsilon':>8} {'dpkit':>10} {'OpenDP':>10}")
    for eps in EPSILONS:
        ours = st.accuracy("count", epsilon=eps, alpha=ALPHA)
        theirs = f"{peer[0](eps):10.2f}" if peer else f"{'-':>10}"
        print(f"{eps:8g} {ours:10.2f} {theirs}")
    eps_ours = plan.epsilon_for("count", half_width=TARGET, alpha=ALPHA)
    line = f"planned epsilon for +/- {TARGET:g}: dpkit {eps_ours:.5f}"
    if peer:
        line += f", OpenDP {peer[1](TARGET):.5f}"
    print(line)

    timings: list[tuple[str, float, float | None]] = []
    t_acc = best_of(lambda: st.accuracy("count", epsilon=0.37, alpha=ALPHA), 5)
    t_plan = best_of(lambda: plan.epsilon_for("count", half_width=TARGET, alpha=ALPHA), 5)
    t_mean = best_of(
        lambda: plan.epsilon_for("mean", bounds=(0, 100), n=1000, half_width=0.5, alpha=ALPHA), 5
    )
    peer_acc = best_of(lambda: peer[0](0.37), 5) if peer else None
    peer_plan = best_of(lambda: peer[1](TARGET), 5) if peer else None
    timings += [("accuracy (count)", t_acc, peer_acc), ("plan epsilon (count)", t_plan, peer_plan)]
    timings.append(("plan epsilon (mean, n public)", t_mean, None))
    print(f"\n{'operation':32} {'dpkit':>11} {'OpenDP':>11} {'ratio':>7}")
    for name, ours_t, theirs_t in timings:
        other = f"{theirs_t * 1e6:9.1f}us" if theirs_t else f"{'-':>11}"
        ratio = f"{ours_t / theirs_t:7.1f}" if theirs_t else f"{'-':>7}"
        print(f"{name:32} {ours_t * 1e6:9.1f}us {other} {ratio}")


if __name__ == "__main__":
    main()
