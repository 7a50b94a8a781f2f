"""Demo section: a private synthetic copy of the RAND Health Insurance Experiment data, and how
good it is."""

from __future__ import annotations

import os

import numpy as np

from dpkit.accounting import Accountant, ApproxDP
from dpkit.random import seeded
from dpkit.release._examples import load_randhie, randhie_domain
from dpkit.release._report import utility_report
from dpkit.release._synth import Synthesizer

__all__ = ["demo"]

SEED = 2024  # reproducible; real releases use rng=None (secure)


def demo() -> None:
    """Print the synthetic-table section and write ``demo_output/synthetic_marginals.png``."""
    print("== Synthetic tables (dpkit.release) ==")
    df = load_randhie()
    dom = randhie_domain()
    print(f"RAND Health Insurance Experiment: {len(df)} person-years, {len(dom.names)} columns "
          "(public domain, shipped with dpkit)")  # fmt: skip
    acct = Accountant(ApproxDP(epsilon=2.0, delta=2e-6))
    reports = {}
    for method in ("independent", "aim"):
        synth = Synthesizer(dom, epsilon=1.0, delta=1e-6, method=method)
        model = synth.fit(df, accountant=acct, rng=seeded(SEED))
        syn = model.sample(len(df), rng=SEED + 1, output="pandas")
        reports[method] = (
            model,
            syn,
            utility_report(df, syn, dom, target="idp", plots=method == "aim"),
        )
    for method, (_model, syn, rep) in reports.items():
        tt = rep.train_test
        assert tt is not None
        print(
            f"{method:<12} ε = 1: mean 3-way TVD {rep.tvd_3way:.3f}, no doctor visit "
            f"{np.mean(syn['mdvis'] == 0):.1%} (real {np.mean(df['mdvis'] == 0):.1%}), "
            f"deductible plan predicted {tt.synthetic:.1%} (real-trained {tt.real:.1%})"
        )
    model = reports["aim"][0]
    print("AIM measured:", ", ".join("×".join(m) for m in model.measured if len(m) > 1))
    sig = [s for _, s, _ in model.rounds]
    print(
        f"AIM ran {len(sig)} rounds until the budget was spent, its noise annealed from "
        f"σ = {sig[0]:.0f} to σ = {min(sig):.0f}; one model fitted to all of them (Private-PGM)"
    )
    eps, dlt = acct.spent.epsilon, acct.spent.delta  # type: ignore[attr-defined]
    print(f"budget spent: ε = {eps:.3f}, δ = {dlt:g} (two fits at ε = 1, δ = 1e-6)")
    os.makedirs("demo_output", exist_ok=True)
    path = os.path.join("demo_output", "synthetic_marginals.png")
    with open(path, "wb") as f:
        f.write(reports["aim"][2].plots[0][1])
    print(f"plot: {path}")


if __name__ == "__main__":  # pragma: no cover
    demo()
