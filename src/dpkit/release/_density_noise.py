"""Exact integer noise for the density releases, and the record count they may need.

Each density statistic is a vector of exact integer sums of per-record integers (fixed point at a
data-independent precision, clipped so that one record's contribution is bounded by
construction). Noise is exact discrete Laplace (ε-DP, ℓ1 sensitivity) or discrete Gaussian
((ε, δ)-DP through zCDP, ℓ2 sensitivity) on those integers (Canonne, Kamath and Steinke 2020), so
the guarantee does not depend on floating-point rounding (Mironov 2012; Casacuberta et al. 2022).

When the release needs the number of records (a bin count ∝ n^{d/(2+d)}, a normaliser 1/n) and n
is not public, a share of ε buys a noisy count first; both are charged together, up front.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dpkit.accounting import (
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    calibrate,
    gaussian_sigma,
)
from dpkit.errors import PrivacyParameterError
from dpkit.noise import discrete_gaussian, discrete_laplace, sampled_sigma

__all__ = [
    "IntArray",
    "IntegerNoise",
    "NoisyCount",
    "fixed_point_bits",
    "integer_noise",
    "split_count",
    "total_event",
]

IntArray = npt.NDArray[np.int64]

SLACK = 1.0 - 2.0**-40  # ε is shaved by 2^-40 so that float rounding of events stays below it
NOISE_BITS = 20  # the noise scale is about 2^20 integer units: rounding costs a relative 2^-20
MAX_BITS = 40  # finest fixed point: 2^-40 of a unit value, far below any useful noise


@dataclass(frozen=True)
class IntegerNoise:
    """Calibrated exact noise on an integer vector: its kind, scale (integer units) and event."""

    kind: str  # "laplace" (b) or "gaussian" (σ)
    scale: Fraction
    event: Event
    l1: int
    l2: float

    def draw(self, size: int, gen: np.random.Generator) -> IntArray:
        """Integer noise for ``size`` coordinates (call only after the event was charged)."""
        if self.kind == "laplace":
            z = discrete_laplace(self.scale, size=size, rng=gen)
        else:
            z = discrete_gaussian(self.scale, size=size, rng=gen)
        return np.asarray(z, dtype=np.int64)

    @property
    def sd(self) -> float:
        """Standard deviation of one coordinate's noise, in integer units (an upper bound)."""
        if self.kind == "gaussian":
            return float(self.scale)
        p = math.exp(-1.0 / float(self.scale))
        return math.sqrt(2.0 * p) / (1.0 - p)


def fixed_point_bits(real_sensitivity: float, epsilon: float, delta: float) -> int:
    """Bits P so that noise for a query of this real sensitivity is about 2^20 units of 2^-P.

    The precision depends only on public quantities, so it reveals nothing. Per-record values are
    then stored as ``rint(v · 2^P)``: the rounding is 2^-20 of the noise scale.
    """
    if delta == 0.0:
        scale = real_sensitivity / epsilon
    else:
        scale = float(gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=real_sensitivity))
    # never below 0: a coarser fixed point would only add rounding that the noise dwarfs anyway;
    # never above MAX_BITS: per-record values stay below 2^(MAX_BITS+2), so a block of 2^12 of
    # them sums exactly in int64, and rint(v · 2^P) is exact in float64 (P ≤ 52)
    return min(MAX_BITS, max(0, NOISE_BITS - math.frexp(scale)[1] + 1))


def integer_noise(
    *, l1: int, l2: float, dimension: int, epsilon: float, delta: float
) -> IntegerNoise:
    """Noise for an integer vector query with ℓ1 sensitivity ``l1`` and ℓ2 sensitivity ``l2``.

    δ = 0: discrete Laplace of scale ``l1/ε`` per coordinate, ε-DP (the geometric mechanism).
    δ > 0: discrete Gaussian with the smallest σ (to 1e-6) whose zCDP bound ρ = Δ₂²/(2σ²)
    (Canonne, Kamath and Steinke 2020, Thm 14) gives (ε, δ)-DP for the whole vector.
    """
    if delta == 0.0:
        scale = Fraction(int(l1)) / Fraction(epsilon * SLACK)
        return IntegerNoise(
            "laplace", scale, DiscreteLaplaceEvent(scale=float(scale), sensitivity=int(l1)), l1, l2
        )
    sigma = _gaussian_sigma(float(l2), int(dimension), float(epsilon), float(delta))
    # (no relation here: the density's release declares its own at the charge, stats.declared)
    event = DiscreteGaussianEvent(sigma=sigma, sensitivity=float(l2), dimension=int(dimension))
    return IntegerNoise("gaussian", Fraction(sigma), event, l1, l2)


@lru_cache(maxsize=256)
def _gaussian_sigma(l2: float, dimension: int, epsilon: float, delta: float) -> float:
    start = float(gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=l2))
    if start > 2.0**30 / 4:
        raise PrivacyParameterError(
            "internal: the integer noise scale is too large for the exact sampler."
        )

    def event(s: float) -> Event:
        return DiscreteGaussianEvent(sigma=sampled_sigma(s), sensitivity=l2, dimension=dimension)

    sigma = calibrate(
        event,
        epsilon=epsilon * SLACK,
        delta=delta,
        lower=start / 2,
        upper=start * 8,
        tolerance=1e-6,
    )
    return sampled_sigma(sigma)


@dataclass(frozen=True)
class NoisyCount:
    """How the number of records is obtained: public, exact under replace, or a noisy count."""

    public: int | None
    noise: IntegerNoise | None  # discrete Laplace on the count when n is private

    @property
    def event(self) -> Event | None:
        return None if self.noise is None else self.noise.event

    def value(self, size: int, gen: np.random.Generator) -> float:
        """n, or a noisy count clamped to at least 1 (post-processing).

        NaN when n is private and no count was bought (the release does not need n): the true
        size must never leave this function unless it is public.
        """
        if self.public is not None:
            return float(self.public)
        if self.noise is None:
            return math.nan
        return float(max(size + int(self.noise.draw(1, gen)[0]), 1))


def split_count(
    *, epsilon: float, public_n: int | None, replace: bool, needs_n: bool, fraction: float
) -> tuple[NoisyCount, float]:
    """Decide how n is known and what ε is left for the density itself.

    Under replace-one neighbours n is public by definition (neighbours have the same size). Under
    add/remove with no public n, ``fraction`` of ε buys a discrete Laplace count (sensitivity 1).
    """
    if public_n is not None or replace or not needs_n:
        return NoisyCount(public_n, None), epsilon
    if not 0.0 < fraction < 1.0:
        raise PrivacyParameterError(f"count_fraction must be in (0, 1), got {fraction!r}.")
    eps_n = epsilon * fraction
    noise = integer_noise(l1=1, l2=1.0, dimension=1, epsilon=eps_n, delta=0.0)
    return NoisyCount(None, noise), epsilon - eps_n


def total_event(count: NoisyCount, main: Event) -> Event:
    """The one event charged for a release: the count's (if any) composed with the density's."""
    if count.event is None:
        return main
    return ComposedEvent(events=(count.event, main))
