"""Guarantees, events and conversions: validation and published conversion values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting import (
    ZCDP,
    ApproxDP,
    ApproxDPEvent,
    ComposedEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    PoissonSubsampledEvent,
    PureDP,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ZCDPEvent,
    group_privacy,
    zcdp_delta,
    zcdp_epsilon,
)
from dpkit.errors import PrivacyParameterError


def test_cks_conversion_matches_brute_force() -> None:
    # Canonne, Kamath & Steinke (2020) Corollary 13, minimised over a fine α grid here.
    for rho, delta in [(0.5, 1e-5), (0.05, 1e-6), (2.0, 1e-3)]:
        a = np.linspace(1.0001, 200, 400_000)
        brute = float(np.min(a * rho + np.log1p(-1 / a) - (math.log(delta) + np.log(a)) / (a - 1)))
        got = zcdp_epsilon(rho, delta)
        assert got <= brute + 1e-9
        assert got == pytest.approx(brute, rel=1e-6)
        # CKS is never worse than Bun–Steinke ρ + 2√(ρ log 1/δ)
        assert got <= rho + 2 * math.sqrt(rho * math.log(1 / delta))
        assert zcdp_delta(rho, got) <= delta * (1 + 1e-6)


def test_conversions() -> None:
    assert PureDP(epsilon=2.0).to_zcdp() == ZCDP(rho=2.0)  # ε²/2, Bun & Steinke Prop 1.4
    bs = ZCDP(rho=0.5).to_approx(1e-5, method="bun_steinke").epsilon
    assert bs == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e5)))
    assert ZCDP(rho=0.5).to_approx(1e-5).epsilon < bs
    assert PureDP(epsilon=1.0).implies(ApproxDP(epsilon=1.0, delta=0.0))
    assert not ApproxDP(epsilon=1.0, delta=1e-6).implies(PureDP(epsilon=5.0))
    assert ZCDP(rho=0.01).implies(ApproxDP(epsilon=1.0, delta=1e-6))


def test_group_privacy() -> None:
    assert group_privacy(PureDP(epsilon=0.5), 4) == PureDP(epsilon=2.0)
    g = group_privacy(ApproxDP(epsilon=0.1, delta=1e-8), 3)
    assert isinstance(g, ApproxDP)
    assert g.epsilon == pytest.approx(0.3)
    assert g.delta == pytest.approx(3 * math.exp(0.2) * 1e-8)
    assert group_privacy(ZCDP(rho=0.1), 3).rho == pytest.approx(0.9)  # type: ignore[attr-defined]
    with pytest.raises(PrivacyParameterError):
        group_privacy(PureDP(epsilon=1.0), 0)
    with pytest.raises(PrivacyParameterError, match="promises nothing"):
        group_privacy(ApproxDP(epsilon=5.0, delta=0.01), 10)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan, None, "1"])
def test_bad_epsilon(bad: object) -> None:
    with pytest.raises(PrivacyParameterError):
        PureDP(epsilon=bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        ApproxDP(epsilon=bad, delta=1e-6)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        RandomizedResponseEvent(epsilon=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1e-9, 1.0, 1.5, math.nan, math.inf])
def test_bad_delta(bad: float) -> None:
    with pytest.raises(PrivacyParameterError):
        ApproxDP(epsilon=1.0, delta=bad)
    with pytest.raises(PrivacyParameterError):
        ApproxDPEvent(epsilon=1.0, delta=bad)


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, math.nan])
def test_bad_sampling_rate(bad: float) -> None:
    with pytest.raises(PrivacyParameterError, match="sampling_rate"):
        PoissonSubsampledEvent(GaussianEvent(sigma=1.0), sampling_rate=bad)


def test_bad_event_parameters() -> None:
    with pytest.raises(PrivacyParameterError, match="sigma"):
        GaussianEvent(sigma=-1.0)
    with pytest.raises(PrivacyParameterError, match="scale"):
        LaplaceEvent(scale=0.0)
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        DiscreteLaplaceEvent(scale=1.0, sensitivity=1.5)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="rho"):
        ZCDPEvent(rho=math.inf)
    with pytest.raises(PrivacyParameterError, match="categories"):
        RandomizedResponseEvent(epsilon=1.0, categories=1)
    with pytest.raises(PrivacyParameterError, match="count"):
        SelfComposedEvent(GaussianEvent(sigma=1.0), count=0)
    with pytest.raises(PrivacyParameterError):
        ComposedEvent(events=[])
    with pytest.raises(PrivacyParameterError):
        ComposedEvent(events=[1.0])  # type: ignore[list-item]
    with pytest.raises(PrivacyParameterError, match="neighbouring"):
        PoissonSubsampledEvent(
            GaussianEvent(sigma=1.0),
            sampling_rate=0.1,
            neighbouring="replace",  # type: ignore[arg-type]
        )


def test_events_are_frozen_and_hashable() -> None:
    e = PoissonSubsampledEvent(GaussianEvent(sigma=1.0), sampling_rate=0.1)
    assert hash(e) == hash(PoissonSubsampledEvent(GaussianEvent(sigma=1.0), sampling_rate=0.1))
    with pytest.raises(AttributeError):
        e.sampling_rate = 0.5  # type: ignore[misc]
    assert e.neighbouring is Neighbouring.ADD_REMOVE


def test_all_is_sorted() -> None:
    import dpkit.accounting as acc

    # isort-style order (constants, classes, functions), as ruff's RUF022 keeps it
    def key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(acc.__all__) == sorted(acc.__all__, key=key)
    for name in acc.__all__:
        assert hasattr(acc, name)
