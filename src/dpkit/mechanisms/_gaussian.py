"""The Gaussian mechanism, float-safe: exact discrete Gaussian noise on a power-of-two grid."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit.accounting import DiscreteGaussianEvent, epsilon_of, gaussian_sigma
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._base import (
    FloatArray,
    SupportsCharge,
    as_shape,
    charge,
    check_float_value,
)
from dpkit.mechanisms._tails import check_alpha, discrete_gaussian_quantile
from dpkit.noise import (
    check_gaussian_scale,
    gaussian,
    gaussian_grid,
    rounded_sensitivity,
    sampled_sigma,
)
from dpkit.random import RNGLike, as_generator

__all__ = ["Gaussian"]


def _honest_sigma(epsilon: float, delta: float, sens: float, coordinates: int) -> float:
    """Smallest σ (in grid units, to a relative 1e-10, never below the analytic continuous σ)
    whose discrete Gaussian event is certified (ε, δ) by :func:`~dpkit.accounting.epsilon_of`."""

    def fits(sigma: float) -> bool:
        # judged at the σ the sampler will really use (δ(ε) of N_ℤ is not monotone in σ)
        ev = DiscreteGaussianEvent(
            sigma=sampled_sigma(sigma), sensitivity=sens, dimension=coordinates
        )
        return epsilon_of(ev, delta=delta) <= epsilon

    lo = gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sens)
    if fits(lo):
        return sampled_sigma(lo)
    step = 1e-9
    hi = lo * (1 + step)
    while not fits(hi):
        lo, step = hi, step * 4
        hi = hi * (1 + step)
    while hi - lo > 1e-10 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if not fits(mid) else (lo, mid)
    return sampled_sigma(hi)


@lru_cache(maxsize=256)
def calibrate_float_gaussian(
    epsilon: float, delta: float, sensitivity: float, coordinates: int
) -> tuple[float, int, DiscreteGaussianEvent]:
    """Return ``(sigma, grid, event)`` for a float-safe Gaussian release.

    The release rounds the query to the grid ``2**grid`` and adds discrete Gaussian noise of
    σ_u = σ/2**grid grid units, so what is charged is that discrete Gaussian, in grid units:

    * one coordinate: rounded values differ by an integer D ≤ Δ/2**grid + 1 grid units, so
      D = ⌊Δ/2**grid⌋ + 1 and the event is ``DiscreteGaussianEvent(sigma=σ_u, sensitivity=D)``,
      accounted by its exact privacy curve (Canonne, Kamath & Steinke 2020, Thm 7);
    * k > 1 coordinates: the rounded query's ℓ2 sensitivity is Δ/2**grid + √k grid units and the
      event ``DiscreteGaussianEvent(..., dimension=k)`` is accounted by its zCDP bound
      ρ = Δ²/(2σ²) (CKS 2020, Thm 14).

    σ_u is the smallest (from the analytic Gaussian σ upwards) for which ``epsilon_of(event,
    delta=δ) ≤ ε``; since the grid depends on σ and σ on the grid, iterate until they agree.
    Results are memoised (a pure function of its hashable arguments).
    """
    sigma = gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    grid = gaussian_grid(sigma)
    for _ in range(8):
        if coordinates == 1:
            sens_u = float(math.floor(Fraction(sensitivity) / Fraction(2) ** grid) + 1)
        else:
            real = rounded_sensitivity(sensitivity, grid, coordinates=coordinates, norm=2)
            sens_u = math.nextafter(math.ldexp(real, -grid), math.inf)
        sigma_u = _honest_sigma(epsilon, delta, sens_u, coordinates)
        sigma = math.ldexp(sigma_u, grid)
        new_grid = gaussian_grid(sigma)
        if new_grid == grid:
            # relation: none declared, the sensitivity is the caller's
            event = DiscreteGaussianEvent(sigma=sigma_u, sensitivity=sens_u, dimension=coordinates)
            return sigma, grid, event
        grid = new_grid
    raise AssertionError("grid calibration did not settle")  # pragma: no cover


@lru_cache(maxsize=256)
def calibrate_float_gaussian_rho(
    rho: float, sensitivity: float, coordinates: int
) -> tuple[float, int, DiscreteGaussianEvent]:
    """``(sigma, grid, event)`` of a float-safe Gaussian release that is ρ-zCDP.

    The same rounding as :func:`calibrate_float_gaussian`; σ_u (grid units) is the sampled σ at
    or above ``D/√(2ρ)`` for the rounded query's ℓ2 sensitivity D in grid units, so the discrete
    Gaussian actually added is ρ-zCDP (Canonne, Kamath and Steinke 2020, Thm 14) and a zCDP
    accountant pays exactly ``D²/(2σ_u²) ≤ ρ`` for it, with no conversion through (ε, δ).
    """
    grid = gaussian_grid(sensitivity / math.sqrt(2.0 * rho))
    for _ in range(8):
        if coordinates == 1:
            sens_u = float(math.floor(Fraction(sensitivity) / Fraction(2) ** grid) + 1)
        else:
            real = rounded_sensitivity(sensitivity, grid, coordinates=coordinates, norm=2)
            sens_u = math.nextafter(math.ldexp(real, -grid), math.inf)
        sigma_u = sampled_sigma(math.nextafter(sens_u / math.sqrt(2.0 * rho), math.inf))
        sigma = math.ldexp(sigma_u, grid)
        new_grid = gaussian_grid(sigma)
        if new_grid == grid:
            # relation: none declared, the sensitivity is the caller's
            event = DiscreteGaussianEvent(sigma=sigma_u, sensitivity=sens_u, dimension=coordinates)
            return sigma, grid, event
        grid = new_grid
    raise AssertionError("grid calibration did not settle")  # pragma: no cover


@dataclass(frozen=True, kw_only=True)
class Gaussian:
    """The Gaussian mechanism for real queries with ℓ2 sensitivity Δ₂: (ε, δ)-DP.

    Releases ``f(x) + N(0, σ²)``-like noise with σ from the *analytic* calibration of Balle and
    Wang (2018), the smallest σ for which the Gaussian mechanism is (ε, δ)-DP for every ε, not
    only ε < 1 as the classical ``σ = Δ₂ √(2 ln(1.25/δ)) / ε`` of the "Approximate Differential
    Privacy" notes ("the Gaussian mechanism") assumes. Suited to vectors: the noise scales with the
    ℓ2 sensitivity, which for k counts each changing by one is √k rather than k (the "Approximate
    Differential Privacy" notes, "Laplace vs Gaussian").

    It is **float-safe**: the value is rounded to the grid ``2**grid · ℤ`` (≈ σ · 2^-24) and exact
    discrete Gaussian noise (Canonne, Kamath and Steinke 2020) is added on that grid
    (:func:`dpkit.noise.gaussian`), so every possible output lies on one data-independent grid.
    σ is calibrated so that the discrete Gaussian actually used, on the rounded query (ℓ2
    sensitivity ``Δ₂ + √k · 2**grid``), is certified (ε, δ) by the accountant: by its exact
    privacy curve for a scalar (Canonne, Kamath and Steinke 2020, Thm 7; σ within ~1e-7 of the
    analytic continuous σ) and by its zCDP bound for vectors (CKS 2020, Thm 14; σ larger).

    Choose δ well below 1/n (the "Approximate Differential Privacy" notes, "Name & Shame"): a
    mechanism that publishes one random record whole is (0, 1/n)-DP.

    Parameters
    ----------
    epsilon : float
        ε > 0 (with ``delta``).
    delta : float
        δ in (0, 1).
    rho : float, optional
        Instead of ``epsilon`` and ``delta``: a zero-concentrated budget ρ > 0 (Bun and Steinke
        2016). σ is then about Δ₂/√(2ρ) and the release is ρ-zCDP, paid in ρ by a
        :class:`~dpkit.accounting.ZCDP` accountant with no conversion loss; ``epsilon`` and
        ``delta`` are then ``None``.
    sensitivity : float
        ℓ2 sensitivity Δ₂ > 0 of the query.
    shape : int or tuple of ints
        Shape of the values released; ``()`` (default) for scalars.

    Attributes
    ----------
    sigma : float
        Standard deviation of the noise (in the units of the query).
    grid : int
        Outputs are multiples of ``2**grid``.
    event : dpkit.accounting.DiscreteGaussianEvent
        What a release costs: the discrete Gaussian actually added, in grid units (σ/2**grid,
        with the rounded query's sensitivity), see ``calibrate_float_gaussian``.

    Examples
    --------
    >>> from dpkit.mechanisms import Gaussian
    >>> g = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    >>> round(g.sigma, 2)
    3.73
    >>> y = g.release(10.0, rng=3)
    >>> abs(y - 10.0) < 6 * g.sigma
    True
    >>> Gaussian(epsilon=1.0, delta=1e-6, shape=(2, 2)).release([[1, 2], [3, 4]], rng=0).shape
    (2, 2)
    >>> round(g.accuracy(0.05), 2)  # before any release: 95% of the noise is within this
    7.31
    >>> round(Gaussian(rho=0.125, sensitivity=1.0).sigma, 3)  # σ = Δ/√(2ρ)
    2.0
    """

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    sensitivity: float = 1.0
    shape: tuple[int, ...] = ()
    sigma: float = field(init=False)
    grid: int = field(init=False)
    event: DiscreteGaussianEvent = field(init=False, repr=False)

    def __post_init__(self) -> None:
        sens = check_positive(self.sensitivity, "sensitivity")
        shape = as_shape(self.shape)
        k = max(1, math.prod(shape))
        eps: float | None = None
        dlt: float | None = None
        if self.rho is not None:
            if self.epsilon is not None or self.delta is not None:
                raise PrivacyParameterError("give either rho= or epsilon= and delta=, not both.")
            rho = check_positive(self.rho, "rho")
            sigma, grid, event = calibrate_float_gaussian_rho(rho, sens, k)
            object.__setattr__(self, "rho", rho)
        else:
            if self.epsilon is None or self.delta is None:
                raise PrivacyParameterError(
                    "Gaussian needs epsilon= and delta=, or rho=; e.g. "
                    "Gaussian(epsilon=1.0, delta=1e-6) or Gaussian(rho=0.5)."
                )
            eps = check_epsilon(self.epsilon)
            dlt = check_delta(self.delta, allow_zero=False)
            sigma, grid, event = calibrate_float_gaussian(eps, dlt, sens, k)
        # a σ or grid the exact sampler cannot use (Δ = 1e300 puts the grid beyond 2^960) is
        # refused here, before any release could charge for it
        check_gaussian_scale(sigma, grid)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dlt)
        object.__setattr__(self, "sensitivity", sens)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "event", event)

    def release(
        self,
        value: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> float | FloatArray:
        """Release ``value`` (the exact query answer) with Gaussian noise.

        Parameters
        ----------
        value : float or array_like
            Finite values of shape ``self.shape``.
        rng : None, int or numpy.random.Generator
            ``None`` (default) is secure; an int seed is reproducible and not secure.
        accountant : optional
            Charged ``self.event`` before anything is released; if it refuses, nothing is
            released.
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
        charge(accountant, self.event, label, delta=self.delta, rng=rng)
        return gaussian(x, self.sigma, grid=self.grid, rng=gen)

    def accuracy(self, alpha: float = 0.05) -> float:
        """Before any release, from public parameters only: the half-width w of the
        ``1 − alpha`` interval of each coordinate's noise (``ci``'s value; see there)."""
        return self.ci(alpha)

    def ci(self, alpha: float = 0.05) -> float:
        """Half-width w with ``P(|release − value| > w) ≤ alpha`` for each coordinate.

        From the discrete Gaussian actually drawn on the grid (a bound at most a couple of grid
        steps above the exact quantile), plus the half grid step of the rounding.
        """
        a = check_alpha(alpha)
        step = math.ldexp(1.0, self.grid)
        m = discrete_gaussian_quantile(self.sigma / step, a)
        return m * step + step / 2.0
