"""Accuracy before fitting of the dpkit.ml models with a closed form of their noise.

Each ``accuracy()`` reads the mechanisms the fit itself builds, so its numbers are those of the
fit's noise: checked against the fitted model's ``noise_`` and, for objective perturbation, by
coverage. Logistic regression: over 150 fits (fixed seed) the private coefficients must lie
within ``coef_shift`` of the non-private minimiser of the same objective at least 1 − alpha minus
4 binomial sd of the time (a bound, so no upper band), and the 0.9 quantile of the distance must
reach a fifth of it (the strong-convexity bound ‖b‖/Λ is loose by the curvature of the loss
only: measured 0.31). Laplace/Gaussian half-widths are exact quantiles of the noise,
whose coverage the mechanisms' own tests check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.mechanisms import Laplace
from dpkit.ml import PCA, KMeans, LinearRegression, LogisticRegression, StandardScaler
from dpkit.ml._logistic import _newton, objective_perturbation_noise

ALPHA = 0.1
G = np.random.default_rng(0)
X = G.uniform(-0.5, 0.5, size=(300, 2))
Y = (X[:, 0] + X[:, 1] > 0).astype(int)


def test_logistic_coef_shift_covers() -> None:
    kw = {"epsilon": 1.0, "data_norm": 1.0, "classes": [0, 1], "fit_intercept": False}
    w = LogisticRegression(**kw).accuracy(ALPHA, n_features=2)["coef_shift"]
    lam, _ = objective_perturbation_noise(epsilon=1.0, radius=math.nextafter(1.0, 2.0), ridge=1.0)
    w0 = _newton(X, np.where(Y == 1, 1.0, -1.0), lam, np.zeros(2))
    m = 150
    dist = np.array(
        [np.linalg.norm(LogisticRegression(rng=s, **kw).fit(X, Y).coef_[0] - w0) for s in range(m)]
    )
    band = 4 * math.sqrt(ALPHA * (1 - ALPHA) / m)
    assert float(np.mean(dist <= w)) >= 1 - ALPHA - band
    assert float(np.quantile(dist, 1 - ALPHA)) >= 0.2 * w


def test_logistic_dpsgd_has_no_closed_form() -> None:
    m = LogisticRegression(epsilon=1.0, delta=1e-6, data_norm=1.0, classes=[0, 1], method="dpsgd")
    with pytest.raises(ValueError, match="objective"):
        m.accuracy(n_features=2)


def test_linear_and_pca_read_the_fits_gaussian_noise() -> None:
    lr = LinearRegression(epsilon=1.0, delta=1e-6, data_norm=1.0, bounds_y=(0, 1), rng=1)
    acc = lr.accuracy(ALPHA, n_features=2)
    lr.fit(X, Y.astype(float))
    for key, name in (("gram", "gram"), ("xy", "xy"), ("eigenvalue", "eigenvalue")):
        sigma = lr.noise_[name]
        assert acc[key] >= sigma * 1.6  # at least the Gaussian 0.9 quantile, 1.645 σ
        assert acc[key] <= sigma * 1.7 + 1e-9 * sigma  # and within the grid's few steps of it
    pca = PCA(epsilon=1.0, delta=1e-6, data_norm=1.0, rng=1)
    pacc = pca.accuracy(ALPHA, n_features=2)
    pca.fit(X)
    for key in ("gram", "sum", "count"):
        assert pca.noise_[key] * 1.6 <= pacc[key] <= pca.noise_[key] * 1.7


def test_scaler_and_kmeans_read_the_fits_laplace_noise() -> None:
    sc = StandardScaler(epsilon=1.0, bounds=(-0.5, 0.5), rng=1)
    acc = sc.accuracy(ALPHA, n_features=2)
    sc.fit(X)
    assert acc["count"] == Laplace(epsilon=1.0 / 3, sensitivity=1.0).accuracy(ALPHA)
    assert math.isclose(acc["sums"], -math.log(ALPHA) * sc.noise_["sums"], rel_tol=0.01)
    km = KMeans(2, epsilon=1.0, bounds=(-0.5, 0.5), max_iter=4)
    want = Laplace(epsilon=1.0 / 8, sensitivity=1.0).accuracy(ALPHA)  # ε / max_iter / 2
    assert math.isclose(km.accuracy(ALPHA, n_features=2)["counts"], want, rel_tol=1e-9)
