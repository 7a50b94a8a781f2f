"""The geometric (discrete Laplace) mechanism for integer queries."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpkit._checks import check_epsilon, exact_fraction
from dpkit.accounting import DiscreteLaplaceEvent
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._base import (
    IntArray,
    SupportsCharge,
    as_shape,
    charge,
    check_int_value,
    check_integer_parameter,
)
from dpkit.mechanisms._tails import check_alpha, discrete_laplace_quantile
from dpkit.noise import discrete_laplace
from dpkit.noise._discrete import DLAP_MAX_NUMERATOR
from dpkit.noise._scales import rational_at_least
from dpkit.random import RNGLike, as_generator

__all__ = ["DiscreteLaplace", "Geometric", "add_integer_noise"]


def add_integer_noise(x: IntArray, noise: int | IntArray, scalar: bool) -> int | IntArray:
    """``x + noise`` for int64 data clamped to ±(2^62 − 1) before charging, so no overflow."""
    out = x + np.asarray(noise, dtype=np.int64)
    return int(out) if scalar else out


@dataclass(frozen=True, kw_only=True)
class Geometric:
    """The geometric mechanism: integer query + exact discrete Laplace noise; ε-DP.

    Ghosh, Roughgarden and Sundararajan (2009). For an integer-valued query (a count, a
    histogram of counts, a sum of integers) with ℓ1 sensitivity Δ, adding discrete Laplace noise
    with ``P(k) ∝ exp(−ε|k|/Δ)`` is ε-DP — the integer analogue of the Laplace mechanism of seed
    003, with no rounding and no floating point at all: integer in, integer out. Counts have Δ = 1
    under add/remove; under replace a single count still has Δ = 1 and a histogram Δ = 2.

    ``DiscreteLaplace`` is the same class.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    sensitivity : int
        ℓ1 sensitivity Δ ≥ 1 of the integer query (an integer, as the query's values are).
    shape : int or tuple of ints
        Shape of the values released; ``()`` (default) for scalars.

    Attributes
    ----------
    scale : float
        The scale Δ/ε (rounded up to a float).
    event : dpkit.accounting.DiscreteLaplaceEvent
        What a release costs.

    Examples
    --------
    >>> from dpkit.mechanisms import Geometric
    >>> geo = Geometric(epsilon=0.5)
    >>> y = geo.release(120, rng=2)
    >>> isinstance(y, int)
    True
    >>> geo.ci(0.05)  # P(|y - 120| > 6) <= 0.05
    6
    """

    epsilon: float
    sensitivity: int = 1
    shape: tuple[int, ...] = ()
    scale: float = field(init=False)
    event: DiscreteLaplaceEvent = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        sens = check_integer_parameter(self.sensitivity, "sensitivity")
        exact = Fraction(sens) / exact_fraction(eps, "epsilon")
        try:
            scale = float(exact)
        except OverflowError:  # e.g. Δ = 2^40 at ε = 1e-300: refused here, nothing is charged
            raise PrivacyParameterError(
                "sensitivity/epsilon is beyond the float range; use a larger epsilon."
            ) from None
        if Fraction(scale) < exact:  # round up: more noise, never less
            scale = math.nextafter(scale, math.inf)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "sensitivity", sens)
        object.__setattr__(self, "shape", as_shape(self.shape))
        rational_at_least(
            scale, "scale", max_numerator=DLAP_MAX_NUMERATOR
        )  # refused before any charge
        object.__setattr__(self, "scale", scale)
        # relation: none declared, the sensitivity is the caller's (its relation's)
        object.__setattr__(self, "event", DiscreteLaplaceEvent(scale=scale, sensitivity=sens))

    @property
    def delta(self) -> float:
        """Always 0: the geometric mechanism is pure ε-DP."""
        return 0.0

    def release(
        self,
        value: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> int | IntArray:
        """Release the integer ``value`` plus exact discrete Laplace noise.

        Parameters
        ----------
        value : int or array_like of int
            Integers (floats only if integral) of shape ``self.shape``. Each is clamped to
            ``[−(2^62 − 1), 2^62 − 1]``, the range in which adding noise cannot overflow; the
            clamp is 1-Lipschitz, so the sensitivity and the guarantee hold, and an answer
            beyond the range is released as its end, never refused on its value.
        rng : None, int or numpy.random.Generator
            ``None`` (default) is secure; an int seed is reproducible and not secure.
        accountant : optional
            Charged ``self.event`` before anything is released.
        label : str, optional
            Recorded with the charge.

        Returns
        -------
        int or numpy.ndarray of int64
        """
        x = check_int_value(value, self.shape)
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        scalar = self.shape == ()
        noise = discrete_laplace(self.scale, None if scalar else self.shape, rng=gen)
        return add_integer_noise(x, noise, scalar)

    def accuracy(self, alpha: float = 0.05) -> int:
        """Before any release, from public parameters only: the half-width w of the
        ``1 − alpha`` interval of each coordinate's noise (``ci``'s value; see there)."""
        return self.ci(alpha)

    def ci(self, alpha: float = 0.05) -> int:
        """Smallest integer w with ``P(|release − value| > w) ≤ alpha`` for each coordinate."""
        return discrete_laplace_quantile(self.scale, check_alpha(alpha))


DiscreteLaplace = Geometric
