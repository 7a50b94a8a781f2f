"""Fixed-size batches: dpkit's PLD of sampling without replacement vs dp_accounting's RDP bound.

DP-SGD with exactly B of N examples per step (replace-one neighbours, clip C, noise σ = z·C on
the sum, so the replace-one sensitivity is 2C). dpkit composes the symmetric dominating pair
(Balle, Barthe & Gaboardi 2018; Dong, Roth & Su 2022) by PLD; dp_accounting (the peer) offers
only the Rényi bound of Wang, Balle & Kasiviswanathan (2019) for this sampler
(``SampledWithoutReplacementDpEvent`` with noise multiplier σ/(2C), ``REPLACE_ONE``). Both are
valid upper bounds: smaller is better. Also shown: the Poisson add/remove ε of the same noise
(what a "shortcut" accountant would report) — not a valid bound for this sampler.

Run with ``.venv-bench/bin/python benchmarks/fixed_batches.py`` (PYTHONPATH=src).
"""

from __future__ import annotations

import time

from dpkit.accounting import (
    GaussianEvent,
    PoissonSubsampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    compose,
)

DELTA = 1e-5
CASES = [(1.0, 256, 60_000, 2_000), (2.0, 50, 1_000, 200), (4.0, 256, 60_000, 2_000)]


def main() -> None:
    import dp_accounting as dpa
    from dp_accounting import NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

    print(f"fixed-size DP-SGD, clip C = 1, delta = {DELTA}; eps (time in s)")
    head = (
        f"{'z':>4} {'B':>4} {'N':>6} {'steps':>5} | {'dpkit PLD':>16} | "
        f"{'dp_acc RDP':>16} | {'eps ratio':>9} | {'Poisson (invalid)':>17}"
    )
    print(head)
    print("-" * len(head))
    for z, b, n, steps in CASES:
        t0 = time.perf_counter()
        step = SampledWithoutReplacementEvent(
            GaussianEvent(sigma=z, sensitivity=2.0), sample_size=b, population_size=n
        )
        ours = compose(SelfComposedEvent(step, count=steps), method="pld").epsilon(DELTA)
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        acct = RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
        wor = dpa.SampledWithoutReplacementDpEvent(n, b, dpa.GaussianDpEvent(z / 2.0))
        acct.compose(dpa.SelfComposedDpEvent(wor, steps))
        peer = float(acct.get_epsilon(DELTA))
        t_peer = time.perf_counter() - t0
        poisson = compose(
            SelfComposedEvent(
                PoissonSubsampledEvent(GaussianEvent(sigma=z), sampling_rate=b / n), count=steps
            ),
            method="pld",
        ).epsilon(DELTA)
        print(
            f"{z:>4g} {b:>4} {n:>6} {steps:>5} | {ours:>8.3f} ({t_ours:5.2f}) | "
            f"{peer:>8.3f} ({t_peer:5.2f}) | {peer / ours:>9.2f} | {poisson:>17.3f}"
        )


if __name__ == "__main__":
    main()
