"""The Laplace mechanism, float-safe: exact discrete Laplace noise on a power-of-two grid."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dpkit._checks import check_epsilon, check_positive
from dpkit.accounting import LaplaceEvent
from dpkit.mechanisms._base import (
    FloatArray,
    SupportsCharge,
    as_shape,
    charge,
    check_float_value,
)
from dpkit.mechanisms._tails import check_alpha, discrete_laplace_quantile
from dpkit.noise import check_laplace_scale, laplace, laplace_grid, rounded_sensitivity
from dpkit.random import RNGLike, as_generator

__all__ = ["Laplace"]


@dataclass(frozen=True, kw_only=True)
class Laplace:
    """The Laplace mechanism for real queries with ℓ1 sensitivity Δ: ε-differential privacy.

    Releases ``f(x) + noise`` where the noise has scale Δ/ε (Dwork & Roth 2014, §3.3;
    Dwork, McSherry, Nissim and Smith 2006). It is **float-safe**: the value is
    rounded to the grid ``2**grid · ℤ`` and exact discrete Laplace noise is added on that grid
    (:func:`dpkit.noise.laplace`), so every possible output lies on one grid that does not depend
    on the data, closing the attack of Mironov (2012) on textbook floating-point Laplace noise.
    Rounding moves each of the ``k`` coordinates by at most half a grid step, so the noise is
    calibrated to the rounded query's sensitivity ``Δ + k · 2**grid``: the release is ε-DP
    exactly, for the sensitivity as given. The grid is about ``2**-40 · min(Δ, Δ/ε)`` (see
    :func:`dpkit.noise.laplace_grid`), so the relative excess ``k · 2**grid / Δ`` is about
    ``k · 2**-40`` for ε ≥ 2^-11 and stays below 2^-6 down to ε ≈ 2^-45; a smaller ε is refused
    at construction (nothing is charged), because the exact sampler could not represent the
    noise scale.

    The sensitivity depends on the neighbouring relation: a count has Δ = 1 under add/remove and
    Δ = 1 under replace (one record leaves, one enters: each count moves by at most one, a
    histogram by 2 in ℓ1); a sum of values clamped to [a, b] has Δ = max(|a|, |b|) under
    add/remove and b − a under replace. :mod:`dpkit.stats` computes these for you.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    sensitivity : float
        ℓ1 sensitivity Δ > 0 of the query, for the neighbouring relation you want to protect.
    shape : int or tuple of ints
        Shape of the values released; ``()`` (default) for scalars. A release whose value has
        another shape is refused, because the rounding correction depends on the size.

    Attributes
    ----------
    scale : float
        The Laplace scale b used (≥ Δ/ε).
    grid : int
        Outputs are multiples of ``2**grid``.
    event : dpkit.accounting.LaplaceEvent
        What a release costs.

    Examples
    --------
    >>> from dpkit.mechanisms import Laplace
    >>> lap = Laplace(epsilon=1.0, sensitivity=1.0)
    >>> y = lap.release(42.0, rng=7)
    >>> isinstance(y, float), abs(y - 42.0) < 30
    (True, True)
    >>> round(lap.ci(0.05), 3)  # 95% of releases lie within this of the true value
    2.996
    >>> Laplace(epsilon=0.5, sensitivity=2.0, shape=3).release([1.0, 2.0, 3.0], rng=1).shape
    (3,)
    """

    epsilon: float
    sensitivity: float = 1.0
    shape: tuple[int, ...] = ()
    scale: float = field(init=False)
    grid: int = field(init=False)
    event: LaplaceEvent = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        delta = check_positive(self.sensitivity, "sensitivity")
        shape = as_shape(self.shape)
        k = max(1, math.prod(shape))
        # the grid from min(Δ, Δ/ε): the rounding allowance stays ~2^-40 of Δ for any ε ≥ 2^-40
        # (and is refused here, before any charge, when ε is too small to sample exactly)
        grid = laplace_grid(delta / eps, sensitivity=delta, coordinates=k)
        rounded = rounded_sensitivity(delta, grid, coordinates=k)
        scale = math.nextafter(rounded / eps, math.inf)  # so that rounded / scale ≤ ε
        check_laplace_scale(scale, grid)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "sensitivity", delta)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "scale", scale)
        # relation: none declared, the sensitivity is the caller's (its relation's)
        object.__setattr__(self, "event", LaplaceEvent(scale=scale, sensitivity=rounded))

    @property
    def delta(self) -> float:
        """Always 0: the Laplace mechanism is pure ε-DP."""
        return 0.0

    def release(
        self,
        value: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> float | FloatArray:
        """Release ``value`` (the exact query answer) with Laplace noise.

        Parameters
        ----------
        value : float or array_like
            Finite values of shape ``self.shape``.
        rng : None, int or numpy.random.Generator
            ``None`` (default) is secure; an int seed is reproducible and not secure.
        accountant : optional
            Charged ``self.event`` before anything is released; if it refuses
            (:class:`~dpkit.errors.BudgetExceededError`), nothing is released.
        label : str, optional
            Recorded with the charge.

        Returns
        -------
        float or numpy.ndarray
            A float for a scalar mechanism, else an array of ``self.shape``; every entry is a
            multiple of ``2**self.grid``.
        """
        x = check_float_value(value, self.shape)
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        return laplace(x, self.scale, grid=self.grid, rng=gen)

    def accuracy(self, alpha: float = 0.05) -> float:
        """Before any release, from public parameters only: the half-width w of the
        ``1 − alpha`` interval of each coordinate's noise (``ci``'s value; see there)."""
        return self.ci(alpha)

    def ci(self, alpha: float = 0.05) -> float:
        """Half-width w with ``P(|release − value| > w) ≤ alpha`` for each coordinate.

        Computed from the discrete Laplace noise actually drawn on the grid, plus the half grid
        step of the rounding, so ``release ± w`` covers the noiseless value with probability at
        least ``1 − alpha``.
        """
        a = check_alpha(alpha)
        step = math.ldexp(1.0, self.grid)
        m = discrete_laplace_quantile(self.scale / step, a)
        return m * step + step / 2.0
