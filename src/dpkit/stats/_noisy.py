"""Calibrating and adding exact integer noise to a statistic made of several exact integer sums.

A statistic (a mean with unknown n, a variance, a correlation…) is computed from a few exact
fixed-point sums ("parts"). The privacy budget is split between the parts to minimise the error
of the final estimate, each part gets exact discrete Laplace (ε-DP) or discrete Gaussian
((ε, δ)-DP) noise on the integers, and the estimate is post-processing of the noisy parts.

Budget split
------------
For an estimate ``f(T_1, …, T_m)`` its noise variance is about ``Σ_j (w_j s_j)²`` with
``w_j = |∂f/∂T_j|`` and ``s_j`` the noise scale of part j.

* Laplace (δ = 0): part j spends ``ε_j`` with ``s_j = Δ_j/ε_j`` and ``Σ ε_j = ε``; minimising
  ``Σ w_j² Δ_j² / ε_j²`` gives ``ε_j ∝ (w_j Δ_j)^{2/3}``.
* Gaussian (δ > 0): the parts together are one Gaussian mechanism on the whitened vector
  ``(T_j/σ_j)``, of ℓ2 sensitivity ``(Σ Δ_j²/σ_j²)^{1/2}`` (the "Approximate Differential Privacy"
  notes, multivariate Gaussian). Fixing that to ``1/σ*`` with ``σ* = gaussian_sigma(ε, δ, 1)`` and
  minimising ``Σ w_j² σ_j²`` gives ``σ_j = σ* (Δ_j Σ_i w_i Δ_i / w_j)^{1/2}``.

The weights ``w_j`` depend on the data, which the split must not read; they are taken at a
documented reference point (see each statistic), so the split is data-independent.

Rounding to the output grid
---------------------------
A part's exact total ``T`` (integer multiple of ``2**e``) is rounded to a coarser grid
``2**(e + j)`` with ``j ≥ 0`` chosen from the noise (``dpkit.noise.laplace_grid`` /
``gaussian_grid``: about 2^-40 of min(Δ, b), never finer than 2^-51 of b, or 2^-24 of σ), by
``R = floor(T / 2**j + 1/2)``. For totals
differing by at most Δ, ``|R − R'| ≤ ceil(Δ / 2**j)``, an integer: the noise is calibrated to that
rounded sensitivity, so the guarantee is exact, not approximate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from dpkit.accounting._relation import holding_under
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._tails import discrete_gaussian_quantile, discrete_laplace_quantile
from dpkit.noise import gaussian_grid, laplace_grid, sampled_sigma
from dpkit.noise._discrete import (
    DGAUSS_MAX_NUMERATOR,
    DLAP_MAX_NUMERATOR,
    gaussian_rational,
    one_discrete_gaussian,
    one_discrete_laplace,
)
from dpkit.noise._scales import rational_at_least
from dpkit.random import RNGLike, as_generator
from dpkit.stats._events import (
    Neighbouring,
    composed,
    discrete_gaussian_event,
    discrete_laplace_event,
    epsilon_for,
    sigma_for,
)

__all__ = ["Part", "PartNoise", "Plan", "check_sampleable", "plan"]

_SLACK = 1.0 - 2.0**-40  # each ε_j is shaved so that float sums of the parts stay below ε


@dataclass(frozen=True)
class Part:
    """An exact integer statistic ``T · 2**exponent`` with integer sensitivity (same units).

    ``sensitivity=0`` marks a public part (the record count under replace-one neighbours): it is
    released exactly and costs nothing.
    """

    name: str
    exponent: int
    sensitivity: int
    weight: float = 1.0

    @property
    def real_sensitivity(self) -> float:
        return math.ldexp(float(self.sensitivity), self.exponent)


@dataclass(frozen=True)
class PartNoise:
    """How one part is noised: its output grid, rounded sensitivity and integer noise scale."""

    part: Part
    shift: int
    sensitivity: int
    kind: str  # "laplace", "gaussian" or "none"
    scale: Fraction  # b (laplace) or σ (gaussian), in output units

    @cached_property
    def unit(self) -> float:
        """The output grid spacing ``2**(exponent + shift)``."""
        return math.ldexp(1.0, self.part.exponent + self.shift)

    @cached_property
    def _float_scale(self) -> float:
        return float(self.scale)

    @cached_property
    def _rational(self) -> tuple[int, int]:
        """The exact sampler's ``(numerator, denominator)`` for this scale (checked once)."""
        if self.kind == "gaussian":
            return gaussian_rational(self.scale)
        return rational_at_least(self.scale, "scale", max_numerator=DLAP_MAX_NUMERATOR)

    @property
    def real_scale(self) -> float:
        return float(self.scale) * self.unit

    @property
    def sd(self) -> float:
        """Standard deviation of the noise, in real units (0 for a public part)."""
        if self.kind == "none":
            return 0.0
        if self.kind == "gaussian":
            return self.real_scale  # the discrete Gaussian's variance is at most σ² (CKS 2020)
        p = math.exp(-1.0 / float(self.scale))
        return math.sqrt(2.0 * p) / (1.0 - p) * self.unit

    def half_width(self, alpha: float) -> float:
        """An h with P(|released part − exact part| > h) ≤ alpha, in real units.

        From the integer noise actually drawn (the smallest such integer for discrete Laplace; a
        proven bound for the discrete Gaussian, see :mod:`dpkit.mechanisms`), plus half a grid
        step when the exact total was rounded to a coarser output grid.
        """
        rounding = 0.5 * self.unit if self.shift > 0 else 0.0
        if self.kind == "none":
            return rounding
        if self.kind == "gaussian":
            m = discrete_gaussian_quantile(self._float_scale, alpha)
        else:
            m = discrete_laplace_quantile(self._float_scale, alpha)
        return m * self.unit + rounding

    def simulate(self, size: int, gen: np.random.Generator) -> np.ndarray[Any, Any]:
        """Draws of the noise in real units (for error bars; not used to release anything)."""
        if self.kind == "none":
            return np.zeros(size)
        if self.kind == "gaussian":
            return gen.normal(0.0, self.real_scale, size)
        q = -math.expm1(-1.0 / float(self.scale))  # success probability of each geometric
        z = gen.geometric(q, size) - gen.geometric(q, size)
        return z.astype(np.float64) * self.unit

    @property
    def event(self) -> object:
        if self.kind == "gaussian":
            # The discrete Gaussian actually added, in output units with the rounded integer
            # sensitivity: accounted by its exact curve (CKS 2020, Thm 7), at any σ.
            return discrete_gaussian_event(sigma=self.scale, sensitivity=self.sensitivity)
        return discrete_laplace_event(scale=self.scale, sensitivity=self.sensitivity)

    def add_noise(self, total: int, gen: np.random.Generator) -> float:
        """Round the exact total to the output grid, add integer noise, return a float."""
        if self.shift > 0:
            total = (total + (1 << (self.shift - 1))) >> self.shift
        # (the scale's exact rational made once per part: the same draws as discrete_laplace
        # and discrete_gaussian make from it)
        if self.kind == "laplace":
            total += one_discrete_laplace(*self._rational, gen)
        elif self.kind == "gaussian":
            total += one_discrete_gaussian(*self._rational, gen)
        # Converting the noisy integer to a float is post-processing of the released integer.
        return math.ldexp(float(total), self.part.exponent + self.shift)


@dataclass(frozen=True)
class Plan:
    """Calibrated noise for every part of a statistic, and the event that pays for it."""

    parts: tuple[PartNoise, ...]
    event: object

    def draw(self, totals: Sequence[int], rng: RNGLike) -> tuple[float, ...]:
        """Release the parts (call only after the event has been charged)."""
        gen = as_generator(rng)
        return tuple(p.add_noise(int(t), gen) for p, t in zip(self.parts, totals, strict=True))


def _calibrated(part: Part, real_scale: float, kind: str, ratio: float) -> PartNoise:
    """Noise for ``part`` with scale/sensitivity ``ratio`` (1/ε_j for Laplace, σ_j/Δ_j Gaussian)."""
    if kind == "laplace":
        # From min(Δ, b) (not b alone, whose 2^-40 exceeds Δ when ε < 2^-40), but coarse enough
        # that the integer scale stays below the exact sampler's 2^52.
        fine = laplace_grid(min(real_scale, part.real_sensitivity))
        grid = max(fine, math.frexp(real_scale)[1] - 51)
    else:
        grid = gaussian_grid(real_scale)
    shift = max(0, grid - part.exponent)
    sens = -(-part.sensitivity >> shift)  # ceil(Δ / 2**shift)
    if kind == "laplace" and (sens << shift) > part.sensitivity + (part.sensitivity >> 6):
        raise PrivacyParameterError(
            f"epsilon is too small for the {part.name}: its noise scale would be more than 2^45 "
            "times its sensitivity, beyond what exact sampling represents; use a larger epsilon."
        )
    scale = Fraction(sens) * Fraction(ratio)
    if kind == "gaussian":
        # the σ the sampler really draws with, so that the event describes it exactly
        scale = Fraction(sampled_sigma(float(scale)))
    check_sampleable(kind, scale)
    return PartNoise(part, shift, sens, kind, scale)


def _declaring(event: object, neighbouring: Neighbouring | None) -> object:
    if event is None or neighbouring is None:
        return event
    return holding_under(event, neighbouring)  # type: ignore[arg-type]


def check_sampleable(kind: str, scale: Fraction) -> None:
    """Refuse, before anything is charged, an integer noise scale the exact samplers cannot use."""
    limit = DLAP_MAX_NUMERATOR if kind == "laplace" else DGAUSS_MAX_NUMERATOR
    rational_at_least(scale, "noise scale", max_numerator=limit)


def plan(
    parts: Sequence[Part],
    *,
    epsilon: float,
    delta: float,
    rho: float | None = None,
    neighbouring: Neighbouring | None = None,
) -> Plan:
    """Split (ε, δ) between the parts to minimise the estimate's noise variance, and calibrate.

    ``epsilon`` and ``delta`` must already be checked. Returns the plan and its composed event.
    With ``rho`` (checked) instead, the parts get discrete Gaussian noise whose zCDP costs add up
    to at most ρ (ε and δ are then ignored). The result is a pure function of the (frozen,
    hashable) parts and the budget, and is memoised: calibration reads no data, so this is not
    privacy state. ``neighbouring``: the relation the parts' sensitivities were computed for,
    which the plan's event declares (None: the caller's, undeclared).
    """
    if rho is not None:
        return _plan_rho(tuple(parts), float(rho), neighbouring)
    return _plan(tuple(parts), float(epsilon), float(delta), neighbouring)


@lru_cache(maxsize=512)
def _plan_rho(parts: tuple[Part, ...], rho: float, neighbouring: Neighbouring | None) -> Plan:
    """Discrete Gaussian noise on the parts, ρ-zCDP in all (Bun and Steinke 2016).

    The whitened vector ``(T_j/σ_j)`` has ℓ2 sensitivity ``(Σ Δ_j²/σ_j²)^{1/2}``; with
    ``σ_j = σ* (Δ_j Σ_i w_i Δ_i / w_j)^{1/2}`` (the split of the module notes) and ``σ* =
    1/√(2ρ)`` the parts' costs ``Δ_j²/(2σ_j²)`` add up to ρ. Each σ_j is computed for the rounded
    integer sensitivity and rounded up to the sampled σ, so each cost only shrinks; σ* is raised
    by 1e-12 to absorb float rounding in the sum.
    """
    noisy = [p for p in parts if p.sensitivity > 0]
    sigma_star = (1.0 + 1e-12) / math.sqrt(2.0 * rho)
    total = sum(p.weight * p.real_sensitivity for p in noisy)
    calibrated: dict[str, PartNoise] = {}
    for p in noisy:
        ratio = math.nextafter(sigma_star * math.sqrt(total / (p.weight * p.real_sensitivity)),
                               math.inf)  # fmt: skip
        calibrated[p.name] = _calibrated(p, ratio * p.real_sensitivity, "gaussian", ratio)
    out = tuple(calibrated.get(p.name) or PartNoise(p, 0, 0, "none", Fraction(0)) for p in parts)
    event = composed(tuple(pn.event for pn in out if pn.kind != "none"))
    return Plan(out, _declaring(event, neighbouring))


@lru_cache(maxsize=512)
def _plan(
    parts: tuple[Part, ...], epsilon: float, delta: float, neighbouring: Neighbouring | None
) -> Plan:
    noisy = [p for p in parts if p.sensitivity > 0]
    calibrated: dict[str, PartNoise] = {}
    if delta == 0.0:
        raw = [(p.weight * p.real_sensitivity) ** (2.0 / 3.0) for p in noisy]
        total = sum(raw)
        for p, r in zip(noisy, raw, strict=True):
            eps_j = epsilon * (r / total) * _SLACK
            calibrated[p.name] = _calibrated(p, p.real_sensitivity / eps_j, "laplace", 1 / eps_j)
    else:
        sigma_star = sigma_for(epsilon=epsilon, delta=delta)
        total = sum(p.weight * p.real_sensitivity for p in noisy)
        # The discrete parts are not dominated by the continuous Gaussian the calibration
        # assumes (by a lot for a count with σ of a few units, by ~1e-9 at σ ≈ 2^24 units):
        # grow σ* until the accountant certifies the discrete events actually used.
        for _ in range(50):
            for p in noisy:
                ratio = sigma_star * math.sqrt(total / (p.weight * p.real_sensitivity))
                ratio = math.nextafter(ratio, math.inf)
                calibrated[p.name] = _calibrated(p, ratio * p.real_sensitivity, "gaussian", ratio)
            spent = epsilon_for(composed(tuple(c.event for c in calibrated.values())), delta)
            if spent <= epsilon:
                break
            sigma_star *= (spent / epsilon) * (1.0 + 1e-9)
        else:
            raise PrivacyParameterError(
                f"could not calibrate Gaussian noise to epsilon={epsilon}, delta={delta}; "
                "use a larger delta or epsilon."
            )
    out = tuple(calibrated.get(p.name) or PartNoise(p, 0, 0, "none", Fraction(0)) for p in parts)
    event = composed(tuple(pn.event for pn in out if pn.kind != "none"))
    return Plan(out, _declaring(event, neighbouring))
