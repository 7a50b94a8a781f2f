"""Exact Gaussian privacy curve and analytic calibration (Balle & Wang 2018)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import gaussian_delta, gaussian_epsilon, gaussian_sigma
from dpkit.errors import PrivacyParameterError

# σ for (ε, δ=1e-5), Δ=1, by the analytic Gaussian mechanism, as computed by Google's
# dp_accounting 0.6.0 `gaussian_mechanism.get_sigma_gaussian(ε, 1e-5)` (an independent
# implementation of Balle & Wang 2018, Algorithm 1). DESIGN.md quotes ~3.73 for ε = 1.
SIGMAS = [
    (0.01, 243.78543767567854),
    (0.1, 30.749566131977282),
    (1.0, 3.7306316348159374),
    (10.0, 0.4998886197090323),
    (100.0, 0.0946699070147445),
]


@pytest.mark.parametrize(("epsilon", "sigma"), SIGMAS)
def test_analytic_sigma_matches_published(epsilon: float, sigma: float) -> None:
    got = gaussian_sigma(epsilon=epsilon, delta=1e-5)
    assert got == pytest.approx(sigma, rel=1e-9)
    # and the σ returned really meets the target (rounded up, never down)
    assert gaussian_delta(epsilon, 1 / got) <= 1e-5


def test_gaussian_epsilon_published() -> None:
    # dp_accounting 0.6.0 `get_epsilon_gaussian(1.0, 1e-5)` = 4.377178095681137.
    assert gaussian_epsilon(1e-5, 1.0) == pytest.approx(4.377178095681137, rel=1e-9)
    assert gaussian_epsilon(1e-5, 1.0) >= 4.377178095681137 * (1 - 1e-12)


def test_delta_formula_direct() -> None:
    # Balle & Wang (2018) Theorem 8 evaluated directly with the normal CDF, Δ = σ = ε = 1:
    # Φ(1/2 - 1) - e Φ(-1/2 - 1).
    phi = lambda x: 0.5 * math.erfc(-x / math.sqrt(2))  # noqa: E731
    assert gaussian_delta(1.0, 1.0) == pytest.approx(phi(-0.5) - math.e * phi(-1.5), rel=1e-12)


def test_classic_only_for_small_epsilon() -> None:
    # Dwork & Roth (2014), Theorem A.1: σ = √(2 ln(1.25/δ))/ε, proved for ε ≤ 1.
    assert gaussian_sigma(epsilon=0.5, delta=1e-5, method="classic") == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) / 0.5
    )
    with pytest.raises(PrivacyParameterError, match="analytic"):
        gaussian_sigma(epsilon=2.0, delta=1e-5, method="classic")
    # the analytic σ is never larger than the classic one
    assert gaussian_sigma(epsilon=0.5, delta=1e-5) < gaussian_sigma(
        epsilon=0.5, delta=1e-5, method="classic"
    )


@settings(max_examples=60, deadline=None)
@given(
    st.floats(0.01, 50.0),
    st.floats(1e-12, 0.1),
    st.floats(0.1, 10.0),
)
def test_sigma_round_trip(epsilon: float, delta: float, sens: float) -> None:
    sigma = gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sens)
    eps_back = gaussian_epsilon(delta, sens / sigma)
    assert eps_back <= epsilon * (1 + 1e-12)  # both sides are rounded up by a few ulps
    assert eps_back == pytest.approx(epsilon, rel=1e-6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0, "delta": 1e-5},
        {"epsilon": -1.0, "delta": 1e-5},
        {"epsilon": math.inf, "delta": 1e-5},
        {"epsilon": math.nan, "delta": 1e-5},
        {"epsilon": 1.0, "delta": 0.0},
        {"epsilon": 1.0, "delta": 1.0},
        {"epsilon": 1.0, "delta": -0.1},
        {"epsilon": 1.0, "delta": 1e-5, "sensitivity": -1.0},
        {"epsilon": 1.0, "delta": 1e-5, "method": "nope"},
    ],
)
def test_bad_calibration_input(kwargs: dict[str, float]) -> None:
    with pytest.raises(PrivacyParameterError):
        gaussian_sigma(**kwargs)  # type: ignore[arg-type]
