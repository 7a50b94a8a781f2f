"""Samples per second: dpkit's exact noise against NumPy (insecure limit) and OpenDP.

Run with ``make bench`` (or ``.venv-bench/bin/python benchmarks/noise.py``). Everything runs in one
process on the same machine; the ratios matter, not the absolute figures.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import best_of, best_of_each, print_targets, table, target
from dpkit import noise
from dpkit.random import secure_generator

N = 10_000_000  # dpkit and NumPy
N_PEER = 50_000  # OpenDP is slow enough that fewer samples give a stable rate


def rate(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    return n / best_of(fn) / 1e6


def main() -> None:
    rng = secure_generator()
    zeros = np.zeros(N)
    numpy_rate = rate(lambda: np.random.default_rng(0).laplace(0.0, 1.0, N), N)
    rows: list[tuple[str, float]] = [("numpy rng.laplace (float, NOT safe) — limit", numpy_rate)]
    for scale in (1, 10, 1000, 2**40):
        rows.append(
            (
                f"dpkit discrete_laplace scale={scale:g}",
                rate(lambda s=scale: noise.discrete_laplace(s, N, rng=rng), N),
            )
        )
    for sigma in (1, 10, 1000):
        rows.append(
            (
                f"dpkit discrete_gaussian sigma={sigma:g}",
                rate(lambda s=sigma: noise.discrete_gaussian(s, N, rng=rng), N),
            )
        )
    for scale in (1.0, 1000.0):
        rows.append(
            (
                f"dpkit float-safe laplace scale={scale:g}",
                rate(lambda s=scale: noise.laplace(zeros, s, rng=rng), N),
            )
        )
    rows.append(
        ("dpkit float-safe gaussian sigma=1", rate(lambda: noise.gaussian(zeros, 1.0, rng=rng), N))
    )

    peer_calls = _opendp_calls()
    peers = [(name, rate(fn, N_PEER)) for name, fn in peer_calls.items()]
    rows += peers
    by_name = dict(rows)
    print(f"Noise samples per second (millions), {N:,} samples per call, best of 3\n")
    out = [(name, f"{r:9.3f}", f"{r / numpy_rate:6.3f}") for name, r in rows]
    print(table(out, ("sampler", "M/s", "x numpy")))
    if peers:
        print("\nAgainst OpenDP (same kind of noise):")
        pairs = [
            ("dpkit float-safe laplace scale=1", "opendp laplace float scale=1"),
            ("dpkit discrete_laplace scale=10", "opendp discrete laplace scale=10"),
            ("dpkit discrete_gaussian sigma=10", "opendp discrete gaussian sigma=10"),
        ]
        print(
            table(
                [(a, b, f"{by_name[a] / by_name[b]:8.1f}x") for a, b in pairs],
                ("dpkit", "opendp", "speed-up"),
            )
        )
    # The targets' ratios from calls taken in turns (dpkit, then the other, three times), so
    # that the machine's drifting load weighs on both alike.
    pair = best_of_each(
        {
            "numpy": lambda: np.random.default_rng(0).laplace(0.0, 1.0, N),
            "safe": lambda: noise.laplace(zeros, 1.0, rng=rng),
        },
        3,
    )
    safe_vs_numpy = pair["numpy"] / pair["safe"]
    nan = float("nan")
    safe_vs_odp = gauss_vs_odp = nan
    if peer_calls:
        turns = best_of_each(
            {
                "safe": lambda: noise.laplace(zeros, 1.0, rng=rng),
                "odp laplace": peer_calls["opendp laplace float scale=1"],
                "gauss": lambda: noise.discrete_gaussian(10, N, rng=rng),
                "odp gauss": peer_calls["opendp discrete gaussian sigma=10"],
            },
            3,
        )
        per_sample = {k: v / (N_PEER if k.startswith("odp") else N) for k, v in turns.items()}
        safe_vs_odp = per_sample["odp laplace"] / per_sample["safe"]
        gauss_vs_odp = per_sample["odp gauss"] / per_sample["gauss"]
    print_targets(
        [
            target("float-safe Laplace vs NumPy laplace (unsafe)", safe_vs_numpy,
                   at_least=1 / 3),
            target("float-safe Laplace vs OpenDP", safe_vs_odp, at_least=300),
            target("discrete Gaussian sigma=10 vs OpenDP", gauss_vs_odp, at_least=100),
        ]
    )  # fmt: skip


def _opendp_calls() -> dict[str, Callable[[], object]]:
    """OpenDP's samplers on ``N_PEER`` inputs, by row name (none when OpenDP is not installed)."""
    try:
        import opendp.prelude as odp
    except ImportError:
        print("opendp not installed: peer rows skipped (make bench installs it)")
        return {}
    odp.enable_features("contrib")
    vec_f = odp.vector_domain(odp.atom_domain(T=float, nan=False))
    vec_i = odp.vector_domain(odp.atom_domain(T=int))
    lap_f = odp.m.make_laplace(vec_f, odp.l1_distance(T=float), scale=1.0)
    lap_i = odp.m.make_laplace(vec_i, odp.l1_distance(T=int), scale=10.0)
    gau_i = odp.m.make_gaussian(vec_i, odp.l2_distance(T=int), scale=10.0)
    xf, xi = [0.0] * N_PEER, [0] * N_PEER
    return {
        "opendp laplace float scale=1": lambda: lap_f(xf),
        "opendp discrete laplace scale=10": lambda: lap_i(xi),
        "opendp discrete gaussian sigma=10": lambda: gau_i(xi),
    }


if __name__ == "__main__":
    main()
