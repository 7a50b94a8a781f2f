"""Tail quantiles of the integer noise, for the ``ci(alpha)`` of additive mechanisms.

Each function returns the smallest (or a provably sufficient) integer ``m`` with
``P(|Z| > m) ≤ alpha``, computed from the distribution actually sampled, never from a continuous
approximation that could under-cover.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import ndtri

from dpkit.errors import PrivacyParameterError

__all__ = [
    "check_alpha",
    "discrete_gaussian_quantile",
    "discrete_gaussian_upper_tail",
    "discrete_laplace_quantile",
    "discrete_laplace_upper_tail",
]

# Scales are rounded up by the samplers by a relative amount below 2^-51 (Laplace) and 2^-24
# (Gaussian); the quantiles are computed for scales inflated by twice that, so they never
# under-cover the noise actually drawn.
_LAPLACE_SLACK = 2.0**-50
_GAUSSIAN_SLACK = 2.0**-23
_EXACT_GAUSSIAN_SIGMA = 1000.0


def check_alpha(alpha: object) -> float:
    """``alpha`` must be a probability in (0, 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float | np.floating):
        raise PrivacyParameterError(f"alpha must be a number in (0, 1), got {alpha!r}.")
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise PrivacyParameterError(
            f"alpha must be in (0, 1), got {a!r}; alpha=0.05 gives a 95% interval."
        )
    return a


def _laplace_log_tail(m: int, t: float) -> float:
    # P(|Z| > m) = 2 r^(m+1) / (1 + r), r = exp(-1/t)
    return math.log(2.0) - (m + 1) / t - math.log1p(math.exp(-1.0 / t))


@lru_cache(maxsize=1024)  # a pure function of two floats; a service asks the same ones often
def discrete_laplace_quantile(scale: float, alpha: float) -> int:
    """Smallest ``m ≥ 0`` with ``P(|Z| > m) ≤ alpha`` for Z discrete Laplace of this scale.

    P(Z = k) ∝ exp(−|k|/t), so ``P(|Z| > m) = 2 r^{m+1} / (1 + r)`` with ``r = exp(−1/t)``.

    >>> discrete_laplace_quantile(1.0, 0.05)
    3
    """
    t = scale * (1.0 + _LAPLACE_SLACK)
    log_alpha = math.log(alpha)
    guess = t * (math.log(2.0) - math.log1p(math.exp(-1.0 / t)) - log_alpha) - 1.0
    m = max(0, math.ceil(guess))
    while _laplace_log_tail(m, t) > log_alpha:
        m += 1
    while m > 0 and _laplace_log_tail(m - 1, t) <= log_alpha:
        m -= 1
    return m


def discrete_gaussian_quantile(sigma: float, alpha: float) -> int:
    """An ``m`` with ``P(|Z| > m) ≤ alpha`` for Z discrete Gaussian with parameter σ.

    For σ ≤ 1000 the tail is summed exactly and ``m`` is the smallest such integer. For larger σ,
    ``P(Z > m) ≤ Q(m/σ)`` (the sum over ``k > m`` is at most the integral from ``m``, and the
    normaliser is at least σ√(2π) by Poisson summation), so ``m = ⌈σ z_{1−α/2}⌉`` suffices and
    exceeds the smallest valid value by at most one or two units.

    >>> discrete_gaussian_quantile(1.0, 0.05)
    2
    """
    s = sigma * (1.0 + _GAUSSIAN_SLACK)
    if s > _EXACT_GAUSSIAN_SIGMA:
        # -ndtri(alpha / 2), not ndtri(1 - alpha / 2): below alpha ≈ 1e-16 the latter rounds
        # to ndtri(1) = inf, and ceil(inf) would fail after the release was charged
        return math.ceil(s * float(-ndtri(alpha / 2.0)))
    k = np.arange(0, math.ceil(40.0 * s) + 2, dtype=np.float64)
    f = np.exp(-(k * k) / (2.0 * s * s))
    z = f[0] + 2.0 * f[1:].sum()
    # tail[m] = P(|Z| > m) = 2 * sum_{j > m} f[j] / z
    suffix = np.cumsum(f[::-1])[::-1]  # suffix[j] = sum_{i >= j} f[i]
    tail = 2.0 * np.append(suffix[1:], 0.0) / z
    ok = np.nonzero(tail <= alpha)[0]
    return int(ok[0])


def discrete_laplace_upper_tail(scale: float, m: int) -> float:
    """``P(Z ≥ m)`` for Z discrete Laplace of this scale (``m`` any integer).

    ``P(Z ≥ m) = r^m / (1 + r)`` for ``m ≥ 1`` (``r = exp(−1/scale)``), and by symmetry
    ``1 − P(Z ≥ 1 − m)`` for ``m ≤ 0``. Used for the probability that a thresholded key is kept.

    >>> round(discrete_laplace_upper_tail(1.0, 1), 4)
    0.2689
    >>> discrete_laplace_upper_tail(1.0, 0) + discrete_laplace_upper_tail(1.0, 1)
    1.0
    """
    r = math.exp(-1.0 / scale)
    if m >= 1:
        return math.exp(m * -1.0 / scale) / (1.0 + r)
    return 1.0 - math.exp((1 - m) * -1.0 / scale) / (1.0 + r)


def discrete_gaussian_upper_tail(sigma: float, m: int) -> float:
    """``P(Z ≥ m)`` for Z discrete Gaussian with parameter σ (``m`` any integer).

    Summed exactly for σ ≤ 1000; beyond, ``Q((m − 1/2)/σ)`` (the normal tail with continuity
    correction; the discrete Gaussian's distribution function differs from it by far less than
    1e-12 at such σ, Poisson summation).

    >>> round(discrete_gaussian_upper_tail(1.0, 1), 4)
    0.3005
    """
    if sigma > _EXACT_GAUSSIAN_SIGMA:
        from scipy.special import ndtr

        return float(ndtr(-(m - 0.5) / sigma))
    half = math.ceil(40.0 * sigma) + 2
    k = np.arange(-half, half + 1, dtype=np.float64)
    f = np.exp(-(k * k) / (2.0 * sigma * sigma))
    return float(f[k >= m].sum() / f.sum())
