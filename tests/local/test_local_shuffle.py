"""Shuffle model: the clone bounds are valid (against exact shuffled randomized response),
ordered as published, and refuse bad parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from dpkit.errors import PrivacyParameterError
from dpkit.local import shuffle_delta, shuffle_epsilon, shuffle_guarantee


def _exact_shuffled_rr_delta(eps0: float, n: int, ones: int, eps: float) -> float:
    """Exact δ(ε) of n shuffled binary randomized-response reports (the count of 1s), for the
    neighbours (0, rest) and (1, rest) where `ones` of the other n − 1 users hold 1."""
    p = math.exp(eps0) / (1 + math.exp(eps0))
    rest = np.convolve(
        binom.pmf(np.arange(ones + 1), ones, p),
        binom.pmf(np.arange(n - ones), n - 1 - ones, 1 - p),
    )
    p0 = np.convolve(rest, [p, 1 - p])
    p1 = np.convolve(rest, [1 - p, p])
    e = math.exp(eps)
    return max(np.clip(p0 - e * p1, 0, None).sum(), np.clip(p1 - e * p0, 0, None).sum())


@pytest.mark.parametrize(("eps0", "n"), [(1.0, 40), (2.0, 60), (3.0, 200)])
def test_numerical_bound_dominates_exact_shuffled_randomized_response(eps0, n):
    for eps in np.linspace(0.05, eps0 * 0.9, 6):
        bound = shuffle_delta(epsilon0=eps0, n=n, epsilon=float(eps))
        worst = max(_exact_shuffled_rr_delta(eps0, n, m, float(eps)) for m in range(0, n, 7))
        assert worst <= bound * (1 + 1e-9) + 1e-15, (eps, worst, bound)
        assert bound < 1.0


@pytest.mark.parametrize("eps0", [1.0, 2.0, 3.0])
@pytest.mark.parametrize("n", [10_000, 100_000, 1_000_000])
def test_numerical_is_tighter_than_closed_form(eps0, n):
    num = shuffle_epsilon(epsilon0=eps0, n=n, delta=1e-6)
    cf = shuffle_epsilon(epsilon0=eps0, n=n, delta=1e-6, method="closed_form")
    assert 0 < num < cf < eps0
    # anchors: the numerical bound is about three times tighter (FMT 2021, Fig. 2)
    assert 2.0 < cf / num < 6.0
    assert shuffle_delta(epsilon0=eps0, n=n, epsilon=num) <= 1e-6


def test_closed_form_value():
    eps0, n, d = 2.0, 50_000, 1e-6
    e = math.exp(eps0)
    want = math.log(
        1 + (e - 1) / (e + 1) * (8 * math.sqrt(e * math.log(4 / d)) / math.sqrt(n) + 8 * e / n)
    )
    assert shuffle_epsilon(epsilon0=eps0, n=n, delta=d, method="closed_form") == want
    # outside its range (ε₀ > ln(n / (16 ln(2/δ)))) Thm 3.1 gives nothing: ε₀ stays
    assert shuffle_epsilon(epsilon0=8.0, n=50_000, delta=d, method="closed_form") == 8.0


def test_more_users_more_privacy():
    eps = [shuffle_epsilon(epsilon0=2.0, n=n, delta=1e-6) for n in (1_000, 10_000, 100_000)]
    assert eps[0] > eps[1] > eps[2]
    assert shuffle_epsilon(epsilon0=2.0, n=1, delta=1e-6) == pytest.approx(2.0, rel=1e-5)
    g = shuffle_guarantee(epsilon0=2.0, n=100_000, delta=1e-6)
    assert g.epsilon == pytest.approx(eps[2]) and g.delta == 1e-6
    assert shuffle_delta(epsilon0=1.0, n=100, epsilon=1.0) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon0": 0.0, "n": 10, "delta": 1e-6},
        {"epsilon0": 1.0, "n": 0, "delta": 1e-6},
        {"epsilon0": 1.0, "n": 10.5, "delta": 1e-6},
        {"epsilon0": 1.0, "n": 10, "delta": 0.0},
        {"epsilon0": 1.0, "n": 10, "delta": 1.0},
        {"epsilon0": math.inf, "n": 10, "delta": 1e-6},
        {"epsilon0": 1.0, "n": 10, "delta": 1e-6, "method": "magic"},
    ],
)
def test_bad_parameters(kwargs):
    with pytest.raises(PrivacyParameterError):
        shuffle_epsilon(**kwargs)
    with pytest.raises(PrivacyParameterError):
        shuffle_delta(epsilon0=1.0, n=10, epsilon=-1.0)
