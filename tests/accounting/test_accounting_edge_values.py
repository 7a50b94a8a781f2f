"""Edge parameters give a correct value or a dpkit error, never a bare Python/SciPy exception."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import dpkit.accounting as acc
from dpkit.errors import DPKitError, PrivacyParameterError

ALMOST_ONE = 1.0 - 2.0**-53
EDGES = [5e-324, 1e-300, 1e-16, 1e-5, 0.5, 1.0, 3.0, 1e16, 1e300]
DELTAS = [5e-324, 1e-300, 1e-5, 0.5, ALMOST_ONE]


def test_group_privacy_of_a_large_group_is_a_dpkit_error_not_overflow() -> None:
    with pytest.raises(PrivacyParameterError):
        acc.group_privacy(acc.ApproxDP(epsilon=1.0, delta=1e-300), 1000)  # e^999 overflowed
    with pytest.raises(PrivacyParameterError):
        acc.group_privacy(acc.PureDP(epsilon=1.0), 10**400)  # int too large for a float
    with pytest.raises(PrivacyParameterError):
        acc.group_privacy(acc.ZCDP(rho=1e300), 10**200)
    with pytest.raises(PrivacyParameterError):
        acc.group_privacy(acc.PureDP(epsilon=1e300), 10**10)  # kε = inf


def test_group_privacy_in_log_space_matches_the_formula() -> None:
    # (ε, δ)-DP ⇒ (kε, k e^{(k-1)ε} δ)-DP; here e^{(k-1)ε} = e^{700} alone is near overflow.
    g = acc.group_privacy(acc.ApproxDP(epsilon=1.0, delta=1e-310), 701)
    assert isinstance(g, acc.ApproxDP)
    assert g.epsilon == 701.0
    expected = math.exp(math.log(701) + 700.0 + math.log(1e-310))
    assert g.delta == pytest.approx(expected, rel=1e-12)
    pure = acc.group_privacy(acc.ApproxDP(epsilon=1.0, delta=0.0), 10**6)
    assert pure.delta == 0.0


def test_gaussian_with_tiny_sigma_has_infinite_epsilon() -> None:
    # μ = Δ/σ = 1e300: the exact ε ≈ μ²/2 is beyond the float range, so ∞ is the correct value
    # (the root finder used to raise "The function value at x=inf is NaN").
    assert acc.epsilon_of(acc.GaussianEvent(sigma=1e-300), delta=1e-5) == math.inf
    assert acc.gaussian_epsilon(1e-5, 1e300) == math.inf
    assert acc.delta_of(acc.GaussianEvent(sigma=1e-300), epsilon=1.0) == 1.0


def test_delta_next_to_one_is_not_a_math_domain_error() -> None:
    # Laplace(b=1) twice: TV distance < 1 − 2⁻⁵³, so (0, δ)-DP holds and 0 is correct.
    assert acc.epsilon_of([acc.LaplaceEvent(scale=1.0)] * 2, delta=ALMOST_ONE) == 0.0
    assert acc.zcdp_epsilon(1.0, ALMOST_ONE) >= 0.0
    a = acc.Accountant(acc.ApproxDP(epsilon=1.0, delta=ALMOST_ONE), method="zcdp")
    a.charge(acc.GaussianEvent(sigma=10.0))


def test_zcdp_conversions_at_extreme_rho() -> None:
    assert acc.ZCDP(rho=1e300).to_approx(delta=1e-5).epsilon >= 1e300
    tiny = acc.ZCDP(rho=1e-300).to_approx(delta=1e-5).epsilon
    assert 0.0 < tiny < 1e-140  # ρ + 2√(ρ log(1/δ)) ≈ 6.8e-150 bounds it from above
    assert acc.zcdp_delta(1e300, 1.0) == 1.0
    assert acc.zcdp_delta(5e-324, 1e300) == 0.0


def _events(x: float, y: float) -> list[acc.Event]:
    return [
        acc.LaplaceEvent(scale=x),
        acc.GaussianEvent(sigma=x),
        acc.DiscreteGaussianEvent(sigma=x),
        acc.PoissonSubsampledEvent(acc.GaussianEvent(sigma=x), sampling_rate=min(y, 1.0)),
        acc.SelfComposedEvent(acc.LaplaceEvent(scale=x), count=3),
        acc.SelfComposedEvent(acc.GaussianEvent(sigma=x), count=10),
    ]


def _call(fn: Callable[[], Any]) -> Any:
    """Run ``fn``; a dpkit error is an acceptable answer, any other exception fails the test."""
    try:
        return fn()
    except DPKitError:
        return None


def _check_number(v: Any, *, upper: float = math.inf) -> None:
    if v is None:
        return
    assert not math.isnan(v)
    assert 0.0 <= v <= upper


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(
    x=hs.sampled_from(EDGES),
    y=hs.sampled_from(EDGES),
    d=hs.sampled_from(DELTAS),
    which=hs.integers(0, 5),
)
def test_accounting_sweep_raises_only_dpkit_errors(
    x: float, y: float, d: float, which: int
) -> None:
    event = _call(lambda: _events(x, y)[which])
    if event is None:
        return
    _check_number(_call(lambda: acc.epsilon_of(event, delta=d)))
    _check_number(_call(lambda: acc.delta_of(event, epsilon=y)), upper=1.0)
    _check_number(_call(lambda: acc.zcdp_epsilon(x, d)))
    _check_number(_call(lambda: acc.zcdp_delta(x, y)), upper=1.0)
    _check_number(_call(lambda: acc.gaussian_epsilon(d, x)))
    _check_number(_call(lambda: acc.gaussian_delta(y, x)), upper=1.0)
    _check_number(_call(lambda: acc.gaussian_sigma(epsilon=y, delta=d, sensitivity=x)))
    for g in (
        _call(lambda: acc.PureDP(epsilon=x)),
        _call(lambda: acc.ApproxDP(epsilon=x, delta=min(d, 0.5))),
        _call(lambda: acc.ZCDP(rho=x)),
    ):
        if g is not None:
            _call(lambda g=g: acc.group_privacy(g, int(min(y, 1e6)) + 1))
    budget = _call(lambda: acc.ApproxDP(epsilon=y, delta=d))
    if budget is not None:
        for method in ("basic", "zcdp"):
            a = _call(lambda method=method: acc.Accountant(budget, method=method))
            if a is not None:
                _call(lambda a=a: a.charge(event))
                assert not math.isnan(a.spent.epsilon)  # type: ignore[attr-defined]
