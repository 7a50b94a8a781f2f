"""Private models: dpkit.ml against diffprivlib (and scikit-learn without privacy), same data.

Run with ``PYTHONPATH=src .venv-bench/bin/python benchmarks/ml.py [MODEL ...]``. For each
shared model and each ε in {0.1, 0.5, 1, 5}, prints the mean test score over ``REPS`` random
splits (accuracy for classifiers, R² for regression, captured test variance for PCA, inertia of
the non-private model divided by the private one for k-means) and the median fit time. Features
are min–max scaled with each dataset's full range, taken as public domain knowledge and given to
both libraries identically (bounds, data_norm).
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn import cluster as sk_cluster
from sklearn import datasets
from sklearn import decomposition as sk_decomposition
from sklearn import linear_model as sk_linear
from sklearn import naive_bayes as sk_nb
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

import dpkit.ml as dml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import table

EPSILONS = (0.1, 0.5, 1.0, 5.0)
REPS = 20
DELTA = 1e-5

try:
    import diffprivlib.models as dpl
except ImportError as exc:  # pragma: no cover - depends on the environment
    dpl = None
    print(f"diffprivlib not installed ({exc}); comparing with scikit-learn only")


def _scaled(loader: Callable[..., Any]) -> tuple[np.ndarray, np.ndarray]:
    X, y = loader(return_X_y=True)
    span = np.where(X.max(0) > X.min(0), X.max(0) - X.min(0), 1.0)
    return (X - X.min(0)) / span, y


def _pca_score(model: Any, Xte: np.ndarray, k: int) -> float:
    comps = np.asarray(model.components_)[:k]
    centred = Xte - Xte.mean(0)
    q, _ = np.linalg.qr(comps.T)  # an orthonormal basis of the released subspace
    return float(np.sum((centred @ q) ** 2) / np.sum(centred**2))


def _kmeans_inertia(centers: np.ndarray, X: np.ndarray) -> float:
    d2 = ((X[:, None, :] - centers[None]) ** 2).sum(-1)
    return float(d2.min(1).sum())


def _cases() -> list[dict[str, Any]]:
    Xd, yd = _scaled(datasets.load_diabetes)
    yd_bounds = (25.0, 346.0)  # the documented range of the diabetes target
    Xb, yb = _scaled(datasets.load_breast_cancer)
    Xw, yw = _scaled(datasets.load_wine)
    Xg, _ = _scaled(datasets.load_digits)
    nd, nb, ng = (np.sqrt(X.shape[1]) for X in (Xd, Xb, Xg))

    def r2(m: Any, X: np.ndarray, y: np.ndarray) -> float:
        return float(r2_score(y, m.predict(X)))

    def acc(m: Any, X: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(m.predict(X) == y))

    return [
        dict(
            name="LinearRegression (diabetes, R²)", data=(Xd, yd), score=r2,
            dpkit=lambda e, s: dml.LinearRegression(
                epsilon=e, delta=DELTA, data_norm=nd, bounds_y=yd_bounds, rng=s),
            peer=lambda e, s: dpl.LinearRegression(
                epsilon=e, bounds_X=(0, 1), bounds_y=yd_bounds, random_state=s),
            plain=lambda: sk_linear.LinearRegression(),
        ),
        dict(
            name="LogisticRegression (breast cancer, acc.)", data=(Xb, yb), score=acc,
            dpkit=lambda e, s: dml.LogisticRegression(
                epsilon=e, data_norm=nb, classes=[0, 1], rng=s),
            peer=lambda e, s: dpl.LogisticRegression(epsilon=e, data_norm=nb, random_state=s),
            plain=lambda: sk_linear.LogisticRegression(max_iter=1000),
        ),
        dict(
            name="GaussianNB (wine, acc.)", data=(Xw, yw), score=acc,
            dpkit=lambda e, s: dml.GaussianNB(
                epsilon=e, bounds=(0, 1), classes=[0, 1, 2], rng=s),
            peer=lambda e, s: dpl.GaussianNB(epsilon=e, bounds=(0, 1), random_state=s),
            plain=lambda: sk_nb.GaussianNB(),
        ),
        dict(
            name="PCA k=5 (digits, captured test var.)", data=(Xg, None),
            score=lambda m, X, y: _pca_score(m, X, 5),
            dpkit=lambda e, s: dml.PCA(5, epsilon=e, delta=DELTA, data_norm=ng, rng=s),
            peer=lambda e, s: dpl.PCA(
                5, epsilon=e, data_norm=ng, bounds=(0, 1), random_state=s),
            plain=lambda: sk_decomposition.PCA(5),
        ),
        dict(
            name="KMeans k=3 (wine, plain/private inertia)", data=(Xw, None),
            score=lambda m, X, y: m.bench_ref / _kmeans_inertia(m.cluster_centers_, X),
            dpkit=lambda e, s: dml.KMeans(3, epsilon=e, bounds=(0, 1), rng=s),
            peer=lambda e, s: dpl.KMeans(3, epsilon=e, bounds=(0, 1), random_state=s),
            plain=lambda: sk_cluster.KMeans(3, n_init=10, random_state=0),
        ),
    ]  # fmt: skip


def _run(case: dict[str, Any], which: str, eps: float) -> tuple[float, float]:
    X, y = case["data"]
    scores, times = [], []
    for rep in range(REPS):
        split = train_test_split(X, *( [y] if y is not None else []), test_size=0.3,
                                 random_state=rep)  # fmt: skip
        Xtr, Xte = split[0], split[1]
        ytr, yte = (split[2], split[3]) if y is not None else (None, None)
        model = case["plain"]() if which == "plain" else case[which](eps, rep)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(Xtr, ytr) if ytr is not None else model.fit(Xtr)
        times.append(time.perf_counter() - start)
        if "inertia" in case["name"]:
            ref = case["plain"]().fit(Xtr)
            model.bench_ref = _kmeans_inertia(ref.cluster_centers_, Xte)
        scores.append(case["score"](model, Xte, yte))
    return float(np.mean(scores)), float(np.median(times))


def main() -> None:
    rows: list[tuple[str, ...]] = []
    wins = total = 0
    only = sys.argv[1:]  # optional: run only the models whose name contains one of these
    for case in _cases():
        if only and not any(word in case["name"] for word in only):
            continue
        plain, _ = _run(case, "plain", 1.0)
        for eps in EPSILONS:
            ours, t_ours = _run(case, "dpkit", eps)
            if dpl is not None:
                peer, t_peer = _run(case, "peer", eps)
                total += 1
                wins += ours >= peer
                peer_s, ratio = f"{peer:.3f}", f"{t_ours / t_peer:.2f}"
            else:
                peer_s = ratio = "n/a"
            rows.append((case["name"], f"{eps:g}", f"{ours:.3f}", peer_s, f"{plain:.3f}",
                         f"{t_ours * 1e3:.1f}", ratio))  # fmt: skip
            print(" | ".join(rows[-1]), flush=True)
    print(f"dpkit.ml vs diffprivlib: mean test score over {REPS} splits (higher is better)")
    print(table(rows, ("model", "eps", "dpkit", "diffprivlib", "non-private", "dpkit fit ms",
                       "time dpkit/dpl")))  # fmt: skip
    if total:
        print(f"dpkit >= diffprivlib in {wins} of {total} (model, eps) cells")


if __name__ == "__main__":
    main()
