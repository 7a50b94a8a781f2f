"""Closed-form per-event bounds: pure ε, zCDP ρ, and (ε, δ) of a single event.

These are the building blocks of basic and zCDP composition and of the accountants' filters.
``None`` means "no such bound for this event".
"""

from __future__ import annotations

import math

from dpkit.accounting._discrete_gaussian import discrete_gaussian_epsilon
from dpkit.accounting._events import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PermuteAndFlipEvent,
    PoissonSubsampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpkit.accounting._gaussian import gaussian_epsilon
from dpkit.accounting._guarantees import Neighbouring, zcdp_epsilon

__all__ = ["approx_bound", "is_scalar_integer", "pure_epsilon", "zcdp_rho"]

_PURE = (ExponentialEvent, ReportNoisyMaxEvent, PermuteAndFlipEvent, PureDPEvent)


def _up(x: float) -> float:
    # Float arithmetic on ε is rounded one ulp up so a bound is never below the exact value.
    return math.nextafter(x, math.inf)


def is_scalar_integer(event: DiscreteGaussianEvent) -> bool:
    """Whether a discrete Gaussian event has an exact curve (one coordinate, integer Δ)."""
    return event.dimension == 1 and float(event.sensitivity).is_integer()


def pure_epsilon(event: Event) -> float | None:
    """ε such that ``event`` is ε-DP, or None."""
    if isinstance(event, (*_PURE, RandomizedResponseEvent)):
        return event.epsilon
    if isinstance(event, LaplaceEvent | DiscreteLaplaceEvent):
        return _up(event.sensitivity / event.scale)
    if isinstance(event, ApproxDPEvent):
        return event.epsilon if event.delta == 0 else None
    if isinstance(event, ComposedEvent):
        total = 0.0
        for sub in event.events:
            e = pure_epsilon(sub)
            if e is None:
                return None
            total += e
        return _up(total)
    if isinstance(event, SelfComposedEvent):
        e = pure_epsilon(event.event)
        return None if e is None else _up(event.count * e)
    if isinstance(event, PoissonSubsampledEvent):
        e = pure_epsilon(event.event)
        if e is None:
            return None
        if event.neighbouring is Neighbouring.REPLACE:
            return e
        # Balle, Barthe & Gaboardi (2018), Theorem 8: log(1 + q(e^ε - 1)).
        return _up(math.log1p(event.sampling_rate * math.expm1(e)))
    if isinstance(event, SampledWithoutReplacementEvent):
        e = pure_epsilon(event.event)
        # Balle, Barthe & Gaboardi (2018), Theorem 10 (substitution): log(1 + γ(e^ε - 1)).
        return None if e is None else _up(math.log1p(event.sampling_rate * math.expm1(e)))
    return None


def zcdp_rho(event: Event) -> float | None:
    """ρ such that ``event`` is ρ-zCDP, or None."""
    if isinstance(event, GaussianEvent | DiscreteGaussianEvent):
        # Bun & Steinke (2016) Prop. 1.6; Canonne, Kamath & Steinke (2020) Thm 4 (discrete).
        ratio = event.sensitivity / event.sigma
        return math.inf if ratio > 1e150 else _up(ratio * ratio / 2)  # (ratio² would overflow)
    if isinstance(event, ZCDPEvent):
        return event.rho
    if isinstance(event, ExponentialEvent):
        return _up(event.epsilon**2 / 8)  # bounded range (Cesar & Rogers 2021)
    if isinstance(event, ComposedEvent):
        total = 0.0
        for sub in event.events:
            r = zcdp_rho(sub)
            if r is None:
                return None
            total += r
        return _up(total)
    if isinstance(event, SelfComposedEvent):
        r = zcdp_rho(event.event)
        return None if r is None else _up(event.count * r)
    if isinstance(event, PoissonSubsampledEvent):
        return None
    e = pure_epsilon(event)
    return None if e is None else _up(e * e / 2)  # Bun & Steinke (2016), Proposition 1.4


def approx_bound(event: Event, delta: float) -> tuple[float, float] | None:
    """An (ε, δ') guarantee of one event with δ' ≤ ``delta`` from closed forms, or None."""
    e = pure_epsilon(event)
    if e is not None:
        return e, 0.0
    if isinstance(event, ApproxDPEvent):
        return (event.epsilon, event.delta) if event.delta <= delta else None
    if isinstance(event, GaussianEvent):
        if delta <= 0:
            return None
        return gaussian_epsilon(delta, event.sensitivity / event.sigma), delta
    if isinstance(event, DiscreteGaussianEvent) and is_scalar_integer(event):
        if delta <= 0:
            return None
        eps = discrete_gaussian_epsilon(delta, event.sigma, int(event.sensitivity))
        return (eps, delta) if math.isfinite(eps) else None
    if isinstance(event, PoissonSubsampledEvent) and isinstance(event.event, ApproxDPEvent):
        inner = event.event
        q = event.sampling_rate
        if q * inner.delta > delta:
            return None
        if event.neighbouring is Neighbouring.REPLACE:
            return inner.epsilon, q * inner.delta
        return _up(math.log1p(q * math.expm1(inner.epsilon))), q * inner.delta
    if isinstance(event, SampledWithoutReplacementEvent) and isinstance(event.event, ApproxDPEvent):
        g, inner_ad = event.sampling_rate, event.event
        if g * inner_ad.delta > delta:
            return None
        # Balle, Barthe & Gaboardi (2018), Theorem 10: (log(1 + γ(e^ε − 1)), γδ)
        return _up(math.log1p(g * math.expm1(inner_ad.epsilon))), g * inner_ad.delta
    r = zcdp_rho(event)
    if r is not None and delta > 0:
        return zcdp_epsilon(r, delta), delta
    return None
