"""Empirical audits of every estimator's fit (dpkit.audit), and broken variants that are caught.

Each audit fits the estimator on two neighbouring datasets (add/remove one extreme record) with
the model's output reduced to one number (a coefficient, a mean, a centre, a component), and
checks the lower bound ε_LB stays at or below the claimed ε. Fits cost ~10 ms (exact noise
drawn per release), so audits use 500 runs per dataset: enough to catch the broken variants
below (noise 30× too small, or clipping removed), which the last tests show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit import mechanisms
from dpkit.audit import epsilon_lower_bound
from dpkit.ml import (
    PCA,
    GaussianNB,
    KMeans,
    LinearRegression,
    LogisticRegression,
    StandardScaler,
    _linear,
    _logistic,
)

TRIALS = 500
EPS = 1.0

BASE_X = np.array([[0.2], [-0.3], [0.1]])
EXTRA_X = np.array([[1.0]])


def _pair(extra_y: Any, base_y: Any) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    d0 = (BASE_X, np.asarray(base_y))
    d1 = (np.vstack([BASE_X, EXTRA_X]), np.append(base_y, extra_y))
    return d0, d1


def _audit(make: Callable[[np.random.Generator], Any], out: Callable[[Any], float], d0: Any,
           d1: Any, *, delta: float = 0.0, seed: int = 0) -> float:  # fmt: skip
    def mechanism(data: Any, rng: np.random.Generator) -> float:
        return out(make(rng).fit(*data))

    result = epsilon_lower_bound(mechanism, d0, d1, trials=TRIALS, delta=delta, rng=seed)
    return float(result.epsilon)


CASES: list[tuple[str, Callable[[np.random.Generator], Any], Callable[[Any], float], Any, float]]
CASES = [
    (
        "LinearRegression",
        lambda g: LinearRegression(
            epsilon=EPS, delta=1e-6, data_norm=1.0, bounds_y=(-1, 1), fit_intercept=False, rng=g
        ),
        lambda m: float(m.coef_[0]),
        _pair(1.0, [0.2, -0.3, 0.1]),
        1e-6,
    ),
    (
        "LogisticRegression",
        lambda g: LogisticRegression(
            epsilon=EPS, data_norm=1.0, classes=[0, 1], fit_intercept=False, rng=g
        ),
        lambda m: float(m.coef_[0, 0]),
        _pair(1, [0, 1, 0]),
        0.0,
    ),
    (
        "GaussianNB",
        lambda g: GaussianNB(epsilon=EPS, bounds=(-1, 1), classes=[0, 1], rng=g),
        lambda m: float(m.theta_[1, 0]),
        _pair(1, [0, 1, 0]),
        0.0,
    ),
    (
        "StandardScaler",
        lambda g: StandardScaler(epsilon=EPS, bounds=(-1, 1), rng=g),
        lambda m: float(m.mean_[0]),
        _pair(0, [0, 0, 0]),
        0.0,
    ),
    (
        "KMeans",
        lambda g: KMeans(n_clusters=1, epsilon=EPS, bounds=(-1, 1), max_iter=1, rng=g),
        lambda m: float(m.cluster_centers_[0, 0]),
        _pair(0, [0, 0, 0]),
        0.0,
    ),
]


@pytest.mark.parametrize("name, make, out, pair, delta", CASES, ids=[c[0] for c in CASES])
def test_audit_does_not_refute_claim(name: str, make: Any, out: Any, pair: Any,
                                     delta: float) -> None:  # fmt: skip
    d0, d1 = pair
    assert _audit(make, out, d0, d1, delta=delta) <= EPS


def test_audit_dpsgd() -> None:
    # public size 4 and batch_size 64: q = 1, one step per epoch; 2 epochs composed
    def make(g: np.random.Generator) -> Any:
        return LogisticRegression(
            epsilon=EPS, delta=1e-6, data_norm=1.0, classes=[0, 1], method="dpsgd", epochs=2,
            n_samples=4, fit_intercept=False, rng=g,
        )  # fmt: skip

    d0, d1 = _pair(1, [0, 1, 0])
    assert _audit(make, lambda m: float(m.coef_[0, 0]), d0, d1, delta=1e-6) <= EPS


def test_audit_pca_first_component() -> None:
    # one record along the second axis against a base spread along the first
    base = np.array([[0.5, 0.0], [-0.5, 0.0], [0.4, 0.1]])
    d0, d1 = (base,), (np.vstack([base, [[0.0, 1.0]]]),)

    def make(g: np.random.Generator) -> Any:
        return PCA(n_components=1, epsilon=EPS, delta=1e-6, data_norm=1.0, centered=False, rng=g)

    assert _audit(make, lambda m: abs(float(m.components_[0, 1])), d0, d1, delta=1e-6) <= EPS


def test_broken_noise_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # claims ε but adds noise calibrated to 30ε: the audit must refute the claim
    real = mechanisms.Gaussian

    def weak(**kw: Any) -> Any:
        return real(**{**kw, "epsilon": 30 * kw["epsilon"]})

    monkeypatch.setattr(_linear, "Gaussian", weak)
    make, out, (d0, d1), delta = CASES[0][1], CASES[0][2], CASES[0][3], CASES[0][4]
    assert _audit(make, out, d0, d1, delta=delta) > EPS


def test_broken_clipping_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # a record of norm 40 with clipping switched off moves the coefficient far beyond the noise
    monkeypatch.setattr(_logistic, "clip_rows", lambda X, norm: X.copy())
    make, out = CASES[1][1], CASES[1][2]
    d0 = (BASE_X, np.array([0, 1, 0]))
    d1 = (np.vstack([BASE_X, [[40.0]]]), np.array([0, 1, 0, 1]))
    assert _audit(make, out, d0, d1) > EPS
