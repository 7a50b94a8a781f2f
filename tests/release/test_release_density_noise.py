"""Whitened noise of the series, kernel (HRW) and Bernstein densities against its stated law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import linalg, stats

from dpkit.accounting import DiscreteGaussianEvent, Neighbouring, epsilon_of
from dpkit.release import bernstein_density, kde_density, series_density
from dpkit.release._kde import JITTER, grid_points, kernel_matrix
from dpkit.release._series import cosine_basis

# Each test pools a few thousand whitened noise values from several releases and runs a KS test
# against the stated distribution (standard Laplace or normal; the exact discrete noise lives on
# a grid of about 2^-20 of its scale, far below what 10^4 draws can resolve). Threshold
# p > 1e-4 with fixed seeds.


def test_series_laplace_noise() -> None:
    x = np.random.default_rng(0).beta(2, 5, size=2000)
    exact = cosine_basis(x[:, None], (16,)).mean(axis=0)
    z = []
    for seed in range(150):
        d = series_density(x, bounds=(0, 1), epsilon=1.0, degree=16, n=2000, rng=seed)
        z.append((d.raw - exact) / d.noise_scale)
    w = np.concatenate(z)
    assert stats.kstest(w, stats.laplace.cdf).pvalue > 1e-4
    # the seed's calibration: scale m·c0/(nε) with c0 = √2 (to the fixed-point rounding)
    assert d.noise_scale == pytest.approx(16 * math.sqrt(2) / 2000, rel=1e-5)


def test_series_gaussian_noise_and_replace_doubles() -> None:
    x = np.random.default_rng(1).uniform(size=1000)
    exact = cosine_basis(x[:, None], (10,)).mean(axis=0)
    z, scales = [], {}
    for relation in (Neighbouring.ADD_REMOVE, Neighbouring.REPLACE):
        for seed in range(120):
            d = series_density(
                x,
                bounds=(0, 1),
                epsilon=1.0,
                delta=1e-6,
                degree=10,
                n=1000,
                rng=seed,
                neighbouring=relation,
            )
            z.append((d.raw - exact) / d.noise_scale)
        scales[relation] = d.noise_scale
        assert epsilon_of(d.event, delta=1e-6) <= 1.0
    assert stats.kstest(np.concatenate(z), stats.norm.cdf).pvalue > 1e-4
    ratio = scales[Neighbouring.REPLACE] / scales[Neighbouring.ADD_REMOVE]
    assert ratio == pytest.approx(2.0, rel=1e-3)


def test_kde_whitened_noise_is_standard_normal() -> None:
    x = np.random.default_rng(2).normal(0.5, 0.15, size=1500).clip(0, 1)
    h = (0.08,)
    pts = grid_points(((0.0, 1.0),), (64,))
    exact = kernel_matrix(x[:, None], pts, h).sum(axis=0)
    chol = linalg.cholesky(kernel_matrix(pts, pts, h) + JITTER * np.eye(64), lower=True)
    z = []
    for seed in range(60):
        d = kde_density(
            x, bounds=(0, 1), bandwidth=0.08, epsilon=1.0, delta=1e-6, grid=64, n=1500, rng=seed
        )
        z.append(linalg.solve_triangular(chol, d.raw - exact, lower=True) / d.noise_scale)
    w = np.concatenate(z)
    assert stats.kstest(w, stats.norm.cdf).pvalue > 1e-4
    assert isinstance(d.event, DiscreteGaussianEvent) and d.event.dimension == 64
    assert epsilon_of(d.event, delta=1e-6) <= 1.0
    # whitened σ within 12% of the analytic Gaussian σ for sensitivity 1 (zCDP conversion and
    # the rounding terms of the bound cost the rest)
    from dpkit.accounting import gaussian_sigma

    assert 1.0 <= d.noise_scale / gaussian_sigma(epsilon=1.0, delta=1e-6) < 1.12


def test_kde_noise_has_the_kernel_covariance() -> None:
    # Not whitened: neighbouring grid points' noise is strongly correlated (Gaussian process),
    # as HRW's construction requires; white noise of the same variance would not be.
    x = np.random.default_rng(3).uniform(size=500)
    pts = grid_points(((0.0, 1.0),), (32,))
    exact = kernel_matrix(x[:, None], pts, (0.1,)).sum(axis=0)
    e = np.array(
        [
            kde_density(
                x, bounds=(0, 1), bandwidth=0.1, epsilon=1.0, delta=1e-6, grid=32, n=500, rng=s
            ).raw
            - exact
            for s in range(300)
        ]
    )
    corr = np.corrcoef(e[:, 10], e[:, 11])[0, 1]
    expected = math.exp(-0.5 * (1 / 32 / 0.1) ** 2)  # K(t_10, t_11) ≈ 0.95
    assert abs(corr - expected) < 0.05  # sd of a correlation near 0.95 from 300 draws ≈ 0.006


def test_bernstein_laplace_noise_with_aldà_rubinstein_scale() -> None:
    x = np.random.default_rng(4).beta(3, 3, size=2000)
    k = 12
    nodes = np.arange(k + 1)[:, None] / k
    const = 1 / math.sqrt(2 * math.pi * 0.1**2)
    exact = const * kernel_matrix(nodes, x[:, None], (0.1,)).sum(axis=1) / 2000
    z = []
    for seed in range(250):
        d = bernstein_density(
            x, bounds=(0, 1), bandwidth=0.1, epsilon=1.0, degree=k, n=2000, rng=seed
        )
        z.append((d.raw - exact) / d.noise_scale)
    assert stats.kstest(np.concatenate(z), stats.laplace.cdf).pvalue > 1e-4
    # λ = Δ (k+1)^d / ε with Δ = 1/(n √(2π) h) (anchors: Aldà and Rubinstein 2017)
    assert d.noise_scale == pytest.approx(const / 2000 * (k + 1), rel=1e-5)


def test_densities_are_proper_and_accurate() -> None:
    rng = np.random.default_rng(5)
    x = rng.beta(2, 5, size=20_000)
    t = np.linspace(0.05, 0.95, 19)
    truth = stats.beta(2, 5).pdf(t)
    for dens in (
        series_density(x, bounds=(0, 1), epsilon=1.0, n=20_000, rng=1),
        kde_density(x, bounds=(0, 1), bandwidth=0.04, epsilon=1.0, delta=1e-6, n=20_000, rng=1),
        bernstein_density(x, bounds=(0, 1), bandwidth=0.04, epsilon=1.0, n=20_000, rng=1),
    ):
        assert dens.probabilities.min() >= 0 and dens.probabilities.sum() == pytest.approx(1.0)
        err = np.max(np.abs(dens.pdf(t) - truth))
        assert err < 0.35, (dens.method, err)  # peak density 2.46; bias dominates at this n
        assert abs(dens.sample(20_000, rng=2).mean() - 2 / 7) < 0.02, dens.method
