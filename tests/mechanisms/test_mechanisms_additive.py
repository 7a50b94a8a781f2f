"""Laplace, Gaussian, geometric and discrete Gaussian: distributions and ci() coverage.

Thresholds: every statistical test uses a fixed seed and rejects only at p < 1e-4 (chi-square,
KS or exact binomial), so a correct implementation fails with probability below 1e-4 per test
for a random seed, and never for the fixed one; a wrong distribution (a wrong scale by 2%, a
missing rounding term) is rejected at these sample sizes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpkit.accounting import epsilon_of
from dpkit.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace

P_MIN = 1e-4


def _dlap_cdf(m: np.ndarray, t: float) -> np.ndarray:
    """P(K ≤ m) for K discrete Laplace with P(k) ∝ exp(-|k|/t), m integer (float array)."""
    r = math.exp(-1.0 / t)
    # P(K >= j) = r^j / (1 + r) for j >= 1, so P(K <= m) = 1 - r^(m+1)/(1+r) for m >= 0
    pos = 1.0 - np.exp(-(m + 1.0) / t) / (1.0 + r)
    neg = np.exp(m / t) / (1.0 + r)  # P(K <= m) = P(K >= -m) = r^(-m)/(1+r) for m <= -1
    return np.where(m >= 0, pos, neg)


def test_laplace_release_matches_discrete_laplace_on_grid() -> None:
    lap = Laplace(epsilon=0.7, sensitivity=2.0)
    gen = np.random.default_rng(2024)
    y = np.array([lap.release(0.0, rng=gen) for _ in range(200)])  # one at a time, as users do
    big = Laplace(epsilon=0.7, sensitivity=2.0, shape=200_000).release(
        np.zeros(200_000), rng=np.random.default_rng(7)
    )
    step = math.ldexp(1.0, lap.grid)
    for sample in (y, big):
        k = sample / step
        assert np.all(k == np.rint(k)), "every output is on the grid 2**grid"
    # vector and scalar mechanisms with the same shape-1 calibration share the scale to 1e-6
    t = Laplace(epsilon=0.7, sensitivity=2.0, shape=200_000).scale / step
    assert t == pytest.approx(2.0 / 0.7 / step, rel=1e-6)
    edges = np.array([-np.inf, *np.linspace(-12, 12, 49), np.inf])  # in units of the scale b
    k = big / step
    edges_k = np.floor(edges[1:-1] * t)
    cdf = np.concatenate(([0.0], _dlap_cdf(edges_k, t), [1.0]))
    expected = np.diff(cdf) * k.size
    observed = np.histogram(k, bins=np.concatenate(([-np.inf], edges_k + 0.5, [np.inf])))[0]
    assert stats.chisquare(observed, expected).pvalue > P_MIN


def test_laplace_scale_is_sensitivity_over_epsilon() -> None:
    lap = Laplace(epsilon=0.5, sensitivity=3.0, shape=(4, 5))
    assert lap.scale >= 3.0 / 0.5
    assert lap.scale == pytest.approx(6.0, rel=1e-9)
    # the event pays for the rounded sensitivity: ε of the event is at most ε (to an ulp)
    assert lap.event.sensitivity / lap.event.scale <= 0.5
    assert epsilon_of(lap.event) == pytest.approx(0.5, rel=1e-15)
    assert lap.event.sensitivity >= 3.0 + 20 * 2.0**lap.grid


def test_gaussian_release_matches_normal() -> None:
    g = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0, shape=100_000)
    # A vector of discrete Gaussians is accounted by its zCDP bound (CKS 2020, Thm 14), so σ is
    # above the scalar analytic 3.7306 of Balle & Wang (2018).
    assert g.sigma == pytest.approx(4.0451, abs=1e-3)
    assert Gaussian(epsilon=1.0, delta=1e-5).sigma == pytest.approx(3.7306, abs=1e-3)
    assert epsilon_of(g.event, delta=1e-5) <= 1.0
    y = g.release(np.zeros(100_000), rng=np.random.default_rng(11))
    step = math.ldexp(1.0, g.grid)
    assert np.all(y / step == np.rint(y / step))
    # at σ = 2^24 grid steps the discrete Gaussian's CDF equals the normal one to ~1e-7
    assert stats.kstest(y / g.sigma, "norm").pvalue > P_MIN


def test_gaussian_scalar_matches_vector_calibration() -> None:
    one = Gaussian(epsilon=0.5, delta=1e-6)
    many = Gaussian(epsilon=0.5, delta=1e-6, shape=1000)
    # vectors are accounted by zCDP (CKS 2020, Thm 14), scalars by the exact discrete curve
    assert many.sigma > one.sigma
    assert many.event.dimension == 1000 and one.event.dimension == 1
    # events are in grid units: rounding 1000 coordinates adds √1000 grid steps to Δ₂ = 1
    assert many.event.sensitivity >= 2.0**-many.grid + math.sqrt(1000)
    assert many.event.sigma == pytest.approx(math.ldexp(many.sigma, -many.grid), rel=1e-15)
    # one coordinate: rounded values differ by the integer ⌊Δ/2^grid⌋ + 1 grid steps
    assert one.event.sensitivity == math.floor(2.0**-one.grid) + 1
    assert epsilon_of(one.event, delta=1e-6) <= 0.5
    assert epsilon_of(many.event, delta=1e-6) <= 0.5


def test_geometric_matches_discrete_laplace_pmf() -> None:
    geo = Geometric(epsilon=0.8, sensitivity=1, shape=100_000)
    y = geo.release(np.full(100_000, 5), rng=np.random.default_rng(3))
    assert y.dtype == np.int64
    k = y - 5
    t = 1.0 / 0.8
    support = np.arange(-12, 13)
    observed = np.array([(k < -12).sum(), *[(k == j).sum() for j in support], (k > 12).sum()])
    cdf = _dlap_cdf(np.array([-13.0, *support.astype(float)]), t)
    probs = np.concatenate(([cdf[0]], np.diff(cdf), [1.0 - cdf[-1]]))
    assert stats.chisquare(observed, probs * k.size).pvalue > P_MIN


def test_geometric_integer_in_integer_out() -> None:
    geo = Geometric(epsilon=1.0)
    y = geo.release(7, rng=0)
    assert isinstance(y, int)
    assert isinstance(geo.release(np.int64(7), rng=0), int)
    assert geo.release(7.0, rng=0) == y  # integral floats are accepted, same noise for the seed


def _dgauss_pmf(support: np.ndarray, sigma: float) -> np.ndarray:
    k = np.arange(-60 * int(sigma) - 60, 60 * int(sigma) + 61)
    z = np.exp(-(k * k) / (2 * sigma * sigma)).sum()
    return np.exp(-(support * support) / (2 * sigma * sigma)) / z


def test_discrete_gaussian_matches_pmf() -> None:
    dg = DiscreteGaussian(rho=0.5, shape=100_000)  # σ = 1
    assert dg.sigma == 1.0
    k = dg.release(np.zeros(100_000, dtype=int), rng=np.random.default_rng(5))
    support = np.arange(-4, 5)
    p = _dgauss_pmf(support, 1.0)
    observed = np.array([(k < -4).sum(), *[(k == j).sum() for j in support], (k > 4).sum()])
    tail = (1.0 - p.sum()) / 2
    assert stats.chisquare(observed, np.array([tail, *p, tail]) * k.size).pvalue > P_MIN


def test_discrete_gaussian_epsilon_delta_calibration() -> None:
    dg = DiscreteGaussian(epsilon=1.0, delta=1e-5)
    # a hair above the continuous analytic σ = 3.7306 (Balle & Wang), as the exact discrete
    # privacy loss requires
    assert 3.7306 < dg.sigma < 3.75
    assert epsilon_of(dg.event, delta=1e-5) <= 1.0
    assert epsilon_of(dg.event, delta=1e-5) > 0.9999
    assert dg.rho == pytest.approx(1 / (2 * dg.sigma**2))
    vec = DiscreteGaussian(epsilon=1.0, delta=1e-5, shape=4, sensitivity=2.0)
    assert epsilon_of(vec.event, delta=1e-5) <= 1.0
    zc = DiscreteGaussian(rho=0.125, delta=1e-6)
    assert zc.sigma == 2.0
    assert zc.epsilon is not None
    assert zc.epsilon <= 0.125 + 2 * math.sqrt(0.125 * math.log(1e6))  # Bun & Steinke's bound


def _coverage_check(exceed: int, n: int, p_exact: float) -> None:
    # two-sided exact binomial test of the exceedance rate against the exact tail probability
    assert stats.binomtest(exceed, n, p_exact).pvalue > P_MIN


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_laplace_ci_coverage(alpha: float) -> None:
    n = 40_000
    lap = Laplace(epsilon=1.0, sensitivity=1.0, shape=n)
    value = 0.3  # off the grid, so the rounding term matters
    y = lap.release(np.full(n, value), rng=np.random.default_rng(int(alpha * 100)))
    w = lap.ci(alpha)
    exceed = int((np.abs(y - value) > w).sum())
    # the ci is the exact discrete quantile: its tail is alpha to within one grid step
    _coverage_check(exceed, n, alpha)


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_gaussian_ci_coverage(alpha: float) -> None:
    n = 40_000
    g = Gaussian(epsilon=1.0, delta=1e-6, sensitivity=2.0, shape=n)
    y = g.release(np.full(n, -1.7), rng=np.random.default_rng(int(alpha * 1000)))
    w = g.ci(alpha)
    assert w == pytest.approx(g.sigma * stats.norm.ppf(1 - alpha / 2), rel=1e-6)
    _coverage_check(int((np.abs(y + 1.7) > w).sum()), n, alpha)


def test_geometric_ci_is_exact_quantile() -> None:
    geo = Geometric(epsilon=0.5, shape=40_000)
    w = geo.ci(0.1)
    t = 2.0
    r = math.exp(-1 / t)
    tail = lambda m: 2 * r ** (m + 1) / (1 + r)  # noqa: E731
    assert tail(w) <= 0.1 < tail(w - 1)
    y = geo.release(np.zeros(40_000, dtype=int), rng=np.random.default_rng(9))
    _coverage_check(int((np.abs(y) > w).sum()), 40_000, tail(w))


def test_discrete_gaussian_ci_is_exact_quantile() -> None:
    dg = DiscreteGaussian(rho=1 / 8, shape=40_000)  # σ = 2
    w = dg.ci(0.05)
    k = np.arange(-200, 201)
    p = _dgauss_pmf(k, 2.0)
    tail = lambda m: p[np.abs(k) > m].sum()  # noqa: E731
    assert tail(w) <= 0.05 < tail(w - 1)
    y = dg.release(np.zeros(40_000, dtype=int), rng=np.random.default_rng(10))
    _coverage_check(int((np.abs(y) > w).sum()), 40_000, tail(w))


def test_large_sigma_ci_is_a_valid_bound() -> None:
    dg = DiscreteGaussian(rho=1e-8)  # σ ≈ 7071: the Gaussian-tail bound path
    w = dg.ci(0.05)
    assert dg.sigma * 1.959 < w <= dg.sigma * 1.96 + 2
