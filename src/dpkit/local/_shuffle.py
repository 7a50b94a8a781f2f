"""The shuffle model: central (ε, δ) of n shuffled ε₀-LDP reports (Feldman, McMillan, Talwar)."""

from __future__ import annotations

import math
import numbers

import numpy as np
import numpy.typing as npt
from scipy.stats import binom

from dpkit._checks import check_delta, check_epsilon
from dpkit.accounting import ApproxDP
from dpkit.errors import PrivacyParameterError

__all__ = ["shuffle_delta", "shuffle_epsilon", "shuffle_guarantee"]


def _check_n(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 1:
        raise PrivacyParameterError(
            f"n (number of shuffled reports) must be an int ≥ 1, got {n!r}."
        )
    return int(n)


def shuffle_delta(*, epsilon0: float, n: int, epsilon: float) -> float:
    """δ at which ``n`` shuffled ε₀-LDP reports are (ε, δ)-DP: the numerical clone bound.

    Feldman, McMillan and Talwar (2021), "Hiding Among the Clones", Thm 3.2: whatever the
    ε₀-LDP randomizers, the shuffled reports are a post-processing of
    ``(A + Δ, C − A + 1 − Δ)`` against ``(A + 1 − Δ, C − A + Δ)`` with
    ``C ~ Bin(n − 1, e^{−ε₀})`` clones, ``A ~ Bin(C, 1/2)`` and
    ``Δ ~ Bern(e^{ε₀}/(e^{ε₀} + 1))``. Their hockey-stick divergence at ``e^ε`` is computed here
    exactly up to floating point: given ``C = c`` the likelihood ratio is monotone in the first
    coordinate, so the divergence is a difference of two binomial tails; clone counts more than
    12 standard deviations from their mean are charged as if fully revealing.

    Examples
    --------
    >>> from dpkit.local import shuffle_delta
    >>> d = shuffle_delta(epsilon0=2.0, n=10_000, epsilon=0.3)
    >>> 0 < d < 1e-5
    True
    """
    e0 = check_epsilon(epsilon0, "epsilon0")
    n = _check_n(n)
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not epsilon >= 0:
        raise PrivacyParameterError(f"epsilon must be a real number ≥ 0, got {epsilon!r}.")
    eps = float(epsilon)
    if eps >= e0:
        return 0.0  # shuffling never weakens the local guarantee
    clone = math.exp(-e0)
    q1 = clone / (1.0 + clone)  # 1/(e^{ε₀} + 1), the chance Δ = 0, without cancellation in 1 − p
    p = 1.0 - q1
    # δ(ε) decreases in ε, so computing it at a smaller ε (to keep e^ε finite) is safe
    ee = math.exp(min(eps, 700.0))
    # clone counts beyond 12 standard deviations (plus slack for skew) carry < 1e-17 of mass;
    # whatever they carry is added to δ in full below
    mean, sd = (n - 1) * clone, math.sqrt((n - 1) * clone * (1 - clone))
    lo, hi = math.floor(mean - 12 * sd - 20), math.ceil(mean + 12 * sd + 20)
    c = np.arange(max(lo, 0), min(hi, n - 1) + 1)
    # with b the Bin(c, 1/2) pmf, P(x) = p b(x−1) + (1 − p) b(x) and Q(x) = (1 − p) b(x−1) + p b(x);
    # P/Q exceeds e^ε iff r = b(x−1)/b(x) = x/(c − x + 1) exceeds r*, i.e. iff
    # x > (c + 1) − t with t = (c + 1)/(1 + r*): the first such x is c + 2 − ⌈t⌉. (Written
    # as ⌊r*(c + 1)/(1 + r*)⌋ + 1 it rounded to c + 2, an empty region and δ = 0, once r*
    # passed about 2^53/(c + 1), i.e. for ε ≳ 36.)
    r_star = (ee * p - q1) / (p - ee * q1)
    t = (c + 1) / (1.0 + r_star)
    first = c + 2 - np.ceil(t)

    def region(x_star: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        tail0 = binom.sf(x_star - 2, c, 0.5)  # P[Bin ≥ x* − 1]: the b(x − 1) terms
        tail1 = binom.sf(x_star - 1, c, 0.5)  # P[Bin ≥ x*]
        gain = p * tail0 + q1 * tail1
        loss = ee * (q1 * tail0 + p * tail1)
        # rounded up: the binomial tails and weights are accurate to ~1e-14 relative and the
        # difference cancels, so add 1e-12 of the terms that cancel (and of the total below)
        return np.asarray(np.clip(gain - loss + 1e-12 * (gain + loss), 0.0, 1.0))

    # every region gives a lower bound on the divergence and the best one is {x ≥ first}; the
    # neighbours are tried too in case rounding moved the boundary by one
    delta_c = np.maximum(np.maximum(region(first - 1), region(first)), region(first + 1))
    weights = binom.pmf(c, n - 1, clone)
    outside = binom.cdf(c[0] - 1, n - 1, clone) + binom.sf(c[-1], n - 1, clone)
    return float(min(1.0, np.dot(weights, delta_c) * (1.0 + 1e-12) + outside))


def shuffle_epsilon(*, epsilon0: float, n: int, delta: float, method: str = "numerical") -> float:
    """Central ε of ``n`` shuffled ε₀-LDP reports at a given δ (never above ε₀).

    Each user runs any ε₀-LDP randomizer (every client in :mod:`dpkit.local`); a trusted shuffler
    forwards the reports in random order. Feldman, McMillan and Talwar (2021) bound the privacy
    of the shuffled batch against the analyst, with respect to one user's change:

    * ``method="closed_form"`` (their Thm 3.1): for ``ε₀ ≤ ln(n / (16 ln(2/δ)))``,
      ``ε = ln(1 + (e^{ε₀} − 1)/(e^{ε₀} + 1) · (8 √(e^{ε₀} ln(4/δ)) / √n + 8 e^{ε₀} / n))``;
      outside that range the theorem says nothing and ε₀ is returned.
    * ``method="numerical"`` (their Thm 3.2, §6): the smallest ε whose
      :func:`shuffle_delta` is at most δ, by bisection (about three times tighter).

    Examples
    --------
    >>> from dpkit.local import shuffle_epsilon
    >>> e_num = shuffle_epsilon(epsilon0=3.0, n=100_000, delta=1e-6)
    >>> e_cf = shuffle_epsilon(epsilon0=3.0, n=100_000, delta=1e-6, method="closed_form")
    >>> round(e_num, 2), round(e_cf, 2)
    (0.09, 0.34)
    """
    e0 = check_epsilon(epsilon0, "epsilon0")
    n = _check_n(n)
    d = check_delta(delta, allow_zero=False)
    if method == "closed_form":
        if e0 > math.log(n / (16.0 * math.log(2.0 / d))):
            return e0
        ee0 = math.exp(e0)
        inner = 8.0 * math.sqrt(ee0 * math.log(4.0 / d)) / math.sqrt(n) + 8.0 * ee0 / n
        return min(e0, math.log1p((ee0 - 1.0) / (ee0 + 1.0) * inner))
    if method != "numerical":
        raise PrivacyParameterError(f"method must be 'numerical' or 'closed_form', got {method!r}.")
    if shuffle_delta(epsilon0=e0, n=n, epsilon=0.0) <= d:
        return 0.0
    lo, hi = 0.0, e0  # δ(lo) > d ≥ δ(hi)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if shuffle_delta(epsilon0=e0, n=n, epsilon=mid) <= d:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-6 * hi:
            break
    return hi


def shuffle_guarantee(*, epsilon0: float, n: int, delta: float) -> ApproxDP:
    """:func:`shuffle_epsilon` (numerical) as a :class:`dpkit.accounting.ApproxDP` guarantee.

    >>> from dpkit.local import shuffle_guarantee
    >>> shuffle_guarantee(epsilon0=3.0, n=100_000, delta=1e-6).delta
    1e-06
    """
    eps = shuffle_epsilon(epsilon0=epsilon0, n=n, delta=delta)
    return ApproxDP(epsilon=max(eps, 1e-12), delta=delta)
