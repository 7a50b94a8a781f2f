"""The privacy events statistics charge, and the neighbouring relation, from dpkit.accounting."""

from __future__ import annotations

from fractions import Fraction
from typing import TypeVar, cast

from dpkit.accounting import (
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    ExponentialEvent,
    Neighbouring,
    epsilon_of,
    gaussian_sigma,
)
from dpkit.accounting._relation import holding_under
from dpkit.errors import PrivacyParameterError

_E = TypeVar("_E")

__all__ = [
    "Neighbouring",
    "composed",
    "declared",
    "discrete_gaussian_event",
    "discrete_laplace_event",
    "epsilon_for",
    "exponential_event",
    "is_replace",
    "relation",
    "sigma_for",
]


def relation(replace: bool) -> Neighbouring:
    """The relation a statistic's sensitivities were computed for (its ``replace`` flag).

    Every event a statistic charges declares it (:func:`declared`), so that an accountant refuses
    to compose a statistic computed under one relation with releases under the other.
    """
    return Neighbouring.REPLACE if replace else Neighbouring.ADD_REMOVE


def declared(event: _E, replace: bool) -> _E:
    """``event`` (or None) declaring :func:`relation`; only for the code that computed its
    sensitivities from the same ``replace`` (it relabels, it does not rescale)."""
    if event is None:
        return event
    return cast(_E, holding_under(cast(Event, event), relation(replace)))


def discrete_laplace_event(
    *, scale: Fraction, sensitivity: int, neighbouring: Neighbouring | None = None
) -> object:
    return DiscreteLaplaceEvent(
        scale=scale,  # type: ignore[arg-type]
        sensitivity=sensitivity,
        neighbouring=neighbouring,
    )


def discrete_gaussian_event(*, sigma: Fraction, sensitivity: int) -> object:
    """The event of exact discrete Gaussian noise of scale ``sigma`` on an integer sensitivity.

    ``sigma`` must be exactly the σ the sampler draws with (``dpkit.noise.sampled_sigma``): the
    discrete Gaussian's δ(ε) is not monotone in σ, so the event must not round it either way.
    """
    s = float(sigma)
    if Fraction(s) != sigma:
        raise PrivacyParameterError(f"internal: sigma {sigma} is not a sampled float value.")
    return DiscreteGaussianEvent(sigma=s, sensitivity=sensitivity)


def composed(events: tuple[object, ...]) -> object:
    """One event, a composition of several, or ``None`` when nothing noisy is released."""
    if not events:
        return None
    if len(events) == 1:
        return events[0]
    return ComposedEvent(events=events)  # type: ignore[arg-type]


def sigma_for(*, epsilon: float, delta: float) -> float:
    """σ of the Gaussian mechanism with sensitivity 1 that is (ε, δ)-DP (analytic calibration)."""
    return float(gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0))


def is_replace(neighbouring: object) -> bool:
    """True for replace-one neighbours, False for add/remove-one; anything else is refused."""
    if neighbouring is Neighbouring.REPLACE:
        return True
    if neighbouring is Neighbouring.ADD_REMOVE:
        return False
    raise PrivacyParameterError(
        f"neighbouring must be Neighbouring.ADD_REMOVE or Neighbouring.REPLACE, got "
        f"{neighbouring!r}."
    )


def exponential_event(*, epsilon: float, neighbouring: Neighbouring | None = None) -> object:
    return ExponentialEvent(epsilon=epsilon, neighbouring=neighbouring)


def epsilon_for(event: object, delta: float) -> float:
    """ε of an event at this δ, as the accountant computes it."""
    return float(epsilon_of(event, delta=delta))  # type: ignore[arg-type]
