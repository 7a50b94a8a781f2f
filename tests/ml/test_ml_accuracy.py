"""Accuracy floors on data bundled with scikit-learn (no downloads), fixed seeds.

Each model is fitted on 5 fixed train/test splits (30% test) at each ε; the mean test score
must clear a floor set against the non-private model's and must not fall as ε grows from 0.5
to 50 (the model approaches the non-private one). Floors sit about 3 standard errors of the
5-split mean below the values observed with these seeds, so a change that costs real accuracy
fails while noise from a code change that keeps the algorithm does not. Features are min–max
scaled with each dataset's full range (public domain knowledge here); the peer comparison lives
in benchmarks/ml.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sklearn import datasets
from sklearn.model_selection import train_test_split

from dpkit.ml import GaussianNB, KMeans, LinearRegression, LogisticRegression

SPLITS = 5


def _scaled(loader: Callable[..., Any]) -> tuple[np.ndarray, np.ndarray]:
    X, y = loader(return_X_y=True)
    span = np.where(X.max(0) > X.min(0), X.max(0) - X.min(0), 1.0)
    return (X - X.min(0)) / span, y


def _mean_score(make: Callable[[float, int], Any], data: Any, eps: float) -> float:
    X, y = data
    scores = []
    for rep in range(SPLITS):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=rep)
        scores.append(make(eps, rep).fit(Xtr, ytr).score(Xte, yte))
    return float(np.mean(scores))


# (name, loader, factory, {ε: floor}); non-private scores with these splits: breast cancer
# logistic 0.968, wine naive Bayes 0.967, diabetes OLS R² 0.444.
CASES: list[tuple[str, Any, Callable[[float, int], Any], dict[float, float]]] = [
    (
        "LogisticRegression/breast_cancer",
        datasets.load_breast_cancer,
        lambda e, s: LogisticRegression(
            epsilon=e, data_norm=float(np.sqrt(30)), classes=[0, 1], rng=s
        ),
        {0.5: 0.55, 5.0: 0.80, 50.0: 0.93},
    ),
    (
        "GaussianNB/wine",
        datasets.load_wine,
        lambda e, s: GaussianNB(epsilon=e, bounds=(0, 1), classes=[0, 1, 2], rng=s),
        {0.5: 0.38, 5.0: 0.78, 50.0: 0.92},
    ),
    (
        "LinearRegression/diabetes",
        datasets.load_diabetes,
        lambda e, s: LinearRegression(
            epsilon=e, delta=1e-5, data_norm=float(np.sqrt(10)), bounds_y=(25, 346), rng=s
        ),
        {0.5: -0.3, 5.0: -0.05, 50.0: 0.15},
    ),
]


@pytest.mark.parametrize("name, loader, make, floors", CASES, ids=[c[0] for c in CASES])
def test_accuracy_floors_and_growth_with_epsilon(
    name: str, loader: Any, make: Any, floors: dict[float, float]
) -> None:
    data = _scaled(loader)
    scores = {eps: _mean_score(make, data, eps) for eps in floors}
    for eps, floor in floors.items():
        assert scores[eps] >= floor, (eps, scores)
    assert scores[0.5] <= scores[5.0] <= scores[50.0]


def test_kmeans_recovers_well_separated_clusters() -> None:
    # 3 clusters of 2,000 points, 0.05 apart in sd from centres 0.5 apart: at ε = 1 the centres
    # are found to within 0.05 (the sums' Laplace noise on 2,000 points is ~0.003 per coordinate)
    g = np.random.default_rng(0)
    centres = np.array([[0.2, 0.2], [0.8, 0.2], [0.5, 0.8]])
    X = np.vstack([c + g.normal(0, 0.05, (2000, 2)) for c in centres])
    km = KMeans(n_clusters=3, epsilon=1.0, bounds=(0, 1), max_iter=5, rng=3).fit(X)
    found = km.cluster_centers_
    dist = np.linalg.norm(found[:, None, :] - centres[None], axis=2)
    assert np.all(dist.min(axis=0) < 0.05)
