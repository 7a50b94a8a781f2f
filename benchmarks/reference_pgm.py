"""The reference AIM and MST: the authors' algorithms on private-pgm's own estimator (mbi 2.0.0).

The ``mbi`` wheel ships the estimator (mirror descent over the marginal polytope, exact
junction-tree inference) but not the mechanisms, so the two loops are written here from the
papers, with the authors' published defaults:

* AIM (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for
  Differentially Private Synthetic Data", Alg. 1): T = 16·d, α = 0.9; every one-way marginal
  measured at σ₀ = √(T/(2αρ)); then rounds, each choosing by the exponential mechanism
  (ε₀ = √(8(1−α)ρ/T), sensitivity the largest weight) among the workload's downward closure
  whose junction tree stays within (ρ_used/ρ)·80 MB, by w_r·(‖M_r(D) − M_r(p̂)‖₁ − √(2/π)·σ·n_r)
  with w_r = Σ_{s∈W} |r ∩ s|; measuring it at σ; refitting (1,000 mirror-descent steps,
  warm-started); halving σ and doubling ε when the refit moved that marginal by less than the
  measurement's expected noise; the last round spends what is left of ρ.
* MST (McKenna, Miklau & Sheldon 2021, "Winning the NIST Contest: A scalable and general
  approach to differentially private synthetic data", Alg. 1): ρ/3 on the one-way marginals
  (values whose noisy count is below 3σ merged into one), ρ/3 on a maximum spanning tree of
  pairs chosen edge by edge with the exponential mechanism (sensitivity 1) on the one-way
  model's ℓ1 error, ρ/3 on measuring the tree's pairs; one fit of 5,000 steps.

Both use add/remove neighbours (sensitivity 1), ρ from (ε, δ) by the conversion of Canonne,
Kamath & Steinke (2020) (dpkit's ``rho_for``, the one the authors' code uses), JAX's default
float32, and sample n synthetic rows by the model's randomised rounding. Data, discretisation
and workload (all 3-way marginals) are those of ``benchmarks/release.py``. Each run prints
(dataset, method, ε, seed, mean 3-way TVD, seconds) and is merged into a JSON file
(``benchmarks/reference_pgm.json``) that ``benchmarks/release.py`` reads. Run it in the
reference environment (``.venv-pgm`` from ``benchmarks/requirements-pgm.txt``; ``make reference``
builds it and runs MST on both data sets)::

    PYTHONPATH=src .venv-pgm/bin/python benchmarks/reference_pgm.py --datasets fair \\
        --methods mst --epsilons 0.3 1 3 --seeds 0 1 2

AIM takes minutes to tens of minutes a seed on a 2-core machine; MST about half a minute.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
import warnings
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dpkit.accounting._costs import rho_for
from dpkit.release._examples import fair_domain, load_fair
from release import DELTA, load_randhie, mean_3way, randhie_domain

OUT = os.path.join(os.path.dirname(__file__), "reference_pgm.json")

AIM_ITERS = 1000  # the authors' max_iters, for every refit and the final one
AIM_MAX_MODEL_MB = 80.0
MST_ONE_WAY_ITERS = 1000
MST_FINAL_ITERS = 5000

DATASETS = {"fair": (load_fair, fair_domain), "randhie": (load_randhie, randhie_domain)}


def _mbi() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mbi warns about float32; n ≤ 100,000 here
        import mbi
    return mbi


def _em(scores: np.ndarray, eps: float, sens: float, rng: np.random.Generator) -> int:
    """Exponential mechanism: P(i) ∝ exp(ε·q_i/(2Δ))."""
    logits = 0.5 * eps / sens * (scores - scores.max())
    p = np.exp(logits)
    return int(rng.choice(scores.size, p=p / p.sum()))


def _estimate(mbi: Any, domain: Any, meas: list[Any], iters: int, warm: Any = None) -> Any:
    import jax

    model = mbi.estimation.MirrorDescent().estimate(domain, meas, iters=iters, warm_start=warm)
    jax.clear_caches()  # the compile cache grows every round; a long run hits the mmap limit
    return model


def _noisy(x: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return x + rng.normal(0.0, sigma, size=x.size)


def _counts(codes: np.ndarray, shape: tuple[int, ...], cols: tuple[int, ...]) -> np.ndarray:
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), tuple(shape[c] for c in cols))
    return np.bincount(flat, minlength=math.prod(shape[c] for c in cols)).astype(np.float64)


def aim(
    codes: np.ndarray, shape: tuple[int, ...], rho: float, rng: np.random.Generator, n_out: int
) -> tuple[np.ndarray, int]:
    """AIM on all 3-way marginals; returns n_out synthetic rows and the number of rounds."""
    mbi = _mbi()
    from mbi.junction_tree import hypothetical_model_size

    d = len(shape)
    names = [str(c) for c in range(d)]
    domain = mbi.Domain(names, shape)
    workload = list(itertools.combinations(range(d), 3))
    closure = {s for w in workload for k in (1, 2, 3) for s in itertools.combinations(w, k)}
    weight = {r: float(sum(len(set(r) & set(w)) for w in workload)) for r in sorted(closure)}
    exact = {r: _counts(codes, shape, r) for r in weight}
    T, alpha = 16 * d, 0.9
    sigma = math.sqrt(T / (2 * alpha * rho))
    eps = math.sqrt(8 * (1 - alpha) * rho / T)
    cl = lambda r: tuple(names[c] for c in r)  # noqa: E731
    meas = [
        mbi.LinearMeasurement(_noisy(exact[(c,)], sigma, rng), cl((c,)), sigma) for c in range(d)
    ]
    used = d / (2 * sigma**2)
    model = _estimate(mbi, domain, meas, AIM_ITERS)
    measured: list[tuple[int, ...]] = [(c,) for c in range(d)]
    rounds, last = 0, False
    while not last:
        rounds += 1
        if rho - used < 2 * (1 / (2 * sigma**2) + eps**2 / 8):
            left = rho - used
            sigma = math.sqrt(1 / (2 * alpha * left))
            eps = math.sqrt(8 * (1 - alpha) * left)
            last = True
        used += 1 / (2 * sigma**2) + eps**2 / 8
        limit = AIM_MAX_MODEL_MB * used / rho
        free = {
            s for m in measured for k in range(1, len(m) + 1) for s in itertools.combinations(m, k)
        }
        cliques = [cl(m) for m in measured]
        cands = [
            r
            for r in weight
            if r in free or hypothetical_model_size(domain, [*cliques, cl(r)]) <= limit
        ]
        bias = math.sqrt(2 / math.pi) * sigma
        scores = np.array(
            [
                weight[r]
                * (
                    np.abs(exact[r] - np.asarray(model.project(cl(r)).datavector())).sum()
                    - bias * exact[r].size
                )
                for r in cands
            ]
        )
        r = cands[_em(scores, eps, max(weight[c] for c in cands), rng)]
        meas.append(mbi.LinearMeasurement(_noisy(exact[r], sigma, rng), cl(r), sigma))
        measured.append(r)
        before = np.asarray(model.project(cl(r)).datavector())
        model = _estimate(mbi, domain, meas, AIM_ITERS, warm=model)
        after = np.asarray(model.project(cl(r)).datavector())
        if np.abs(after - before).sum() <= bias * before.size:
            sigma, eps = sigma / 2, eps * 2
    return _rows(model, names, n_out), rounds


def _rows(model: Any, names: list[str], n_out: int) -> np.ndarray:
    data = model.synthetic_data(rows=n_out).to_dict()
    return np.stack([np.asarray(data[c], dtype=np.int64) for c in names], axis=1)


def mst(
    codes: np.ndarray, shape: tuple[int, ...], rho: float, rng: np.random.Generator, n_out: int
) -> tuple[np.ndarray, int]:
    """MST; returns n_out synthetic rows (decompressed) and the number of tree edges."""
    mbi = _mbi()
    from mbi.marginal_loss import WeightedQuery

    d = len(shape)
    # ρ/3 per step; within a step the cliques share it equally (the authors' unit-norm weights)
    sigma1 = math.sqrt(3 * d / (2 * rho))
    noisy1 = [_noisy(_counts(codes, shape, (c,)), sigma1, rng) for c in range(d)]
    # compress: values whose noisy count is under 3σ merge into one value (post-processing)
    maps, new_shape = [], []
    for y in noisy1:
        sup = y >= 3 * sigma1
        new = np.where(sup, np.cumsum(sup) - 1, int(sup.sum()))
        maps.append(new)  # old value -> new value
        new_shape.append(int(sup.sum()) + int((~sup).any()))
    shape2 = tuple(new_shape)
    codes2 = np.stack([maps[c][codes[:, c]] for c in range(d)], axis=1)
    names = [str(c) for c in range(d)]
    domain = mbi.Domain(names, shape2)
    meas = []
    for c, y in enumerate(noisy1):
        sup = y >= 3 * sigma1
        if sup.all():
            meas.append(mbi.LinearMeasurement(y, (names[c],), sigma1))
            continue
        k = int((~sup).sum())
        # the merged value's count is a sum of k noisy cells (sd σ√k): scaled by 1/√k, sd σ
        y2 = np.append(y[sup], y[~sup].sum() / math.sqrt(k))
        w = np.ones(y2.size)
        w[-1] = 1 / math.sqrt(k)
        meas.append(mbi.LinearMeasurement(y2, (names[c],), sigma1, query=WeightedQuery(w)))
    one = _estimate(mbi, domain, meas, MST_ONE_WAY_ITERS)
    pairs = list(itertools.combinations(range(d), 2))
    err = {
        p: float(
            np.abs(
                _counts(codes2, shape2, p)
                - np.asarray(one.project((names[p[0]], names[p[1]])).datavector())
            ).sum()
        )
        for p in pairs
    }
    eps = math.sqrt(8 * (rho / 3) / (d - 1))
    comp = list(range(d))  # union-find by relabelling: d ≤ 10
    edges: list[tuple[int, int]] = []
    for _ in range(d - 1):
        cands = [p for p in pairs if comp[p[0]] != comp[p[1]]]
        a, b = cands[_em(np.array([err[p] for p in cands]), eps, 1.0, rng)]
        edges.append((a, b))
        old, new = comp[b], comp[a]
        comp = [new if x == old else x for x in comp]
    sigma2 = math.sqrt(3 * (d - 1) / (2 * rho))
    for a, b in edges:
        y = _noisy(_counts(codes2, shape2, (a, b)), sigma2, rng)
        meas.append(mbi.LinearMeasurement(y, (names[a], names[b]), sigma2))
    model = _estimate(mbi, domain, meas, MST_FINAL_ITERS)
    syn = _rows(model, names, n_out)
    out = np.empty_like(syn)
    for c in range(d):  # undo the compression: a merged value back to one of its values
        sup = noisy1[c] >= 3 * sigma1
        kept, merged = np.flatnonzero(sup), np.flatnonzero(~sup)
        col = syn[:, c]
        is_m = col >= kept.size
        if kept.size:
            out[:, c] = kept[np.minimum(col, kept.size - 1)]
        if merged.size:
            out[is_m, c] = np.random.choice(merged, int(is_m.sum()))  # noqa: NPY002
    return out, len(edges)


def _load(path: str) -> dict[str, Any]:
    if os.path.exists(path):
        with open(path) as fh:
            return dict(json.load(fh))
    return {"runs": []}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["fair"], choices=sorted(DATASETS))
    ap.add_argument("--methods", nargs="+", default=["mst"], choices=["aim", "mst"])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default=OUT, help="JSON file the runs are merged into")
    args = ap.parse_args()
    import jax

    meta = {
        "mbi": _mbi().__version__ if hasattr(_mbi(), "__version__") else "2.0.0",
        "jax": jax.__version__,
        "x64": bool(jax.config.jax_enable_x64),
        "delta": DELTA,
        "cpus": os.cpu_count(),
    }
    print(f"δ = {DELTA:g}; mean 3-way TVD of n synthetic rows; {meta}")
    for name in args.datasets:
        load, dom_fn = DATASETS[name]
        dom = dom_fn()
        codes = dom.encode(load())
        shape, n = dom.shape, codes.shape[0]
        for method, eps, seed in itertools.product(args.methods, args.epsilons, args.seeds):
            rng = np.random.default_rng(seed)
            np.random.seed(seed)  # noqa: NPY002 - mbi's rounding draws from the global generator
            load0 = os.getloadavg()[0]
            t0 = time.perf_counter()
            fn = aim if method == "aim" else mst
            syn, steps = fn(codes, shape, rho_for(eps, DELTA), rng, n)
            secs = time.perf_counter() - t0
            tv = mean_3way(codes, syn, shape)
            print(
                f"{name} reference {method.upper()} ε = {eps:g} seed {seed}: TVD {tv:.4f}, "
                f"{secs:.1f} s, {steps} {'rounds' if method == 'aim' else 'edges'}, "
                f"load {load0:.1f}",
                flush=True,
            )
            db = _load(args.out)
            key = (name, method, eps, seed)
            runs = [
                r for r in db["runs"] if (r["dataset"], r["method"], r["epsilon"], r["seed"]) != key
            ]
            runs.append(
                {
                    "dataset": name,
                    "method": method,
                    "epsilon": eps,
                    "seed": seed,
                    "tvd": round(tv, 5),
                    "seconds": round(secs, 1),
                    "steps": steps,
                    "load": round(load0, 1),
                }
            )
            db["runs"] = sorted(
                runs, key=lambda r: (r["dataset"], r["method"], r["epsilon"], r["seed"])
            )
            db["meta"] = meta
            with open(args.out, "w") as fh:
                json.dump(db, fh, indent=1)
                fh.write("\n")


if __name__ == "__main__":
    main()
