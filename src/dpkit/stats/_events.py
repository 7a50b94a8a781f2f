"""The privacy events statistics charge, and the neighbouring relation, from dpkit.accounting."""

from __future__ import annotations

from fractions import Fraction

from dpkit.accounting import (
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExponentialEvent,
    Neighbouring,
    epsilon_of,
    gaussian_sigma,
)
from dpkit.errors import PrivacyParameterError

__all__ = [
    "Neighbouring",
    "composed",
    "discrete_gaussian_event",
    "discrete_laplace_event",
    "epsilon_for",
    "exponential_event",
    "is_replace",
    "sigma_for",
]


def discrete_laplace_event(*, scale: Fraction, sensitivity: int) -> object:
    return DiscreteLaplaceEvent(scale=scale, sensitivity=sensitivity)  # type: ignore[arg-type]


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


def exponential_event(*, epsilon: float) -> object:
    return ExponentialEvent(epsilon=epsilon)


def epsilon_for(event: object, delta: float) -> float:
    """ε of an event at this δ, as the accountant computes it."""
    return float(epsilon_of(event, delta=delta))  # type: ignore[arg-type]
