"""Accounting benchmark: DP-SGD (Poisson-subsampled Gaussian) with dpkit vs dp_accounting.

Composes 1,000 and 10,000 steps at q = 0.01 with σ = 1 and σ = 4 and reports ε at δ = 1e-5 from
dpkit's PLD and RDP accountants and from dp_accounting's PLD and RDP accountants, all in one
process, with wall times and the ratio dp_accounting time / dpkit time (> 1: dpkit faster).

Run with ``.venv-bench/bin/python benchmarks/accounting.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dpkit.accounting import GaussianEvent, PoissonSubsampledEvent, SelfComposedEvent, compose

DELTA = 1e-5
Q = 0.01


def _timed(fn: Callable[[], float], repeat: int = 3) -> tuple[float, float]:
    best = float("inf")
    value = float("nan")
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return value, best


def dpkit_eps(sigma: float, steps: int, method: str) -> float:
    step = PoissonSubsampledEvent(GaussianEvent(sigma=sigma), sampling_rate=Q)
    return compose(SelfComposedEvent(step, count=steps), method=method).epsilon(DELTA)


def main() -> None:
    try:
        import dp_accounting as dpa
        from dp_accounting import pld, rdp
    except ImportError:  # pragma: no cover
        dpa = None

    def peer(sigma: float, steps: int, kind: str) -> float:
        assert dpa is not None
        event = dpa.SelfComposedDpEvent(
            dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(sigma)), steps
        )
        acct = pld.PLDAccountant() if kind == "pld" else rdp.RdpAccountant()
        acct.compose(event)
        return float(acct.get_epsilon(DELTA))

    header = (
        f"{'sigma':>5} {'steps':>6} | {'dpkit PLD':>10} {'dp_acc PLD':>10} {'t dpkit':>8} "
        f"{'t dp_acc':>8} {'ratio':>6} | {'dpkit RDP':>10} {'dp_acc RDP':>10} {'t dpkit':>8} "
        f"{'t dp_acc':>8} {'ratio':>6}"
    )
    print(f"DP-SGD accounting, q={Q}, delta={DELTA}; times are best of 3 in seconds")
    print(header)
    print("-" * len(header))
    for sigma in (1.0, 4.0):
        for steps in (1_000, 10_000):
            row = [f"{sigma:>5} {steps:>6} |"]
            for kind in ("pld", "rdp"):
                e_ours, t_ours = _timed(lambda k=kind, s=sigma, n=steps: dpkit_eps(s, n, k))
                if dpa is not None:
                    e_peer, t_peer = _timed(lambda k=kind, s=sigma, n=steps: peer(s, n, k))
                else:
                    e_peer, t_peer = float("nan"), float("nan")
                row.append(
                    f"{e_ours:>10.5f} {e_peer:>10.5f} {t_ours:>8.3f} {t_peer:>8.3f} "
                    f"{t_peer / t_ours:>6.1f} |"
                )
            print(" ".join(row).rstrip(" |"))


if __name__ == "__main__":
    main()
