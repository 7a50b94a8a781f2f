"""Composition methods against published values, and their properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    PoissonSubsampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ZCDPEvent,
    calibrate,
    compose,
    delta_of,
    dpsgd_epsilon,
    dpsgd_noise_multiplier,
    epsilon_of,
    gaussian_epsilon,
)
from dpkit.accounting._rdp import ORDERS, rdp_curve
from dpkit.errors import PrivacyParameterError


def _sgd(q: float, sigma: float, steps: int) -> SelfComposedEvent:
    step = PoissonSubsampledEvent(GaussianEvent(sigma=sigma), sampling_rate=q)
    return SelfComposedEvent(step, count=steps)


# ε at δ = 1e-5 for DP-SGD computed with Google's dp_accounting 0.6.0 (PLDAccountant with its
# default discretisation 1e-4, and RdpAccountant), Poisson sampling, add/remove neighbours.
# Abadi et al. (2016) report 1.26 for (q=0.01, σ=4, 10,000 steps) with the moments accountant.
DPSGD = [
    (0.01, 4.0, 10_000, 0.9469993071171585, 1.0354900660362436),
    (0.01, 1.0, 1_000, 1.8282436456232047, 2.101366525420273),
    (0.001, 0.8, 5_000, 0.569531288440918, 1.2768851477658123),
]


@pytest.mark.parametrize(("q", "sigma", "steps", "pld", "rdp"), DPSGD)
def test_dpsgd_against_dp_accounting(
    q: float, sigma: float, steps: int, pld: float, rdp: float
) -> None:
    c = compose(_sgd(q, sigma, steps), method="auto")
    got_pld = c.methods["pld"].epsilon(1e-5)
    got_rdp = c.methods["rdp"].epsilon(1e-5)
    assert got_pld == pytest.approx(pld, rel=1e-5)
    assert got_pld < 1.26 or sigma != 4.0  # tighter than the moments accountant
    # RDP at fractional orders too, and a search between the grid's orders: never looser than
    # dp_accounting's RDP (beyond 1e-3), and no tighter than the PLD (a far tighter method).
    assert got_pld <= got_rdp <= rdp * (1 + 1e-3)
    assert dpsgd_epsilon(sigma, q, steps, 1e-5) == pytest.approx(min(got_pld, got_rdp))


def test_subsampled_gaussian_rdp_values() -> None:
    # dp_accounting 0.6.0 `_compute_rdp_poisson_subsampled_gaussian(0.01, 4.0, [2, 8, 32, 64])`
    # (Mironov, Talwar & Zhang 2019).
    expected = {
        2: 6.449425094202615e-06,
        8: 2.5899123012412577e-05,
        32: 0.00010526360659077987,
        64: 0.00021520916161849735,
    }
    curve = rdp_curve(PoissonSubsampledEvent(GaussianEvent(sigma=4.0), sampling_rate=0.01))
    for order, value in expected.items():
        assert curve[np.flatnonzero(order == ORDERS)[0]] == pytest.approx(value, rel=1e-9)


def test_laplace_pld_against_dp_accounting() -> None:
    # dp_accounting 0.6.0 PLDAccountant: 10 × Laplace(1): 9.989962316985142;
    # 100 × Poisson(0.1)-subsampled Laplace(1): 4.152301140349271 (δ = 1e-5).
    lap = compose(SelfComposedEvent(LaplaceEvent(scale=1.0), count=10), method="pld")
    assert lap.epsilon(1e-5) == pytest.approx(9.989962316985142, rel=1e-8)
    sub = PoissonSubsampledEvent(LaplaceEvent(scale=1.0), sampling_rate=0.1)
    got = compose(SelfComposedEvent(sub, count=100), method="pld").epsilon(1e-5)
    assert got == pytest.approx(4.152301140349271, rel=1e-8)


def test_single_laplace_exact() -> None:
    # Laplace(b=1, Δ=1): δ(ε) = 1 - e^{(ε - 1)/2} for ε < 1 (its exact privacy curve).
    pld = compose(LaplaceEvent(scale=1.0), method="pld")
    for eps in (0.0, 0.3, 0.9):
        exact = -math.expm1((eps - 1) / 2)
        assert exact <= pld.delta(eps) <= exact + 1e-4


def test_optimal_composition_kov() -> None:
    # Kairouz, Oh & Viswanath (2015): exact composition of k (ε₀, δ₀) mechanisms. The PLD of
    # the canonical pair is the same distribution, so the two agree (PLD slightly above).
    c = compose(SelfComposedEvent(ApproxDPEvent(epsilon=0.1, delta=1e-7), count=100))
    opt = c.methods["optimal"].epsilon(1e-5)
    pld = c.methods["pld"].epsilon(1e-5)
    assert opt <= pld <= opt * 1.001
    assert opt < c.methods["basic"].epsilon(1e-5) == pytest.approx(10.0)
    # k = 1: δ(ε) = δ₀ + (1 - δ₀)(e^{ε₀} - e^{ε})₊/(1 + e^{ε₀})
    one = compose(PureDPEvent(epsilon=1.0), method="optimal")
    assert one.delta(0.5) == pytest.approx((math.e - math.exp(0.5)) / (1 + math.e))


def test_gaussian_limits_agree() -> None:
    # k Gaussians of σ are one Gaussian of σ/√k: exact value by Balle & Wang.
    c = compose(SelfComposedEvent(GaussianEvent(sigma=20.0), count=400))
    exact = gaussian_epsilon(1e-6, 1.0)
    assert exact <= c.methods["pld"].epsilon(1e-6) <= exact * 1.001
    # zCDP (CKS conversion) and RDP bracket it from above; RDP on a grid is no better than CKS.
    assert exact < c.methods["zcdp"].epsilon(1e-6) <= c.methods["rdp"].epsilon(1e-6) + 1e-9
    assert c.epsilon(1e-6) == pytest.approx(c.methods["pld"].epsilon(1e-6))


@settings(max_examples=15, deadline=None)
@given(st.floats(0.5, 20.0), st.integers(1, 64), st.sampled_from([1e-3, 1e-6, 1e-9]))
def test_pld_gaussian_never_below_exact(sigma: float, k: int, delta: float) -> None:
    exact = gaussian_epsilon(delta, math.sqrt(k) / sigma)
    got = compose(SelfComposedEvent(GaussianEvent(sigma=sigma), count=k), method="pld")
    eps = got.epsilon(delta)
    assert eps >= exact
    assert eps <= exact * 1.001 + 1e-4  # within 0.1% (plus one grid step near ε = 0)


@settings(max_examples=10, deadline=None)
@given(st.floats(0.3, 3.0), st.integers(1, 30), st.sampled_from(["pld", "rdp", "zcdp", "auto"]))
def test_composition_is_monotone(sigma: float, k: int, method: str) -> None:
    e = GaussianEvent(sigma=sigma)
    a = compose(SelfComposedEvent(e, count=k), method=method).epsilon(1e-6)
    b = compose(SelfComposedEvent(e, count=k + 1), method=method).epsilon(1e-6)
    c = compose(SelfComposedEvent(GaussianEvent(sigma=sigma * 1.1), count=k), method=method)
    assert a <= b
    assert c.epsilon(1e-6) <= a


def test_pure_limits() -> None:
    # δ = 0: every pure event composes by the plain sum.
    events = [
        LaplaceEvent(scale=2.0),
        RandomizedResponseEvent(epsilon=0.25),
        ExponentialEvent(epsilon=0.25),
    ]
    assert epsilon_of(events) == pytest.approx(1.0)
    assert epsilon_of(GaussianEvent(sigma=1.0)) == math.inf
    # with δ > 0 auto is never worse than basic
    assert compose(events).epsilon(1e-6) <= 1.0 + 1e-12


def test_discrete_events() -> None:
    # Discrete Gaussian is at least as private as ρ = Δ²/2σ² zCDP says (CKS 2020, Thm 4) and
    # close to the continuous Gaussian at σ = 5.
    dg = compose(SelfComposedEvent(DiscreteGaussianEvent(sigma=5.0), count=10))
    assert dg.methods["pld"].epsilon(1e-6) <= dg.methods["zcdp"].epsilon(1e-6)
    cont = gaussian_epsilon(1e-6, math.sqrt(10) / 5.0)
    assert dg.epsilon(1e-6) == pytest.approx(cont, rel=0.01)
    dl = compose(SelfComposedEvent(DiscreteLaplaceEvent(scale=2.0), count=20), method="pld")
    assert dl.epsilon(0.0 + 1e-12) <= 10.0 + 1e-9
    assert dl.epsilon(1e-5) < 10.0


def test_replace_neighbouring_is_never_tighter() -> None:
    inner = GaussianEvent(sigma=2.0)
    add = PoissonSubsampledEvent(inner, sampling_rate=0.05)
    rep = PoissonSubsampledEvent(inner, sampling_rate=0.05, neighbouring=Neighbouring.REPLACE)
    e_add = epsilon_of(SelfComposedEvent(add, count=50), delta=1e-6)
    e_rep = epsilon_of(SelfComposedEvent(rep, count=50), delta=1e-6)
    assert e_rep >= e_add
    # replace with a common atom: δ(ε) = q·δ_inner(ε) exactly for one step
    one = compose(rep, method="pld").delta(1.0)
    assert one == pytest.approx(0.05 * delta_of(inner, epsilon=1.0), rel=1e-3)


def test_delta_of_and_epsilon_of_agree() -> None:
    ev = ComposedEvent(events=[GaussianEvent(sigma=3.0), LaplaceEvent(scale=4.0)])
    eps = epsilon_of(ev, delta=1e-6)
    assert delta_of(ev, epsilon=eps) <= 1e-6 * 1.001
    assert delta_of(ev, epsilon=eps * 0.9) > 1e-6


def test_unsupported_and_bad_methods() -> None:
    with pytest.raises(PrivacyParameterError, match="method"):
        compose(GaussianEvent(sigma=1.0), method="magic")
    with pytest.raises(PrivacyParameterError, match="cannot account"):
        compose(ZCDPEvent(rho=0.1), method="pld")
    assert compose(ZCDPEvent(rho=0.1)).epsilon(1e-6) > 0
    with pytest.raises(PrivacyParameterError):
        compose([], method="auto")
    with pytest.raises(PrivacyParameterError):
        epsilon_of(GaussianEvent(sigma=1.0), delta=1.0)


def test_calibration() -> None:
    # 100 Gaussians = one at σ/10, so the answer is 10 × the analytic σ (Balle & Wang).
    s = calibrate(lambda s: GaussianEvent(sigma=s), epsilon=1.0, delta=1e-5, count=100)
    assert s == pytest.approx(37.306316348159374, rel=2e-4)
    eps = compose(SelfComposedEvent(GaussianEvent(sigma=s), count=100)).epsilon(1e-5)
    assert eps <= 1.0
    nm = dpsgd_noise_multiplier(epsilon=2.0, delta=1e-5, sample_rate=0.01, steps=1000)
    assert dpsgd_epsilon(nm, 0.01, 1000, 1e-5) <= 2.0
    assert dpsgd_epsilon(nm * 0.99, 0.01, 1000, 1e-5) > 2.0 * 0.999
    with pytest.raises(PrivacyParameterError):
        dpsgd_epsilon(1.0, 0.0, 10, 1e-5)
    with pytest.raises(PrivacyParameterError):
        dpsgd_epsilon(-1.0, 0.1, 10, 1e-5)
