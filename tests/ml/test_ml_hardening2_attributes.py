"""A fitted model holds only DP outputs and public parameters (nothing per record, no exact count).

Each estimator is fitted on two neighbouring training sets (n and n + 1 records) with the same
seed, pickled and unpickled (what a user would ship), and every attribute it gained in ``fit``
is checked against an explicit allow-list: a *public* attribute (a parameter, the schema, the
accounting) must be identical on both neighbours; a *DP* attribute is computed from noised values
only. Everything reachable from the fitted attributes is walked: no array may have an axis of
length n (one entry per training record, as ``KMeans.labels_`` had) and no integer may equal n.
"""

from __future__ import annotations

import dataclasses
import numbers
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from dpkit.ml import PCA, GaussianNB, KMeans, LinearRegression, LogisticRegression, StandardScaler

N = 137  # no dimension, class count or iteration count of the models below is 137 or 138
G = np.random.default_rng(4)
X = G.uniform(-1, 1, (N + 1, 3))
Y_REG = X @ [1.0, -1.0, 0.5]
Y_CLS = np.digitize(X[:, 0], [-1 / 3, 1 / 3])  # three classes

PUBLIC, DP = "public", "dp"
CASES: list[tuple[Any, np.ndarray | None, dict[str, str]]] = [
    (LinearRegression(epsilon=1.0, delta=1e-6, data_norm=2.0, bounds_y=(-3, 3), rng=0), Y_REG,
     {"coef_": DP, "intercept_": DP, "ridge_": DP, "event_": PUBLIC, "noise_": PUBLIC,
      "n_features_in_": PUBLIC}),
    (LogisticRegression(epsilon=1.0, data_norm=2.0, classes=[0, 1, 2], rng=0), Y_CLS,
     {"coef_": DP, "intercept_": DP, "classes_": PUBLIC, "event_": PUBLIC,
      "coef_noise_": PUBLIC, "n_features_in_": PUBLIC}),
    (LogisticRegression(epsilon=1.0, delta=1e-6, data_norm=2.0, classes=[0, 1, 2],
                        method="dpsgd", epochs=1, batch_size=20, n_samples=140, rng=0), Y_CLS,
     {"coef_": DP, "intercept_": DP, "classes_": PUBLIC, "event_": PUBLIC,
      "coef_noise_": PUBLIC, "n_features_in_": PUBLIC}),
    (GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=[0, 1, 2], rng=0), Y_CLS,
     {"theta_": DP, "var_": DP, "class_count_": DP, "class_prior_": DP, "classes_": PUBLIC,
      "event_": PUBLIC, "noise_": PUBLIC, "n_features_in_": PUBLIC}),
    (StandardScaler(epsilon=1.0, bounds=(-1, 1), rng=0), None,
     {"mean_": DP, "var_": DP, "scale_": DP, "n_samples_seen_": DP, "event_": PUBLIC,
      "noise_": PUBLIC, "n_features_in_": PUBLIC}),
    (PCA(epsilon=1.0, delta=1e-6, data_norm=2.0, rng=0), None,
     {"components_": DP, "explained_variance_": DP, "explained_variance_ratio_": DP,
      "mean_": DP, "n_components_": PUBLIC, "event_": PUBLIC, "noise_": PUBLIC,
      "gram_noise_norm_": PUBLIC, "n_features_in_": PUBLIC}),
    (KMeans(n_clusters=3, epsilon=1.0, bounds=(-1, 1), rng=0), None,
     {"cluster_centers_": DP, "n_iter_": PUBLIC, "event_": PUBLIC, "noise_": PUBLIC,
      "n_features_in_": PUBLIC}),
]  # fmt: skip


def _walk(value: Any, path: str, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """Every value reachable from ``value``: containers, dataclasses and plain objects."""
    yield path, value
    if id(value) in seen or isinstance(value, str | bytes | numbers.Number | np.ndarray):
        return
    seen.add(id(value))
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}[{k!r}]", seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]", seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name), f"{path}.{f.name}", seen)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for k, v in vars(value).items():
            yield from _walk(v, f"{path}.{k}", seen)


def _fitted(est: Any, y: np.ndarray | None, n: int) -> tuple[Any, dict[str, Any]]:
    """Fit on the first n records, pickle and unpickle; the attributes ``fit`` added."""
    fitted = est.fit(X[:n]) if y is None else est.fit(X[:n], y[:n])
    back = pickle.loads(pickle.dumps(fitted))
    params = set(back.get_params(deep=False))
    return back, {k: v for k, v in vars(back).items() if k not in params}


IDS = [
    type(c[0]).__name__ + ("-dpsgd" if getattr(c[0], "method", "") == "dpsgd" else "")
    for c in CASES
]


@pytest.mark.parametrize("est, y, allowed", CASES, ids=IDS)
def test_fitted_attributes_are_dp_outputs_or_public(
    est: Any, y: np.ndarray | None, allowed: dict[str, str]
) -> None:
    _, small = _fitted(est, y, N)
    _, large = _fitted(est, y, N + 1)
    for n, attrs in ((N, small), (N + 1, large)):
        unknown = sorted(set(attrs) - set(allowed))
        assert not unknown, f"fitted attributes that are neither DP nor public: {unknown}"
        for name, value in attrs.items():
            for path, v in _walk(value, name, set()):
                if isinstance(v, np.ndarray):
                    assert n not in v.shape, f"{path} has one entry per training record"
                elif isinstance(v, numbers.Integral) and not isinstance(v, bool):
                    assert int(v) != n, f"{path} is the exact number of records"
    for name, kind in allowed.items():
        assert name in small and name in large, f"{name} is documented but missing"
        if kind == PUBLIC:  # a public attribute cannot depend on the neighbouring record
            assert pickle.dumps(small[name]) == pickle.dumps(large[name]), name


def test_kmeans_gives_per_record_clusters_only_on_request() -> None:
    # Regression: KMeans kept labels_, every training record's exact cluster (n and the cluster
    # sizes leaked). Clusters of given records come from predict / fit_predict, on request.
    km = KMeans(n_clusters=3, epsilon=1.0, bounds=(-1, 1), rng=0)
    labels = km.fit_predict(X)
    assert not hasattr(km, "labels_")
    np.testing.assert_array_equal(labels, km.predict(X))
    assert labels.shape == (X.shape[0],)
