"""Synthetic tables: dpkit's AIM- and MST-style synthesisers against SmartNoise Synth's AIM and MST.

Same data (Fair's affairs data bundled with statsmodels: 6,366 rows, 9 columns, encoded on
dpkit's public domain, so every method sees the same discrete cells), same (ε, δ = 1e-6), same
workload (all 84 3-way marginals). Reported: mean 3-way TVD of a synthetic table of n rows
against the real one (mean over seeds) and the fit time. SmartNoise's AIM runs 16·d rounds of
1,000 mirror-descent iterations by default ("can take many hours"); here it is capped at
``--aim-rounds`` (default d = 9) rounds so the benchmark finishes in minutes, which helps its
time and may cost it accuracy — said again in the output.

Run in the SmartNoise environment (numpy 2, JAX)::

    PYTHONPATH=src .venv-synth/bin/python benchmarks/release.py

A peer that is not installed is skipped with the reason printed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable

import numpy as np

from dpkit.release import Synthesizer
from dpkit.release._examples import fair_domain, load_fair
from dpkit.release._marginals import marginal, tvd

sys.path.insert(0, os.path.dirname(__file__))
from _timing import table

DELTA = 1e-6


def mean_3way(real: np.ndarray, syn: np.ndarray, shape: tuple[int, ...]) -> float:
    sets = itertools.combinations(range(len(shape)), 3)
    return float(np.mean([tvd(marginal(real, shape, c), marginal(syn, shape, c)) for c in sets]))


def run_dpkit(method: str) -> Callable[[object, float, int], np.ndarray]:
    dom = fair_domain()

    def fit_sample(df: object, eps: float, seed: int) -> np.ndarray:
        model = Synthesizer(dom, epsilon=eps, delta=DELTA, method=method).fit(df, rng=seed)
        return model.sample_codes(6366, rng=seed + 1000)

    return fit_sample


def run_smartnoise(name: str, rounds: int) -> Callable[[object, float, int], np.ndarray] | str:
    try:
        import pandas as pd
        from snsynth import Synthesizer as SNSynth
    except ImportError as exc:
        return f"skipped: smartnoise-synth not installed ({exc.name})"
    dom = fair_domain()
    cols = list(dom.names)

    def fit_sample(codes: object, eps: float, seed: int) -> np.ndarray:
        np.random.seed(seed)  # noqa: NPY002 - SmartNoise and mbi draw from the global generator
        df = pd.DataFrame(np.asarray(codes), columns=cols)
        kwargs: dict[str, object] = {"epsilon": eps, "delta": DELTA}
        if name == "aim":
            kwargs.update(degree=3, rounds=rounds, max_cells=100_000)
        synth = SNSynth.create(name, **kwargs)
        synth.fit(df, categorical_columns=cols, preprocessor_eps=0.0)
        out = synth.sample(len(df))
        arr = out.to_numpy() if hasattr(out, "to_numpy") else np.asarray(out)
        return np.asarray(arr, dtype=np.int64)

    return fit_sample


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds for dpkit (peers: 1)")
    ap.add_argument("--aim-rounds", type=int, default=9)
    args = ap.parse_args()
    df = load_fair()
    dom = fair_domain()
    codes = dom.encode(df)
    shape = dom.shape
    peers: dict[str, Callable[[object, float, int], np.ndarray] | str] = {
        "smartnoise MST": run_smartnoise("mst", args.aim_rounds),
        f"smartnoise AIM ({args.aim_rounds} rounds)": run_smartnoise("aim", args.aim_rounds),
    }
    print(f"Fair's affairs data: {codes.shape[0]} rows, {codes.shape[1]} columns, cells {shape}")
    print("workload: all 84 3-way marginals; δ = 1e-6; TVD of n synthetic rows vs the real data")
    rows: list[tuple[str, ...]] = []
    for eps in args.epsilons:
        res: dict[str, tuple[float, float]] = {}
        for method in ("aim", "mst", "independent"):
            fit = run_dpkit(method)
            tv, secs = [], []
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                syn = fit(df, eps, seed)
                secs.append(time.perf_counter() - t0)
                tv.append(mean_3way(codes, syn, shape))
            res[f"dpkit {method}"] = (float(np.mean(tv)), float(np.median(secs)))
        for name, peer in peers.items():
            if isinstance(peer, str):
                print(f"{name}: {peer}")
                continue
            t0 = time.perf_counter()
            syn = peer(codes, eps, 0)
            secs_peer = time.perf_counter() - t0
            res[name] = (mean_3way(codes, syn, shape), secs_peer)
        ref = res.get(f"smartnoise AIM ({args.aim_rounds} rounds)")
        for name, (tv_mean, secs_mean) in res.items():
            ratio_tv = f"{tv_mean / ref[0]:.2f}" if ref else "-"
            ratio_t = f"{secs_mean / ref[1]:.4f}" if ref else "-"
            rows.append((f"{eps:g}", name, f"{tv_mean:.4f}", f"{secs_mean:.2f}", ratio_tv, ratio_t))
    print(
        table(
            rows,
            ("ε", "method", "3-way TVD", "fit s", "TVD / AIM's", "time / AIM's"),
        )
    )
    print(
        f"SmartNoise's AIM was capped at {args.aim_rounds} rounds (its default is 16·d = "
        f"{16 * len(shape)}); peers ran one seed each, dpkit {args.seeds}. Times are wall "
        "clock on a shared machine and include sampling n rows."
    )


if __name__ == "__main__":
    main()
