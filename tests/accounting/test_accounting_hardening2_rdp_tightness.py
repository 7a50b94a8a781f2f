"""RDP accounting against the peers' own test vectors: never looser, and never below the truth.

The vectors are the published values of the peers' test suites, copied as numbers:
Google's dp_accounting (``rdp/rdp_privacy_accountant_test.py``), TensorFlow Privacy
(``analysis/rdp_accountant_test.py`` and ``analysis/compute_dp_sgd_privacy_test.py``) and Opacus
(``tests/accountants_test.py``). Where a test compares with a multi-precision integral of
Mironov, Talwar & Zhang (2019), that integral's value (mpmath quadrature, 30 digits) is given.
Each of dpkit's values must be at most the peer's times 1 + 1e-3; where the exact value is known it
must not be below it (an RDP bound is an upper bound).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting import (
    ApproxDPEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSubsampledEvent,
    SelfComposedEvent,
    ZCDPEvent,
    compose,
    dpsgd_noise_multiplier,
    gaussian_delta,
    gaussian_epsilon,
)
from dpkit.accounting._events import DiscreteGaussianEvent
from dpkit.accounting._rdp import ORDERS, rdp_curve, rdp_delta, rdp_epsilon

TOL = 1e-3  # "never looser than the peer by more than this, relatively"


def _sgm(q: float, sigma: float, steps: int = 1) -> SelfComposedEvent:
    step = PoissonSubsampledEvent(GaussianEvent(sigma=sigma), sampling_rate=q)
    return SelfComposedEvent(step, count=steps)


# (source, q, σ, steps, order, the peer's ε_α, the exact ε_α or None)
RDP_VECTORS = [
    # dp_accounting test_compute_rdp_poisson_subsampled_gaussian (rtol 1e-4 there). At α = 1.5
    # its value is 3% above the integral, which TF Privacy's older test has (6.5007e-4).
    ("dpa", 0.01, 2.5, 50, 1.5, 6.70579741e-04, 50 * 1.3001417943760795e-5),
    ("dpa", 0.01, 2.5, 50, 2.5, 1.08548710e-03, 50 * 2.1708361138362486e-5),
    ("dpa", 0.01, 2.5, 50, 5.0, 2.18075656e-03, 50 * 4.3615131246157617e-5),
    ("dpa", 0.01, 2.5, 50, 50.0, 2.38460375e-02, 50 * 4.7692075077412338e-4),
    ("dpa", 0.01, 2.5, 50, 100.0, 1.67416308e02, 50 * 3.3483261509683651),
    # TF Privacy test_compute_rdp_sequence (5 significant digits).
    ("tfp", 0.01, 2.5, 50, 1.5, 6.5007e-04, 50 * 1.3001417943760795e-5),
    ("tfp", 0.01, 2.5, 50, 2.5, 1.0854e-03, 50 * 2.1708361138362486e-5),
    ("tfp", 0.01, 2.5, 50, 5.0, 2.1808e-03, 50 * 4.3615131246157617e-5),
    ("tfp", 0.01, 2.5, 50, 50.0, 2.3846e-02, 50 * 4.7692075077412338e-4),
    ("tfp", 0.01, 2.5, 50, 100.0, 1.6742e02, 50 * 3.3483261509683651),
    # TF Privacy test_compute_rdp_scalar and test_compute_rdp_no_sampling.
    ("tfp", 0.1, 2.0, 10, 5.0, 0.07737, 10 * 0.0077369684897958652),
    ("tfp", 1.0, 10.0, 1, 20.0, 0.1, 0.1),
    # dp_accounting test_compute_log_a_equals_mp: ε_α = log(A_α)/(α - 1), the integral's value
    # serving as both the peer's (its test's reference) and the exact one.
    ("dpa-mp", 1e-7, 0.1, 1, 1.01, 4.003412322526395e-6, 4.003412322526395e-6),
    ("dpa-mp", 1e-6, 0.1, 1, 256.0, 12786.130310969258, 12786.130310969258),
    ("dpa-mp", 1e-5, 0.1, 1, 256.1, 12793.441943506159, 12793.441943506159),
    ("dpa-mp", 1e-6, 1.0, 1, 27.0, 3.3728889634032684e-11, 3.3728889634032684e-11),
    ("dpa-mp", 1e-4, 1.0, 1, 1.5, 1.2885373907673299e-8, 1.2885373907673299e-8),
    ("dpa-mp", 1e-3, 1.0, 1, 2.0, 1.7182803522145154e-6, 1.7182803522145154e-6),
    ("dpa-mp", 0.01, 10.0, 1, 20.0, 1.0068263112022612e-5, 1.0068263112022612e-5),
    ("dpa-mp", 0.1, 100.0, 1, 20.5, 1.0252214593881178e-5, 1.0252214593881178e-5),
    ("dpa-mp", 0.99, 0.1, 1, 256.0, 12799.989910251063, 12799.989910251063),
    ("dpa-mp", 0.999, 100.0, 1, 256.1, 0.012779725746660574, 0.012779725746660574),
    # dp_accounting test_log_a_frac_positive's neighbourhood (q = 0.4, σ = 12, α ≈ 59).
    ("dpa-mp", 0.4, 12.0, 1, 58.7, 0.036167929195858275, 0.036167929195858275),
]


@pytest.mark.parametrize(("src", "q", "sigma", "steps", "order", "peer", "exact"), RDP_VECTORS)
def test_subsampled_gaussian_rdp_vectors(
    src: str, q: float, sigma: float, steps: int, order: float, peer: float, exact: float
) -> None:
    # Fractional orders used to give ∞ (integer orders only); 1.01 … 256.1 are all evaluated now.
    got = float(rdp_curve(_sgm(q, sigma, steps), np.array([order]))[0])
    assert got <= peer * (1 + TOL), src
    assert got >= exact * (1 - 1e-12)  # an upper bound on the exact divergence
    assert got <= exact * (1 + 1e-4)  # and a tight one


def test_plain_rdp_vectors() -> None:
    # dp_accounting test_compute_rdp_gaussian / test_discrete_gaussian_rdp /
    # test_compute_rdp_exponential_mechanism (ε = 1: 1.0 at α = 1000, 0.123301561 at α = 1).
    a = np.array([3.14159])
    gauss = rdp_curve(GaussianEvent(sigma=2.71828), a)[0]
    assert gauss == pytest.approx(3.14159 / (2 * 2.71828**2))
    dg = DiscreteGaussianEvent(sigma=5.0, sensitivity=2.0)
    assert rdp_curve(dg, a)[0] == pytest.approx(3.14159 * 4 / 50)
    em = rdp_curve(ExponentialEvent(epsilon=1.0), np.array([1000.0, 1 + 1e-9]))
    assert em[0] <= 1.0
    assert 0.123301561 * (1 - 1e-6) <= em[1] <= 0.123301561 * (1 + TOL)


# (source, event, δ, the peer's ε) for method="rdp"
EPS_VECTORS = [
    # TF Privacy test_compute_dp_sgd_privacy: (n, batch, σ, epochs, δ) -> q = batch/n, steps =
    # ceil(epochs·n/batch).
    ("tfp Test0", _sgm(150 / 60000, 1.3, 6000), 1e-5, 0.7242234026109595),
    ("tfp Test1", _sgm(100 / 100000, 1.0, 30000), 1e-7, 1.4154988495444842),
    ("tfp Test2", _sgm(1024 / 100000000, 0.1, 976563), 1e-7, 5907982.3113984),
    # TF Privacy test_compute_dp_sgd_example_privacy (1.2 epochs, σ = 0.7, microbatching halves
    # σ; with q = 0.01: ceil(1.2/0.01) = 120 steps, without: 2), RDP accountant.
    ("tfp example", SelfComposedEvent(GaussianEvent(sigma=0.7), count=2), 1e-5, 10.8602036),
    ("tfp example", SelfComposedEvent(GaussianEvent(sigma=0.35), count=2), 1e-5, 26.2880374),
    ("tfp example", _sgm(0.01, 0.7, 120), 1e-5, 3.2392676),
    ("tfp example", _sgm(0.01, 0.35, 120), 1e-5, 22.6248601),
    # TF Privacy privacy statement (σ = 2 halved, 5 epochs of 10,000 at batch 64), δ = 1e-6.
    ("tfp statement", SelfComposedEvent(GaussianEvent(sigma=1.0), count=5), 1e-6, 13.376),
    ("tfp statement", _sgm(64 / 10000, 1.0, 782), 1e-6, 1.616),
    # Opacus test_rdp_accountant: σ = 1.5, q = 0.04, 2250 steps.
    ("opacus", _sgm(0.04, 1.5, 2250), 1e-5, 7.32911117143),
    # dp_accounting test_compute_epsilon_delta_gaussian: σ chosen for exactly (1, 1e-6).
    ("dpa", GaussianEvent(sigma=4.530877117), 1e-6, 1.0),
    # dp_accounting test_laplace: ε·count at δ = 1e-10 (its order 1e10 stands for pure DP).
    ("dpa laplace", LaplaceEvent(scale=1 / 0.01), 1e-10, 0.01),
    ("dpa laplace", LaplaceEvent(scale=1.0), 1e-10, 1.0),
    ("dpa laplace", LaplaceEvent(scale=1 / 100), 1e-10, 100.0),
    ("dpa laplace", SelfComposedEvent(LaplaceEvent(scale=1.0), count=100), 1e-10, 100.0),
]


@pytest.mark.parametrize(("src", "event", "delta", "peer"), EPS_VECTORS)
def test_rdp_epsilon_vectors(src: str, event: object, delta: float, peer: float) -> None:
    got = compose(event, method="rdp").epsilon(delta)  # type: ignore[arg-type]
    assert got <= peer * (1 + TOL), (src, got, peer)


# (source, event, δ, the peer's ε) compared with dpkit's best answer, method="auto"
AUTO_VECTORS = [
    # TF Privacy test_compute_dp_sgd_example_privacy, PLD accountant.
    ("tfp example pld", SelfComposedEvent(GaussianEvent(sigma=0.7), count=2), 1e-5, 10.1224946),
    ("tfp example pld", SelfComposedEvent(GaussianEvent(sigma=0.35), count=2), 1e-5, 24.7160779),
    ("tfp example pld", _sgm(0.01, 0.7, 120), 1e-5, 2.4612381),
    ("tfp example pld", _sgm(0.01, 0.35, 120), 1e-5, 18.6977407),
    ("tfp statement pld", SelfComposedEvent(GaussianEvent(sigma=1.0), count=5), 1e-6, 12.595),
    ("tfp statement pld", _sgm(64 / 10000, 1.0, 782), 1e-6, 1.199),
    # Opacus test_prv_accountant.
    ("opacus prv", _sgm(0.04, 1.5, 2250), 1e-5, 6.777395712150674),
]


@pytest.mark.parametrize(("src", "event", "delta", "peer"), AUTO_VECTORS)
def test_auto_epsilon_vectors(src: str, event: object, delta: float, peer: float) -> None:
    got = compose(event, method="auto").epsilon(delta)  # type: ignore[arg-type]
    assert got <= peer * (1 + TOL), (src, got, peer)


@pytest.mark.parametrize(
    ("steps", "peer"),
    [
        (2250, 1.416),  # Opacus test_get_noise_multiplier_rdp_epochs (90 epochs at q = 0.04)
        (2000, 1.3562),  # Opacus test_get_noise_multiplier_rdp_steps
    ],
)
def test_noise_multiplier_vectors(steps: int, peer: float) -> None:
    nm = dpsgd_noise_multiplier(
        epsilon=8.0, delta=1e-5, sample_rate=0.04, steps=steps, method="rdp"
    )
    assert nm <= peer * (1 + TOL)


def test_conversion_vectors() -> None:
    # dp_accounting test_compute_epsilon_delta_pure_dp / TF Privacy
    # test_get_privacy_spent_check_target_delta: a constant curve 1.1 gives ε = 1.32783806176 at
    # δ = 1e-5 from orders 2 … 32 (and δ = 1e-5 back); more orders can only do better.
    flat = np.full(ORDERS.shape, 1.1)
    assert rdp_epsilon(flat, 1e-5) <= 1.32783806176 * (1 + TOL)
    assert rdp_delta(flat, 1.32783806176) <= 1e-5 * (1 + TOL)
    # The Gaussian with σ = 4.530877117 is exactly (1, 1e-6)-DP (dp_accounting, TF Privacy):
    # RDP cannot beat the exact curve and is within 0.1% of it.
    c = compose(GaussianEvent(sigma=4.530877117), method="rdp")
    exact = gaussian_epsilon(1e-6, 1 / 4.530877117)
    assert exact <= c.epsilon(1e-6) <= 1.0 * (1 + TOL)
    assert gaussian_delta(1.0, 1 / 4.530877117) <= c.delta(1.0) <= 1e-6 * (1 + TOL)
    # TF Privacy test_check_composition: two DP-SGD phases, ε(1e-5) ≤ 8.509656.
    both = [_sgm(1e-4, 0.4, 40000), _sgm(0.1, 2.0, 100)]
    assert compose(both, method="rdp").epsilon(1e-5) <= 8.509656


def test_gaussian_rdp_delta_is_sound_and_below_the_classic_bound() -> None:
    # dp_accounting test_delta_bounds_gaussian / TF Privacy test_get_privacy_spent_gaussian:
    # σ = 1, ε = 0, 0.1, …, 49.9: δ from RDP is at least the exact δ (Balle & Wang 2018) and at
    # most exp(-(ε - 1/2)²/2) for ε ≥ 1/2.
    c = compose(GaussianEvent(sigma=1.0), method="rdp")
    for eps in np.arange(500) * 0.1:
        d = c.delta(float(eps))
        assert gaussian_delta(float(eps), 1.0) <= d + 1e-300
        if eps >= 0.5:
            assert d <= math.exp(-0.5 * (eps - 0.5) ** 2) + 1e-300


# dp_accounting 0.6.0 RdpAccountant (default orders) on one Poisson-subsampled Gaussian step:
# (q, σ, δ, its ε) and (q, σ, ε, its δ); it uses the bound δ(0) ≤ sqrt(1 - e^{-KL}).
BOUNDARY_EPS = [(0.8, 1.0, 0.5, 0.0), (0.8, 0.35, 0.5, 4.625722207865843)]
BOUNDARY_DELTA = [(0.8, 0.35, 0.0, 0.9965804069875542), (0.8, 1.0, 0.0, 0.48493389556021205)]


@pytest.mark.parametrize(("q", "sigma", "delta", "peer"), BOUNDARY_EPS)
def test_large_delta_vectors(q: float, sigma: float, delta: float, peer: float) -> None:
    got = compose(_sgm(q, sigma), method="rdp").epsilon(delta)
    assert got <= peer * (1 + TOL)


@pytest.mark.parametrize(("q", "sigma", "eps", "peer"), BOUNDARY_DELTA)
def test_delta_at_zero_vectors(q: float, sigma: float, eps: float, peer: float) -> None:
    # δ(0) used to be 1 (vacuous): Theorem 21 alone says nothing at ε = 0.
    got = compose(_sgm(q, sigma), method="rdp").delta(eps)
    assert got <= peer * (1 + TOL)
    # δ(0) is the total variation distance; the PLD computes it (pessimistically) too.
    assert got >= compose(_sgm(q, sigma), method="pld").delta(eps) * (1 - 1e-2)


def test_rdp_is_never_below_the_pld_or_the_exact_curve() -> None:
    # Soundness: an RDP bound cannot beat the exact ε of a Gaussian (Balle & Wang 2018), nor (in
    # practice) the much tighter PLD of a subsampled one; the search between orders only picks
    # among valid bounds.
    for sigma, k in [(0.5, 1), (2.0, 10), (20.0, 400)]:
        exact = gaussian_epsilon(1e-6, math.sqrt(k) / sigma)
        got = compose(SelfComposedEvent(GaussianEvent(sigma=sigma), count=k), method="rdp")
        assert exact <= got.epsilon(1e-6)
    for q, sigma, steps in [(0.01, 0.35, 120), (0.001, 0.8, 5000), (0.04, 1.5, 2250)]:
        c = compose(_sgm(q, sigma, steps), method="auto")
        assert c.methods["pld"].epsilon(1e-5) <= c.methods["rdp"].epsilon(1e-5)


def test_zcdp_and_rdp_agree_on_a_gaussian() -> None:
    # The plain Gaussian's RDP curve is a line; the search finds the same optimum as the
    # zCDP conversion (Canonne, Kamath & Steinke 2020), not the grid's nearest order (+0.3-0.5%).
    for sigma, delta in [(4.530877117, 1e-6), (1.0, 1e-5), (10.0, 1e-9)]:
        rho = 1 / (2 * sigma**2)
        z = compose(ZCDPEvent(rho=rho), method="zcdp").epsilon(delta)
        r = compose(GaussianEvent(sigma=sigma), method="rdp").epsilon(delta)
        assert r == pytest.approx(z, rel=1e-7)


def test_approx_dp_event_at_its_own_delta_is_finite() -> None:
    # ε = ∞ was returned at δ equal to the event's own δ by the PLD: an ulp of mass left by
    # splitting an atom on the grid was moved to +∞, putting the +∞ mass above δ.
    for d0 in [2.801570730621626e-08, 1e-5, 0.3, 3.3e-9]:
        got = compose(ApproxDPEvent(epsilon=1.0, delta=d0), method="pld").epsilon(d0)
        assert 1.0 <= got <= 1.0 + 1e-3


def test_curves_of_different_events_still_add_on_the_grid() -> None:
    # Composition adds each event's curve on ORDERS (adaptive composition, Mironov 2017); the
    # search between orders evaluates the same sum, so it never answers above the grid's answer.
    events = [
        _sgm(0.01, 1.0, 300),
        SelfComposedEvent(LaplaceEvent(scale=20.0), count=5),
        ExponentialEvent(epsilon=0.1),
        PoissonSubsampledEvent(LaplaceEvent(scale=2.0), sampling_rate=0.05),
    ]
    c = compose(events, method="rdp").methods["rdp"]
    total = sum(rdp_curve(e) for e in events)
    np.testing.assert_allclose(c.curve, total, rtol=1e-12)  # type: ignore[attr-defined]
    for delta in (1e-3, 1e-6, 1e-9):
        assert c.epsilon(delta) <= rdp_epsilon(np.asarray(total), delta)
        parts = sum(compose(e, method="rdp").epsilon(delta / 4) for e in events)
        assert c.epsilon(delta) <= parts  # tighter than splitting δ over the events
