"""The discrete Gaussian mechanism for integer queries (Canonne, Kamath and Steinke 2020)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit.accounting import DiscreteGaussianEvent, epsilon_of, gaussian_sigma
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._base import IntArray, SupportsCharge, as_shape, charge, check_int_value
from dpkit.mechanisms._geometric import add_integer_noise
from dpkit.mechanisms._tails import check_alpha, discrete_gaussian_quantile
from dpkit.noise import discrete_gaussian, sampled_sigma
from dpkit.random import RNGLike, as_generator

__all__ = ["DiscreteGaussian"]


def _calibrate(epsilon: float, delta: float, sensitivity: float, dimension: int) -> float:
    """Smallest σ (to a relative 1e-7) whose discrete Gaussian event is (ε, δ)-DP.

    Starts from the continuous analytic σ (Balle and Wang 2018) and, if the accountant's
    ε for the *discrete* event at δ (exact privacy loss for a scalar with integer Δ, the zCDP
    bound otherwise) is above the target, searches upwards by bisection.
    """

    def eps_at(sigma: float) -> float:
        # judged at the σ the sampler will really use (δ(ε) of N_ℤ is not monotone in σ)
        event = DiscreteGaussianEvent(
            sigma=sampled_sigma(sigma), sensitivity=sensitivity, dimension=dimension
        )
        return epsilon_of(event, delta=delta)

    lo = gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    if eps_at(lo) <= epsilon:
        return sampled_sigma(lo)
    hi = lo * 1.01
    while eps_at(hi) > epsilon:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-7 * hi:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if eps_at(mid) > epsilon else (lo, mid)
    return sampled_sigma(hi)


@dataclass(frozen=True, kw_only=True)
class DiscreteGaussian:
    """Integer query + exact discrete Gaussian noise: ρ-zCDP, hence (ε, δ)-DP.

    Canonne, Kamath and Steinke (2020): adding noise with ``P(k) ∝ exp(−k²/2σ²)`` to an integer
    query (scalar or vector) whose ℓ2 sensitivity is Δ₂ satisfies ρ-zCDP with ρ = Δ₂²/(2σ²)
    (their Theorem 14) and (ε, δ)-DP within a hair of the continuous Gaussian mechanism of seed
    002. Integer in, integer out; no floating point touches the released value.

    Give either ``epsilon`` and ``delta`` — σ is then the smallest for which the accountant
    certifies (ε, δ) for this discrete event: the exact privacy loss of the discrete Gaussian for
    a scalar query with integer Δ (slightly above the continuous analytic σ of Balle and Wang
    2018), the zCDP conversion for vectors — or ``rho`` (σ = Δ₂/√(2ρ); add ``delta`` to learn
    the ε it implies).

    Parameters
    ----------
    epsilon, delta : float, optional
        ε > 0 and δ in (0, 1).
    rho : float, optional
        ρ > 0, for zCDP accounting.
    sensitivity : float
        ℓ2 sensitivity Δ₂ > 0 of the integer query (1 for one count; √2 for a histogram under
        replace, where two counts move by one).
    shape : int or tuple of ints
        Shape of the values released; ``()`` (default) for scalars.

    Attributes
    ----------
    sigma : float
        The noise parameter σ.
    rho : float
        The zCDP parameter Δ₂²/(2σ²).
    event : dpkit.accounting.DiscreteGaussianEvent
        What a release costs.

    Examples
    --------
    >>> from dpkit.mechanisms import DiscreteGaussian
    >>> dg = DiscreteGaussian(rho=0.125)
    >>> dg.sigma
    2.0
    >>> isinstance(dg.release(1000, rng=1), int)
    True
    >>> dg.ci(0.05)
    4
    """

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    sensitivity: float = 1.0
    shape: tuple[int, ...] = ()
    sigma: float = field(init=False)
    event: DiscreteGaussianEvent = field(init=False, repr=False)

    def __post_init__(self) -> None:
        sens = check_positive(self.sensitivity, "sensitivity")
        eps: float | None = None
        dlt: float | None = None
        if self.rho is not None:
            if self.epsilon is not None:
                raise PrivacyParameterError("give either rho= or epsilon= (with delta=), not both.")
            rho = check_positive(self.rho, "rho")
            sigma = sampled_sigma(sens / math.sqrt(2.0 * rho))  # the σ actually drawn
            if self.delta is not None:
                dlt = check_delta(self.delta, allow_zero=False)
                eps = epsilon_of(
                    DiscreteGaussianEvent(
                        sigma=sigma,
                        sensitivity=sens,
                        dimension=max(1, math.prod(as_shape(self.shape))),
                    ),
                    delta=dlt,
                )
        else:
            if self.epsilon is None or self.delta is None:
                raise PrivacyParameterError(
                    "DiscreteGaussian needs epsilon= and delta=, or rho=; e.g. "
                    "DiscreteGaussian(epsilon=1.0, delta=1e-6)."
                )
            eps = check_epsilon(self.epsilon)
            dlt = check_delta(self.delta, allow_zero=False)
            sigma = _calibrate(eps, dlt, sens, max(1, math.prod(as_shape(self.shape))))
        rho_actual = sens * sens / (2.0 * sigma * sigma)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dlt)
        object.__setattr__(self, "rho", rho_actual if self.rho is None else float(self.rho))
        object.__setattr__(self, "sensitivity", sens)
        shape = as_shape(self.shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "sigma", sigma)
        # relation: none declared, the sensitivity is the caller's (its relation's)
        event = DiscreteGaussianEvent(
            sigma=sigma, sensitivity=sens, dimension=max(1, math.prod(shape))
        )
        object.__setattr__(self, "event", event)

    def release(
        self,
        value: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> int | IntArray:
        """Release the integer ``value`` plus exact discrete Gaussian noise.

        Parameters
        ----------
        value : int or array_like of int
            Integers of shape ``self.shape``. Each is clamped to ``[−(2^62 − 1), 2^62 − 1]``,
            the range in which adding noise cannot overflow; the clamp is 1-Lipschitz, so the
            sensitivity and the guarantee hold, and an answer beyond the range is released as
            its end, never refused on its value.
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
        charge(accountant, self.event, label, delta=self.delta, rng=rng)
        scalar = self.shape == ()
        noise = discrete_gaussian(self.sigma, None if scalar else self.shape, rng=gen)
        return add_integer_noise(x, noise, scalar)

    def accuracy(self, alpha: float = 0.05) -> int:
        """Before any release, from public parameters only: the half-width w of the
        ``1 − alpha`` interval of each coordinate's noise (``ci``'s value; see there)."""
        return self.ci(alpha)

    def ci(self, alpha: float = 0.05) -> int:
        """An integer w with ``P(|release − value| > w) ≤ alpha`` for each coordinate.

        Exact (the smallest such w) for σ ≤ 1000; a Gaussian-tail bound above that.
        """
        return discrete_gaussian_quantile(self.sigma, check_alpha(alpha))
