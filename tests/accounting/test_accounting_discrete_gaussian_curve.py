"""The exact O(1) privacy curve and bucketed PLD of the scalar discrete Gaussian."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from dpkit.accounting import (
    DiscreteGaussianEvent,
    GaussianEvent,
    compose,
    delta_of,
    epsilon_of,
)
from dpkit.accounting._discrete_gaussian import (
    discrete_gaussian_delta,
    discrete_gaussian_epsilon,
    discrete_gaussian_mass,
)


def _brute_delta(eps: float, sigma: float, sens: int) -> float:
    """Σ_k [P(k) − e^ε Q(k)]₊ over the whole support (P = N_ℤ(D, σ²), Q = N_ℤ(0, σ²))."""
    big = int(40 * sigma) + sens + 10
    k = np.arange(-big, big + 1, dtype=np.float64)
    z = np.exp(-(k * k) / (2 * sigma * sigma)).sum()
    q = np.exp(-(k * k) / (2 * sigma * sigma)) / z
    p = np.exp(-((k - sens) ** 2) / (2 * sigma * sigma)) / z
    v = p - math.exp(eps) * q
    return min(1.0, math.fsum(v[v > 0]))


CASES = [
    (sigma, sens, eps)
    for sigma in (0.5, 1.0, 3.0, 10.0, 100.0, 1000.0, 2000.0, 5000.0)
    for sens in (1, 2, 5, 30)
    for eps in (0.01, 0.3, 1.0, 2.0, 5.0)
]


@pytest.mark.parametrize(("sigma", "sens", "eps"), CASES)
def test_matches_brute_force(sigma: float, sens: int, eps: float) -> None:
    # σ ≤ 1024 uses direct sums, σ = 2000, 5000 Euler–Maclaurin; both must never be below the
    # brute-force sum and agree to 1e-9 relative wherever δ is not astronomically small (below
    # 1e-20 both sides lose relative accuracy to cancellation, and the fast one stays above).
    brute = _brute_delta(eps, sigma, sens)
    fast = discrete_gaussian_delta(eps, sigma, sens)
    assert fast >= brute * (1 - 1e-15)
    if brute > 1e-20:
        assert fast <= brute * (1 + 1e-9) + 1e-300


def test_discrete_worse_than_continuous_at_small_sigma() -> None:
    # The discrete Gaussian is not dominated by the continuous one (δ ratio 1.19 at σ = D = 1).
    ratio = discrete_gaussian_delta(2.0, 1.0, 1) / delta_of(GaussianEvent(sigma=1.0), epsilon=2.0)
    assert 1.18 < ratio < 1.20


def test_events_use_the_exact_curve() -> None:
    ev = DiscreteGaussianEvent(sigma=3.0, sensitivity=2)
    assert epsilon_of(ev, delta=1e-5) == discrete_gaussian_epsilon(1e-5, 3.0, 2)
    assert delta_of(ev, epsilon=1.0) == discrete_gaussian_delta(1.0, 3.0, 2)
    eps = epsilon_of(ev, delta=1e-5)
    assert (
        discrete_gaussian_delta(eps, 3.0, 2) <= 1e-5 < discrete_gaussian_delta(eps * 0.999, 3.0, 2)
    )


@pytest.mark.parametrize("sigma", [3.73 * 2**24, 3.73 * 2**35, 3.73 * 2**60])
def test_huge_sigma_is_fast_and_close_to_continuous(sigma: float) -> None:
    sens = round(sigma / 3.73)
    ev = DiscreteGaussianEvent(sigma=sigma, sensitivity=sens)
    epsilon_of(ev, delta=1e-5)  # warm-up (imports, caches)
    start = time.process_time()
    eps = epsilon_of(ev, delta=1e-5)
    elapsed = time.process_time() - start
    cont = epsilon_of(GaussianEvent(sigma=sigma, sensitivity=sens), delta=1e-5)
    assert eps == pytest.approx(cont, rel=1e-9)
    assert elapsed < 0.25  # typically ~2 ms; generous bound, only to catch O(σ) work


def test_mass_sums_to_one_and_is_symmetric() -> None:
    for sigma in (2.0, 3000.0):
        edges = np.array([-np.inf, -7.0, -1.0, 0.0, 1.0, 7.0, np.inf])
        m = discrete_gaussian_mass(edges[:-1], edges[1:], sigma)
        assert m.sum() == pytest.approx(1.0, abs=1e-14)
        seven = discrete_gaussian_mass(np.array([7.0]), np.array([8.0]), sigma)[0]
        # P[X < -7] = P[X ≥ 8] = P[X ≥ 7] − P[X = 7]
        assert m[0] == pytest.approx(m[-1] - seven, rel=1e-12)


@pytest.mark.parametrize("sigma", [1500.0, 3.73 * 2**30])
def test_bucketed_pld_composes_like_continuous(sigma: float) -> None:
    sens = round(sigma / 3.0)
    dg = compose([DiscreteGaussianEvent(sigma=sigma, sensitivity=sens)] * 4, method="pld")
    g = compose([GaussianEvent(sigma=sigma, sensitivity=sens)] * 4, method="pld")
    # Large σ: the curves differ by ≲ 1e-7 relative; the PLD discretisation dominates.
    assert dg.epsilon(1e-6) == pytest.approx(g.epsilon(1e-6), rel=1e-3)
    exact_single = epsilon_of(DiscreteGaussianEvent(sigma=sigma, sensitivity=sens), delta=1e-6)
    pld_single = compose(DiscreteGaussianEvent(sigma=sigma, sensitivity=sens), method="pld")
    assert pld_single.epsilon(1e-6) >= exact_single * (1 - 1e-9)  # pessimistic


def test_vector_event_uses_zcdp() -> None:
    ev = DiscreteGaussianEvent(sigma=10.0, sensitivity=2.0, dimension=3)
    zc = compose(ev, method="zcdp").epsilon(1e-5)
    assert epsilon_of(ev, delta=1e-5) <= zc
