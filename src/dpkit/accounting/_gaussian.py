"""The exact privacy curve of the Gaussian mechanism and the analytic calibration of its noise.

Balle & Wang (2018), "Improving the Gaussian mechanism for differential privacy: analytical
calibration and optimal denoising", Theorem 8: adding N(0, σ²) noise to a query of ℓ2 sensitivity Δ
is (ε, δ)-DP if and only if

    δ ≥ Φ(Δ/(2σ) - εσ/Δ) - e^ε Φ(-Δ/(2σ) - εσ/Δ).

Everything here works with μ = Δ/σ, the only quantity the curve depends on.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit.errors import PrivacyParameterError

__all__ = ["gaussian_delta", "gaussian_epsilon", "gaussian_sigma"]


def _log_delta(epsilon: float, mu: float) -> float:
    """log δ(ε) for the Gaussian mechanism with Δ/σ = μ, computed without cancellation."""
    if mu == 0.0:  # σ infinitely larger than Δ: the two output distributions are equal
        return -math.inf
    a = mu / 2.0 - epsilon / mu
    b = -mu / 2.0 - epsilon / mu
    log1 = float(special.log_ndtr(a))
    log2 = epsilon + float(special.log_ndtr(b))
    if log2 >= log1:
        return -math.inf
    return log1 + math.log(-math.expm1(log2 - log1))


def gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with sensitivity/σ ratio ``mu`` (Balle & Wang, Thm 8).

    Examples
    --------
    >>> round(gaussian_delta(1.0, 1.0), 6)
    0.126937
    """
    return math.exp(_log_delta(max(float(epsilon), 0.0), float(mu)))


def gaussian_epsilon(delta: float, mu: float) -> float:
    """Smallest ε with δ(ε) ≤ ``delta`` for the Gaussian mechanism with Δ/σ = ``mu``.

    Solved by root finding on log δ(ε), then moved up until the check passes, so the ε returned is
    never below the exact one.

    Examples
    --------
    >>> round(gaussian_epsilon(1e-5, 1 / 3.7306316348159374), 6)
    1.0
    """
    mu = float(mu)
    if delta <= 0:
        return math.inf
    log_target = math.log(delta)
    if _log_delta(0.0, mu) <= log_target:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    if not math.isfinite(hi):  # σ ≈ 1e-300: ε ≈ μ²/2 is beyond the float range
        return math.inf
    while _log_delta(hi, mu) > log_target:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    eps = optimize.brentq(
        lambda e: _log_delta(e, mu) - log_target, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps
    )
    eps = float(eps)
    while _log_delta(eps, mu) > log_target:
        eps = math.nextafter(eps, math.inf) * (1 + 1e-15)
    return eps


def gaussian_sigma(
    *, epsilon: float, delta: float, sensitivity: float = 1.0, method: str = "analytic"
) -> float:
    """Smallest Gaussian noise σ giving (ε, δ)-DP for a query of ℓ2 sensitivity ``sensitivity``.

    ``method="analytic"`` (default) inverts the exact privacy curve of Balle & Wang (2018,
    Theorem 8 and Algorithm 1); it is valid for every ε > 0 and gives the least noise possible.
    ``method="classic"`` is σ = √(2 ln(1.25/δ)) Δ/ε (Dwork & Roth 2014, Theorem A.1; the
    lecture notes "Approximate Differential Privacy"), proved only for ε ≤ 1, so it is refused
    for larger ε.

    Privacy guarantee: adding N(0, σ²) noise with the returned σ to each release of a query with
    ℓ2 sensitivity Δ is (ε, δ)-differentially private. σ is rounded up.

    Parameters
    ----------
    epsilon : float
        Target ε > 0.
    delta : float
        Target δ in (0, 1).
    sensitivity : float
        ℓ2 sensitivity Δ under the neighbouring relation in use.
    method : {"analytic", "classic"}

    Examples
    --------
    >>> round(gaussian_sigma(epsilon=1.0, delta=1e-5), 4)
    3.7306
    >>> round(gaussian_sigma(epsilon=1.0, delta=1e-5, method="classic"), 4)
    4.8448
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=False)
    sens = check_positive(sensitivity, "sensitivity")
    if method == "classic":
        if eps > 1:
            raise PrivacyParameterError(
                f"the classic Gaussian calibration is only proved for epsilon <= 1, got {eps}; "
                'use method="analytic" (valid for every epsilon and never noisier).'
            )
        sigma = math.sqrt(2 * math.log(1.25 / d)) * sens / eps
        return math.nextafter(sigma, math.inf)
    if method != "analytic":
        raise PrivacyParameterError(f'method must be "analytic" or "classic", got {method!r}.')
    log_target = math.log(d)
    # δ(ε) increases with μ = Δ/σ: find the largest μ with δ ≤ target.
    lo, hi = 1e-12, 1.0
    while _log_delta(eps, hi) <= log_target:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:  # pragma: no cover - impossible for δ < 1
            raise PrivacyParameterError("no finite sigma found; check epsilon and delta.")
    while _log_delta(eps, lo) > log_target:
        lo /= 2.0
    mu = float(
        optimize.brentq(
            lambda m: _log_delta(eps, m) - log_target, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=500
        )
    )
    while _log_delta(eps, mu) > log_target:
        mu = math.nextafter(mu, 0.0) * (1 - 1e-15)
    sigma = sens / mu if mu > 0 else math.inf
    # σ below the smallest float (a subnormal Δ) is rounded up to it: more noise, still valid.
    sigma = max(sigma, math.ulp(0.0))
    if not math.isfinite(sigma):
        raise PrivacyParameterError(
            "the sigma for this epsilon, delta and sensitivity is beyond the float range; use a "
            "larger epsilon or a smaller sensitivity."
        )
    while _log_delta(eps, sens / sigma) > log_target:
        sigma = math.nextafter(sigma, math.inf)
    return sigma
