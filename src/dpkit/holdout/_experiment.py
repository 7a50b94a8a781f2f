"""The reusable-holdout experiment of Dwork et al. (2015, *Science*, Figure 2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.holdout._thresholdout import Thresholdout
from dpkit.random import RNGLike, as_generator

__all__ = ["HoldoutCurves", "reusable_holdout_experiment"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class HoldoutCurves:
    """Accuracies of the adaptively built classifier, one entry per number of features k."""

    k: npt.NDArray[np.int64]
    train: FloatArray
    standard_holdout: FloatArray
    """What a holdout reused naively reports (it was used to select the features)."""
    thresholdout: FloatArray
    """What Thresholdout reports for the classifier built through Thresholdout."""
    fresh: FloatArray
    """The standard pipeline's classifier on fresh data: its true accuracy (chance here)."""
    fresh_thresholdout: FloatArray
    """The Thresholdout pipeline's classifier on fresh data."""
    over_threshold: int
    """Over-threshold answers Thresholdout gave."""
    queries: int


def _correlations(X: FloatArray, y: FloatArray) -> FloatArray:
    out: FloatArray = X.T @ y / X.shape[0]
    return out


def reusable_holdout_experiment(
    *,
    n: int = 10_000,
    d: int = 10_000,
    k_values: tuple[int, ...] = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 150, 200, 250, 300),
    budget: int | None = None,
    rng: RNGLike = None,
) -> HoldoutCurves:
    """Reproduce the experiment of Dwork et al. (2015, *Science*, "The reusable holdout").

    Data with no signal: n training, n holdout and n fresh records of d independent N(0, 1)
    features with labels ±1 drawn independently of them. The analyst keeps the features whose
    correlation with the label exceeds 1/√n in absolute value *on both* the training set and
    the holdout, with the same sign, takes the k with the largest training correlation, and
    classifies by the sign of the sign-weighted sum of those features. With a standard holdout
    the selection leaks the holdout into the model, and the holdout accuracy climbs well above
    the true accuracy (1/2). With Thresholdout answering the holdout correlations and
    accuracies, the reported accuracy stays near 1/2. The paper's setting is T = 4/√n
    (0.04 at n = 10,000) and a tolerance of 1/√n (0.01), taken here as the scale 4σ of the
    per-query noise, so σ = 1/(4√n); about 2% of the queries then cross the threshold.

    Per-record correlation values x·y are clipped to [−4, 4] (the features are N(0, 1)).
    """
    gen = as_generator(rng)
    X_tr, X_ho, X_fr = (gen.standard_normal((n, d)) for _ in range(3))
    y_tr, y_ho, y_fr = (np.where(gen.random(n) < 0.5, -1.0, 1.0) for _ in range(3))
    cut = 1 / math.sqrt(n)
    c_tr = _correlations(X_tr, y_tr)
    ks = np.asarray(k_values, dtype=np.int64)

    def accuracy(X: FloatArray, y: FloatArray, w: FloatArray) -> float:
        pred = np.where(X @ w >= 0, 1.0, -1.0)
        return float(np.mean(pred == y))

    def weights(c_holdout: FloatArray, k: int) -> FloatArray:
        keep = (
            (np.abs(c_tr) > cut) & (np.abs(c_holdout) > cut) & (np.sign(c_tr) == np.sign(c_holdout))
        )
        order = np.argsort(-np.abs(np.where(keep, c_tr, 0.0)))[:k]
        w = np.zeros(d)
        w[order] = np.where(keep[order], np.sign(c_tr[order]), 0.0)
        return w

    # Thresholdout over records (features and label in one row)
    train_rec = np.hstack([X_tr, y_tr[:, None]])
    hold_rec = np.hstack([X_ho, y_ho[:, None]])
    t_out = Thresholdout(
        train_rec, hold_rec, threshold=4 * cut, sigma=cut / 4,
        budget=budget if budget is not None else max(10, d // 10),
        bounds=(-4.0, 4.0), rng=gen,
    )  # fmt: skip
    c_ho = _correlations(X_ho, y_ho)
    c_ho_t = np.empty(d)
    step = 500  # keeps the per-record value matrix small
    for j in range(0, d, step):
        cols = slice(j, min(d, j + step))

        def products(R: FloatArray, c: slice = cols) -> FloatArray:
            out: FloatArray = R[:, c] * R[:, -1:]
            return out

        c_ho_t[cols] = t_out.query_many(products)

    rows: dict[str, list[float]] = {key: [] for key in ("tr", "sh", "to", "fr", "ft")}
    for k in ks:
        w_std = weights(c_ho, int(k))
        w_thr = weights(np.nan_to_num(c_ho_t), int(k))
        rows["tr"].append(accuracy(X_tr, y_tr, w_std))
        rows["sh"].append(accuracy(X_ho, y_ho, w_std))
        rows["fr"].append(accuracy(X_fr, y_fr, w_std))
        rows["ft"].append(accuracy(X_fr, y_fr, w_thr))

        def correct(R: FloatArray, w: FloatArray = w_thr) -> npt.NDArray[np.bool_]:
            out: npt.NDArray[np.bool_] = np.where(R[:, :-1] @ w >= 0, 1.0, -1.0) == R[:, -1]
            return out

        rows["to"].append(t_out.query(correct, vectorized=True))
    return HoldoutCurves(
        k=ks,
        train=np.asarray(rows["tr"]),
        standard_holdout=np.asarray(rows["sh"]),
        thresholdout=np.asarray(rows["to"]),
        fresh=np.asarray(rows["fr"]),
        fresh_thresholdout=np.asarray(rows["ft"]),
        over_threshold=t_out.budget - t_out.remaining,
        queries=t_out.queries,
    )
