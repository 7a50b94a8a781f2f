"""Private key selection: which group keys may be released at all.

A key present in the data may reveal one person (a rare diagnosis, a one-off merchant), so with
no public key set a key is released only by a mechanism that hides any one unit's keys.
Three mechanisms, each (ε, δ)-DP for the keys of one add/remove-one-unit change:

* ``"truncated_geometric"`` (Desfontaines, Voss, Gipson and Mandayam 2022, "Differentially
  private partition selection", PoPETs, Theorem 1): optimal when each unit is in one group. A key
  held by n units is kept with probability ``p(n)``, ``p(0) = 0`` and
  ``p(n) = min(1, e^ε p(n−1) + δ, 1 + e^{−ε}(p(n−1) + δ − 1))``.
* ``"laplace"``: exact discrete Laplace noise of scale ``k/ε`` on the number of units, ``k`` the
  keys one unit can change; kept if at least the smallest threshold τ with
  ``P(1 + Z ≥ τ) ≤ δ_k``, ``δ_k = 1 − (1 − δ)^{1/k}`` (Korolova et al. 2009; the same form as
  the threshold ``1 − (k/ε) ln(2δ_k)`` for continuous noise).
* ``"gaussian"``: the weighted Gaussian of Gopi, Gulhane, Kulkarni, Shen, Shokouhi and Yekhanin
  (2020, "Differentially private set union", ICML, Algorithm 3 with ℓ2 weights): each unit with
  ``t ≤ L0`` keys gives each of them weight ``1/√t``, so the vector of per-key weights has ℓ2
  sensitivity **1** — the noise is calibrated to that 1, not to √L0 on top of the weighting (the
  bug that doubles σ at L0 = 4). Weights are fixed-point ``floor(2^20/√t)`` so that both engines
  sum them exactly; exact discrete Gaussian noise of ``ρ``-zCDP (CKS 2020) is (ε, δ/2)-DP and the
  threshold ``τ = max_t (w_t + m_t + 1)``, ``P(Z > m_t) ≤ 1 − (1 − δ/2)^{1/t}``, keeps a key that
  only one unit holds with probability at most δ/2 however many keys that unit has.
* ``"count"``: no noisy quantity of its own. The query's released row count (``count()``), with
  its exact discrete Laplace noise of scale ``b = Δ₁/ε`` (Δ₁: rows one unit can add over all
  keys), is itself thresholded: a key is released, with all its aggregates, iff its noisy count
  is at least τ, the smallest integer with ``k · P(Z ≥ τ − c) ≤ δ`` (``c``: rows one unit can
  add to one key, ``k``: keys it can add). The thresholded Laplace histogram of Korolova,
  Kenthapadi, Mishra and Ntoulas (2009, "Releasing search queries and clicks privately") and
  Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo and Gipson (2020, "Differentially private
  SQL with bounded user contribution"): for neighbours D ⊂ D' = D + one unit, on the keys of both
  the noisy counts (and every other noisy aggregate) are ε-DP, the Laplace mechanism on the
  vector; a key only D' has holds ≤ c of the unit's rows, so some such key passes with
  probability ≤ ``k · P(Z ≥ τ − c) ≤ δ``; outside that event the outputs are post-processing of
  the ε-DP vector, so the release is (ε, δ)-DP — the whole ε pays for the counts, none is split
  off to a separate selection count. Add/remove neighbours only.

Keys are decided independently, so a released key set reveals nothing beyond these guarantees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.accounting import ApproxDPEvent, Event
from dpkit.accounting._costs import rho_for
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._tails import (
    discrete_gaussian_quantile,
    discrete_gaussian_upper_tail,
    discrete_laplace_upper_tail,
)
from dpkit.noise import discrete_gaussian, discrete_laplace, sampled_sigma
from dpkit.noise._discrete import DLAP_MAX_NUMERATOR
from dpkit.noise._scales import rational_at_least

__all__ = [
    "METHODS",
    "WEIGHT_BITS",
    "KeySelection",
    "count_threshold",
    "key_selection",
    "truncated_geometric_probabilities",
    "weights",
]

METHODS = ("gaussian", "laplace", "truncated_geometric", "count")
WEIGHT_BITS = 20
_FLOAT_SLACK = 2.0**-50  # covers P(U < p) = ceil(p·2^53)/2^53 and rounding in the recursion
# (times e^ε where an error is multiplied by e^ε: see key_selection)


def truncated_geometric_probabilities(epsilon: float, delta: float) -> np.ndarray[Any, Any]:
    """``p(0), p(1), …`` up to the first ``n`` with ``p(n) = 1`` (Desfontaines et al. 2022).

    >>> p = truncated_geometric_probabilities(1.0, 1e-5)
    >>> float(p[0]), float(p[1]), float(p[-1])
    (0.0, 1e-05, 1.0)
    """
    e, em = math.exp(epsilon), math.exp(-epsilon)
    out = [0.0]
    while out[-1] < 1.0:
        prev = out[-1]
        out.append(min(1.0, e * prev + delta, 1.0 + em * (prev + delta - 1.0)))
        if len(out) > 50_000_000:  # pragma: no cover - ε/δ are validated well before this
            raise PrivacyParameterError("epsilon is too small for truncated-geometric selection.")
    return np.asarray(out)


def weights(max_groups: int) -> list[int]:
    """Fixed-point weights ``floor(2^20/√t)`` for t = 1 … L0 (index 0 unused)."""
    return [0] + [math.isqrt((1 << (2 * WEIGHT_BITS)) // t) for t in range(1, max_groups + 1)]


@dataclass(frozen=True)
class KeySelection:
    """A calibrated key-selection mechanism (see the module notes)."""

    method: str
    epsilon: float
    delta: float
    keys_per_unit: int  # k: keys one neighbouring change can touch
    scale: Fraction = Fraction(0)  # Laplace b or Gaussian σ, integer units
    threshold: int = 0
    probabilities: tuple[float, ...] = field(default=(), repr=False)

    @property
    def event(self) -> Event:
        if self.method == "count":  # pragma: no cover - noise_plan builds the joint event
            raise PrivacyParameterError("a count threshold is paid with its count's noise.")
        # (no relation here: the query's release declares its table's at the charge)
        return ApproxDPEvent(epsilon=self.epsilon, delta=self.delta)

    def describe(self) -> str:
        if self.method == "truncated_geometric":
            n = len(self.probabilities) - 1
            return (
                f"truncated geometric, a key held by n units kept w.p. p(n); "
                f"p(1)={self.delta:.3g}, "
                f"p(n)=1 from n={n}"
            )
        if self.method == "count":
            return (
                f"threshold on the released count itself (its discrete Laplace noise, b "
                f"{float(self.scale):.6g}): kept if the noisy count >= {self.threshold}"
            )
        if self.method == "laplace":
            return (
                f"laplace threshold on units: scale {float(self.scale):.6g}, "
                f"threshold {self.threshold}"
            )
        # the weights are integers 2^WEIGHT_BITS/sqrt(t) (t: keys a unit keeps), shown in units of
        # one unit's weight (1 for a unit with one key), not in the integer grid
        one = float(1 << WEIGHT_BITS)
        return (
            f"gaussian threshold on weights 1/sqrt(t) per unit (t: its keys): sigma "
            f"{float(self.scale) / one:.6g}, threshold {self.threshold / one:.6g}"
        )

    def keep_probability(self, units: int, *, keys_per_unit: int = 1) -> float:
        """Probability that a key held by ``units`` privacy units is released (public only).

        Each of those units holds ``keys_per_unit`` keys after bounding (its weight per key is
        ``2^20/√t`` for the weighted Gaussian; the other methods count units). The same
        thresholds and exact noise as :meth:`keep`.
        """
        c = max(0, int(units))
        if self.method == "truncated_geometric":
            return self.probabilities[min(c, len(self.probabilities) - 1)]
        if c == 0:
            return 0.0
        if self.method in ("laplace", "count"):
            # count: a key held by c units has at least c rows, so this is a lower bound
            return discrete_laplace_upper_tail(float(self.scale), self.threshold - c)
        t = min(max(1, int(keys_per_unit)), max(1, self.keys_per_unit))
        w = c * weights(t)[t]
        return discrete_gaussian_upper_tail(float(self.scale), self.threshold - w)

    def keep(self, units: np.ndarray[Any, Any], weight: np.ndarray[Any, Any], gen: Any) -> Any:
        """Which candidate keys are released (call only after the budget is charged)."""
        n = units.size
        if n == 0:
            return np.zeros(0, dtype=bool)
        if self.method == "truncated_geometric":
            p = np.asarray(self.probabilities)
            idx = np.minimum(units.astype(np.int64), p.size - 1)
            return gen.random(n) < p[idx]
        if self.method == "count":  # pragma: no cover - the finish thresholds the noisy count
            raise PrivacyParameterError("a count threshold reads the released count's noise.")
        if self.method == "laplace":
            z = np.asarray(discrete_laplace(self.scale, size=n, rng=gen))
            return units.astype(np.int64) + z >= self.threshold
        z = np.asarray(discrete_gaussian(self.scale, size=n, rng=gen))
        return weight.astype(np.int64) + z >= self.threshold


def count_threshold(scale: Fraction, *, per_key: int, keys: int, delta: float) -> int:
    """The smallest τ with ``keys · P(Z ≥ τ − per_key) ≤ delta`` for Z discrete Laplace of
    ``scale`` (integer units): a key that one unit alone adds, with at most ``per_key`` rows,
    passes the count threshold with probability at most ``delta / keys`` (module notes).

    >>> count_threshold(Fraction(3), per_key=3, keys=3, delta=1e-5)
    40
    """
    delta_k = delta / keys - _FLOAT_SLACK
    if delta_k <= 0:
        raise PrivacyParameterError(
            "delta is too small for a count threshold (float sampling error); use a larger delta."
        )
    return per_key + _tail_index(float(scale), delta_k)


def _tail_index(scale: float, target: float) -> int:
    """The smallest ``m ≥ 1`` with ``P(Z ≥ m) ≤ target`` for Z discrete Laplace of ``scale``."""
    r = math.exp(-1.0 / scale)
    # P(Z ≥ m) = e^{−m/b} / (1 + r) for m ≥ 1, so m ≥ −b · ln(target · (1 + r)): solved with b
    # itself, not ln r (for a wide noise r rounds to within 2^-53 of 1 and ln r is off by a
    # relative 1e-4 at b = 1e12, 25% at b = 4e15: too low a threshold, or one-step corrections
    # walked for hours); then checked against the tail itself
    m = max(1, math.ceil(-scale * (math.log(target) + math.log1p(r))))
    while m > 1 and discrete_laplace_upper_tail(scale, m - 1) <= target:
        m -= 1
    while discrete_laplace_upper_tail(scale, m) > target:
        m += 1
    return m


def key_selection(
    method: str, *, epsilon: float, delta: float, max_groups: int, replace: bool
) -> KeySelection:
    """Calibrate ``method`` to (ε, δ) for units holding at most ``max_groups`` keys each."""
    if method not in METHODS:
        raise PrivacyParameterError(f"key selection must be one of {METHODS}, got {method!r}.")
    if delta <= 0:
        raise PrivacyParameterError(
            "private key selection needs delta > 0 (a key held by one unit must have a chance "
            "of being released); pass delta, or give public keys."
        )
    k = max_groups * (2 if replace else 1)
    if method == "count":
        if replace:
            raise PrivacyParameterError(
                "selection='count' is for add/remove neighbours; use 'gaussian' or 'laplace'."
            )
        # calibrated with the count's noise by noise_plan (count_threshold)
        return KeySelection(method, 0.0, delta, k)
    if method == "truncated_geometric":
        if k != 1:
            raise PrivacyParameterError(
                "truncated-geometric selection is for one group per unit under add/remove "
                "neighbours (max_groups=1); use 'gaussian' or 'laplace'."
            )
        # P(U < p) exceeds p by up to 2^-53 and the recursion rounds; in the (ε, δ) condition
        # 1 − p(n−1) ≤ e^ε (1 − p(n)) + δ those errors are multiplied by e^ε, so the δ shaved
        # off grows with e^ε (a flat 2^-50 left δ short by ~1e-14 at ε = 6).
        slack = _FLOAT_SLACK * math.exp(min(max(epsilon, 0.0), 700.0))
        if slack >= delta / 2:
            raise PrivacyParameterError(
                "the selection's epsilon is too large for truncated-geometric selection with "
                "this delta (float sampling error); use a smaller epsilon or selection='laplace'."
            )
        p = truncated_geometric_probabilities(epsilon, delta - slack)
        return KeySelection(method, epsilon, delta, k, probabilities=tuple(p.tolist()))
    if method == "laplace":
        scale = Fraction(k) / Fraction(epsilon)
        # the sampler would refuse a scale this wide only when drawing, after the charge
        rational_at_least(scale, "selection scale", max_numerator=DLAP_MAX_NUMERATOR)
        delta_k = -math.expm1(math.log1p(-delta) / k) - _FLOAT_SLACK
        # P(Z ≥ m) = r^m / (1 + r) for m ≥ 1; the key of a lone unit has 1 + Z ≥ τ iff Z ≥ τ − 1.
        if delta_k <= 0:
            raise PrivacyParameterError(
                "delta is too small for Laplace key selection (float sampling error); use a "
                "larger delta."
            )
        return KeySelection(
            method, epsilon, delta, k, scale, threshold=1 + _tail_index(float(scale), delta_k)
        )

    sens = float((1 << WEIGHT_BITS) * (2 if replace else 1))
    rho = rho_for(epsilon, delta / 2.0)
    sigma = sampled_sigma(math.nextafter(sens / math.sqrt(2.0 * rho), math.inf))
    w = weights(max_groups)
    tau = 0
    for t in range(1, max_groups + 1):
        delta_t = -math.expm1(math.log1p(-delta / 2.0) / t) - _FLOAT_SLACK
        m_t = discrete_gaussian_quantile(sigma, 2.0 * delta_t)
        tau = max(tau, w[t] + m_t + 1)
    return KeySelection(method, epsilon, delta, k, Fraction(sigma), threshold=tau)
