"""Local-model frequency oracles: dpkit against pure-ldp, in one process, on the same work.

Run with ``PYTHONPATH=src .venv-bench/bin/python benchmarks/local.py [N]``. For k-RR (GRR), OUE,
OLH and Hadamard response at k = 1,024 and ε = 1, every one of N users (default 10,000,000)
randomizes a value (Zipf-like frequencies) and the server aggregates all reports and estimates
every count. dpkit streams the reports in batches of one million through an aggregator, with its
secure generator. pure-ldp runs user by user in Python, so it is timed on fewer users and its
throughput (users per second, randomize + aggregate + estimate) is compared per user. GRR and
OUE, which the speed targets cover, are each run three times on both sides (best kept).

Accuracy: the mean squared error of the k count estimates against the true counts, divided by
the mean of the protocol's exact variance at those counts (1.0 is the theory). For one run over
k = 1,024 values that ratio has a standard error of about √(2/k) ≈ 4.4%, printed alongside.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpkit.local import GRR, OLH, OUE, FrequencyOracle, HadamardResponse
from dpkit.random import secure_generator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import print_targets, table, target

K = 1024
EPSILON = 1.0
BATCH = 1_000_000
# users pure-ldp is timed on (it runs one user at a time in Python)
PEER_N = {"GRR": 200_000, "OUE": 20_000, "OLH": 2_000, "HR": 100_000}
REPEATS = 3  # runs of each side for the protocols held to a target (the best is kept)


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    weights = 1.0 / np.arange(1, K + 1) ** 1.1
    x = np.random.default_rng(seed).choice(K, size=n, p=weights / weights.sum())
    return x.astype(np.int64), np.bincount(x, minlength=K).astype(np.float64)


def mse_ratio(est: np.ndarray, truth: np.ndarray, var: np.ndarray) -> tuple[float, float]:
    sq = (est - truth) ** 2 / var
    return float(sq.mean()), float(sq.std(ddof=1) / np.sqrt(sq.size))


def run_dpkit(
    oracle: FrequencyOracle, x: np.ndarray, truth: np.ndarray
) -> tuple[float, float, float]:
    gen = secure_generator()
    start = time.perf_counter()
    agg = oracle.aggregator()
    for lo in range(0, x.size, BATCH):
        agg.add(oracle.randomize(x[lo : lo + BATCH], rng=gen))
    est = agg.estimate()
    seconds = time.perf_counter() - start
    ratio, se = mse_ratio(est.counts, truth, oracle.variance(x.size, truth))
    return x.size / seconds, ratio, se


def peer(name: str) -> tuple[Any, Any] | str:
    try:
        if name == "GRR":
            from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer

            return DEClient(EPSILON, K), DEServer(EPSILON, K)
        if name == "OUE":
            from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

            return UEClient(EPSILON, K, use_oue=True), UEServer(EPSILON, K, use_oue=True)
        if name == "OLH":
            from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer

            return LHClient(EPSILON, K, use_olh=True), LHServer(EPSILON, K, use_olh=True)
        from pure_ldp.frequency_oracles.hadamard_response import (
            HadamardResponseClient,
            HadamardResponseServer,
        )

        server = HadamardResponseServer(EPSILON, K)
        return HadamardResponseClient(EPSILON, K, server.get_hash_funcs()), server
    except Exception as exc:  # not installed, or its API changed: say why and go on
        return f"{type(exc).__name__}: {exc}"


def run_peer(
    pair: tuple[Any, Any], x: np.ndarray, oracle: FrequencyOracle
) -> tuple[float, float, float]:
    client, server = pair
    truth = np.bincount(x, minlength=K).astype(np.float64)
    start = time.perf_counter()
    for v in x.tolist():
        server.aggregate(client.privatise(v + 1))  # pure-ldp codes values 1..k
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = np.asarray([server.estimate(v + 1) for v in range(K)], dtype=np.float64)
    seconds = time.perf_counter() - start
    # pure-ldp's own p and q differ from dpkit's only by dpkit's exact rounding (< 1e-9)
    ratio, se = mse_ratio(est, truth, oracle.variance(x.size, truth))
    return x.size / seconds, ratio, se


def main(argv: list[str]) -> None:
    n = int(argv[1]) if len(argv) > 1 else 10_000_000
    x, truth = make_data(n)
    print(f"Local frequency oracles, k = {K}, ε = {EPSILON}, n = {n:,} users (dpkit)")
    oracles: dict[str, Callable[[], FrequencyOracle]] = {
        "GRR": lambda: GRR(epsilon=EPSILON, k=K),
        "OUE": lambda: OUE(epsilon=EPSILON, k=K),
        "OLH": lambda: OLH(epsilon=EPSILON, k=K),
        "HR": lambda: HadamardResponse(epsilon=EPSILON, k=K),
    }
    rows = []
    goals = {"GRR": float("nan"), "OUE": float("nan")}
    for name, make in oracles.items():
        oracle = make()
        # the protocols held to a target: best of three runs of each, taken in turns (a b a b …)
        # so that the machine's drifting load weighs on both alike
        runs = REPEATS if name in goals else 1
        rate, ratio, se = run_dpkit(oracle, x, truth)
        pair = peer(name)
        if isinstance(pair, str):
            print(f"  (pure-ldp {name} skipped: {pair})")
            rows.append((name, f"{rate:,.0f}", "-", "-", f"{ratio:.3f} ± {se:.3f}", "-"))
            continue
        m = min(PEER_N[name], n)
        prate, pratio, pse = run_peer(pair, x[:m], oracle)
        for _ in range(runs - 1):
            rate = max(rate, run_dpkit(oracle, x, truth)[0])
            pair = peer(name)
            assert not isinstance(pair, str)
            prate = max(prate, run_peer(pair, x[:m], oracle)[0])
        rows.append(
            (
                name,
                f"{rate:,.0f}",
                f"{prate:,.0f} (n={m:,})",
                f"{rate / prate:,.0f}x",
                f"{ratio:.3f} ± {se:.3f}",
                f"{pratio:.3f} ± {pse:.3f}",
            )
        )
        if name in goals:
            goals[name] = rate / prate
        print(f"  {name} done", flush=True)
    header = (
        "protocol",
        "dpkit users/s",
        "pure-ldp users/s",
        "speed-up",
        "dpkit MSE/theory",
        "pure-ldp MSE/theory",
    )
    print(table(rows, header))
    print("Throughput counts randomize + aggregate + estimate; absolute rates depend on load.")
    print_targets(
        [target(f"local {k} throughput vs pure-ldp", v, at_least=50) for k, v in goals.items()]
    )


if __name__ == "__main__":
    main(sys.argv)
