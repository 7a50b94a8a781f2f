"""Privacy guarantees (pure DP, approximate DP, zCDP), neighbouring relations and conversions.

A guarantee is a frozen value describing what a mechanism (or a whole interaction) promises about
any two neighbouring datasets. Conversions only ever go in the safe direction: the guarantee they
return is implied by the one they start from.
"""

from __future__ import annotations

import decimal
import enum
import math
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import numpy as np
from scipy import optimize

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit.accounting._budget import RESOLUTION
from dpkit.errors import PrivacyParameterError

__all__ = [
    "ZCDP",
    "ApproxDP",
    "Guarantee",
    "Neighbouring",
    "PureDP",
    "group_privacy",
    "zcdp_delta",
    "zcdp_epsilon",
]


class Neighbouring(enum.Enum):
    """Which datasets count as neighbours.

    ``ADD_REMOVE`` (the default everywhere): one dataset is the other with one privacy unit added
    or removed ("unbounded" neighbours, Kamath 2020 §"bounded vs unbounded"). ``REPLACE``: one
    unit's data are replaced by other data ("bounded" neighbours); a replacement is a removal
    followed by an addition, so sensitivities under ``REPLACE`` are up to twice those under
    ``ADD_REMOVE``.

    Examples
    --------
    >>> Neighbouring.ADD_REMOVE.value
    'add_remove'
    """

    ADD_REMOVE = "add_remove"
    REPLACE = "replace"


_G = TypeVar("_G", bound="Guarantee")


def _unchecked(cls: type[_G], *, shown: str | None = None, **values: float) -> _G:
    """Build a guarantee without validation: used for zero spends and exhausted remainders.

    ``shown="up"`` (an amount spent) or ``"down"`` (an amount remaining) makes its repr round
    each value in the safe direction to a short decimal; the fields keep the exact floats.
    """
    obj = object.__new__(cls)
    for key, value in values.items():
        object.__setattr__(obj, key, float(value))
    if shown is not None:
        object.__setattr__(obj, "_shown", shown)
    return obj


_SHOWN_TOLERANCE = 1e-6
"""Relative distance a displayed value may be from the exact one, on the safe side: more than
the margins the releases keep (a frame query pays ε·(1 − 10⁻⁹) and a little less), so that a
spend of 0.499999997 reads 0.5; a reader comparing amounts needs no more than six digits."""

_SHOWN_SLACK = float(RESOLUTION)
"""Relative distance it may be on the unsafe side: the resolution of the budget arithmetic
(:mod:`dpkit.accounting._budget`), within which amounts are counted as the decimal written."""


def shown(value: float, direction: str) -> str:
    """The shortest decimal within a relative 1e-6 of ``value`` that does not pass it in the
    unsafe direction (``"up"``: not below it; ``"down"``: not above it), as a float repr.

    The accounting keeps safe-side margins of ~1e-12 (a spend may read 0.7499999999993179);
    shown raw they look like errors. Values the budget arithmetic counts as equal (within its
    relative resolution of 2⁻⁵⁰) count as not passing, so 0.30000000000000004 shows as 0.3.

    >>> shown(0.7499999999993179, "up"), shown(0.2500000000006821, "down"), shown(0.1, "up")
    ('0.75', '0.25', '0.1')
    >>> shown(0.7499, "up"), shown(0.7499, "down"), shown(0.30000000000000004, "up")
    ('0.7499', '0.7499', '0.3')
    >>> shown(0.74990000001, "up")   # 0.7499 would be below it by more than the slack
    '0.7499001'
    >>> shown(0.499999997, "up"), shown(0.123456789, "down")
    ('0.5', '0.1234567')
    """
    if not math.isfinite(value) or value == 0.0:
        return repr(value)
    exact = decimal.Decimal(value)
    directed = decimal.ROUND_CEILING if direction == "up" else decimal.ROUND_FLOOR
    for digits in range(1, 18):
        for mode in (decimal.ROUND_HALF_EVEN, directed):
            candidate = float(decimal.Context(prec=digits, rounding=mode).plus(exact))
            if direction == "up":
                safe = candidate >= value * (1.0 - _SHOWN_SLACK)
            else:
                safe = candidate <= value * (1.0 + _SHOWN_SLACK)
            if safe and abs(candidate - value) <= _SHOWN_TOLERANCE * abs(value):
                return repr(candidate)
    return repr(value)  # pragma: no cover - 17 digits always give the value itself


class Guarantee:
    """Base class of :class:`PureDP`, :class:`ApproxDP` and :class:`ZCDP`.

    An accountant's ``spent`` (``remaining``) shows its values rounded up (down) to a short
    decimal in its repr; the fields (``.epsilon``, ``.delta``, ``.rho``) hold the exact floats.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        direction = self.__dict__.get("_shown")
        parts = []
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            parts.append(f"{f.name}={repr(v) if direction is None else shown(v, direction)}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def implies(self, other: Guarantee) -> bool:
        """True when this guarantee is at least as strong as ``other`` (a sufficient check)."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True, repr=False)
class PureDP(Guarantee):
    """Pure ε-differential privacy: P[M(D) ∈ S] ≤ e^ε P[M(D') ∈ S] for all neighbours D, D'.

    Dwork & Roth (2014, Definition 2.4); Dwork, McSherry, Nissim & Smith
    (2006).

    Parameters
    ----------
    epsilon : float
        Finite, > 0.

    Examples
    --------
    >>> PureDP(epsilon=1.0).to_zcdp()
    ZCDP(rho=0.5)
    >>> PureDP(epsilon=0.5).implies(ApproxDP(epsilon=1.0, delta=1e-6))
    True
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    def to_zcdp(self) -> ZCDP:
        """ε-DP implies (ε²/2)-zCDP (Bun & Steinke 2016, Proposition 1.4)."""
        return ZCDP(rho=self.epsilon**2 / 2)

    def to_approx(self, delta: float = 0.0) -> ApproxDP:
        """ε-DP is (ε, δ)-DP for every δ ≥ 0."""
        return ApproxDP(epsilon=self.epsilon, delta=check_delta(delta))

    def implies(self, other: Guarantee) -> bool:
        if isinstance(other, PureDP | ApproxDP):
            return self.epsilon <= other.epsilon
        if isinstance(other, ZCDP):
            return self.epsilon**2 / 2 <= other.rho
        raise TypeError(f"cannot compare a guarantee with {type(other).__name__}.")


@dataclass(frozen=True, kw_only=True, repr=False)
class ApproxDP(Guarantee):
    """Approximate (ε, δ)-differential privacy: P[M(D) ∈ S] ≤ e^ε P[M(D') ∈ S] + δ.

    The lecture notes "Approximate Differential Privacy"; Dwork,
    Kenthapadi, McSherry, Mironov & Naor (2006).
    Choose δ well below 1/n ("Name & Shame", lecture notes *Approximate Differential Privacy*).

    Parameters
    ----------
    epsilon : float
        Finite, > 0.
    delta : float
        In [0, 1).

    Examples
    --------
    >>> ApproxDP(epsilon=1.0, delta=1e-6)
    ApproxDP(epsilon=1.0, delta=1e-06)
    >>> ApproxDP(epsilon=1.0, delta=1e-6).implies(ApproxDP(epsilon=2.0, delta=1e-5))
    True
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))

    def implies(self, other: Guarantee) -> bool:
        if isinstance(other, ApproxDP):
            return self.epsilon <= other.epsilon and self.delta <= other.delta
        if isinstance(other, PureDP):
            return self.delta == 0 and self.epsilon <= other.epsilon
        if isinstance(other, ZCDP):
            return False
        raise TypeError(f"cannot compare a guarantee with {type(other).__name__}.")


@dataclass(frozen=True, kw_only=True, repr=False)
class ZCDP(Guarantee):
    """ρ-zero-concentrated differential privacy: D_α(M(D) ‖ M(D')) ≤ ρα for every α > 1.

    Bun & Steinke (2016); the "better analysis" pointed to in the "Approximate Differential Privacy"
    notes §"Composition".

    Parameters
    ----------
    rho : float
        Finite, > 0.

    Examples
    --------
    >>> z = ZCDP(rho=0.5)
    >>> round(z.to_approx(delta=1e-5).epsilon, 4)   # Canonne–Kamath–Steinke conversion
    4.7284
    >>> round(z.to_approx(delta=1e-5, method="bun_steinke").epsilon, 4)
    5.2985
    """

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_positive(self.rho, "rho"))

    def to_approx(self, delta: float, *, method: str = "cks") -> ApproxDP:
        """Convert to (ε, δ)-DP.

        ``method="cks"`` (default) is the conversion of Canonne, Kamath & Steinke (2020,
        Corollary 13), never worse than ``"bun_steinke"``: ε = ρ + 2√(ρ log(1/δ)) (Bun & Steinke
        2016, Proposition 1.3).
        """
        d = check_delta(delta, allow_zero=False)
        # ε = 0 is a valid answer (tiny ρ, or δ next to 1) that ApproxDP cannot hold; the
        # smallest positive float is implied by it.
        eps = max(zcdp_epsilon(self.rho, d, method=method), math.ulp(0.0))
        return ApproxDP(epsilon=eps, delta=d)

    def implies(self, other: Guarantee) -> bool:
        if isinstance(other, ZCDP):
            return self.rho <= other.rho
        if isinstance(other, ApproxDP):
            return other.delta > 0 and zcdp_epsilon(self.rho, other.delta) <= other.epsilon
        if isinstance(other, PureDP):
            return False
        raise TypeError(f"cannot compare a guarantee with {type(other).__name__}.")


def _rdp_to_epsilon(rdp: float, alpha: float, log_delta: float) -> float:
    # Balle et al. (2020, Theorem 21) / Canonne–Kamath–Steinke (2020, Proposition 12):
    # (α, ε_α)-RDP ⇒ (ε, δ)-DP with ε = ε_α + log(1 - 1/α) - (log δ + log α)/(α - 1).
    return rdp + math.log1p(-1.0 / alpha) - (log_delta + math.log(alpha)) / (alpha - 1.0)


def zcdp_epsilon(rho: float, delta: float, *, method: str = "cks") -> float:
    """The ε for which ρ-zCDP implies (ε, δ)-DP.

    ``"cks"``: ε = inf over α > 1 of αρ + log(1 - 1/α) - (log δ + log α)/(α - 1) (Canonne, Kamath &
    Steinke 2020, Corollary 13); every α gives a valid bound, so a numerical minimiser can only err
    on the safe side. ``"bun_steinke"``: ρ + 2√(ρ log(1/δ)).

    Examples
    --------
    >>> round(zcdp_epsilon(0.1, 1e-6), 4)
    2.1419
    """
    if method not in ("cks", "bun_steinke"):
        raise PrivacyParameterError(f"method must be 'cks' or 'bun_steinke', got {method!r}.")
    if delta <= 0:
        return math.inf
    if rho <= 0:
        return 0.0
    log_delta = math.log(delta)
    bs = rho + 2.0 * math.sqrt(rho * -log_delta)
    if method == "bun_steinke":
        return bs

    def objective(t: float) -> float:
        alpha = 1.0 + math.exp(t)
        if alpha == 1.0 or not math.isfinite(alpha):  # every α > 1 is valid; these are not
            return math.inf
        return _rdp_to_epsilon(alpha * rho, alpha, log_delta)

    # The optimum α is about 1 + sqrt(log(1/δ)/ρ); search log(α - 1) around it. The guess is
    # kept within the float range (ρ = 1e-300 or δ = 1 − 2⁻⁵³ put it past it), and the objective
    # is infinite where α itself is not representable.
    guess = _clamp(math.log(math.sqrt(-log_delta / rho) + 1e-12), 600.0)
    res = optimize.minimize_scalar(
        objective, bounds=(guess - 20.0, guess + 20.0), method="bounded", options={"xatol": 1e-10}
    )
    best = min(objective(float(res.x)), objective(guess), bs)
    return max(best, 0.0)


def _clamp(x: float, limit: float) -> float:
    return min(max(x, -limit), limit)


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The δ for which ρ-zCDP implies (ε, δ)-DP (Canonne, Kamath & Steinke 2020, Corollary 13).

    δ = inf over α > 1 of exp((α - 1)(αρ - ε)) (1 - 1/α)^α / (α - 1).

    Examples
    --------
    >>> zcdp_delta(0.5, 4.7284) <= 1e-5
    True
    """

    def log_delta(t: float) -> float:
        alpha = 1.0 + math.exp(t)
        if alpha == 1.0 or not math.isfinite(alpha):
            return math.inf
        value = (alpha - 1.0) * (alpha * rho - epsilon + math.log1p(-1.0 / alpha)) - math.log(alpha)
        return math.inf if math.isnan(value) else value

    if rho <= 0:
        return 0.0
    guess = _clamp(math.log(max((epsilon + rho) / (2 * rho), 1e-6)), 600.0)
    res = optimize.minimize_scalar(
        log_delta, bounds=(guess - 20.0, guess + 20.0), method="bounded", options={"xatol": 1e-10}
    )
    best = min(log_delta(float(res.x)), log_delta(guess))
    return 1.0 if best >= 0.0 else math.exp(best)


def _group_scale(factor: int, value: float, name: str) -> float:
    try:
        out = factor * value
    except OverflowError:  # an int factor past the float range
        out = math.inf
    if not math.isfinite(out):
        raise PrivacyParameterError(
            f"group privacy for this group size makes {name} infinite, which promises nothing; "
            "use a smaller group."
        )
    return out


def group_privacy(guarantee: Any, k: int) -> Guarantee:
    """The guarantee for groups of ``k`` privacy units, from the guarantee for one unit.

    Kamath 2020 §"Group privacy"; Dwork & Roth (2014, Theorem 2.2) and Vadhan (2017, Lemma 2.2):
    ε-DP ⇒ kε-DP; (ε, δ)-DP ⇒ (kε, k e^{(k-1)ε} δ)-DP; Bun & Steinke (2016, Proposition 1.9): ρ-zCDP
    ⇒ k²ρ-zCDP.

    Examples
    --------
    >>> group_privacy(PureDP(epsilon=0.5), 3)
    PureDP(epsilon=1.5)
    >>> group_privacy(ZCDP(rho=0.1), 2).rho
    0.4
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise PrivacyParameterError(f"group size k must be a positive integer, got {k!r}.")
    k = int(k)
    if isinstance(guarantee, PureDP):
        return PureDP(epsilon=_group_scale(k, guarantee.epsilon, "epsilon"))
    if isinstance(guarantee, ApproxDP):
        eps_k = _group_scale(k, guarantee.epsilon, "epsilon")
        # log of k e^{(k-1)ε} δ: e^{(k-1)ε} alone overflows long before the product passes 1.
        log_delta = math.log(k) + (k - 1) * guarantee.epsilon + math.log(guarantee.delta or 1.0)
        if guarantee.delta > 0 and log_delta >= 0:
            raise PrivacyParameterError(
                f"group privacy for k={k} gives delta >= 1, which promises nothing; use a smaller "
                "group, a smaller epsilon or a much smaller delta."
            )
        delta = math.exp(log_delta) if guarantee.delta > 0 else 0.0
        return ApproxDP(epsilon=eps_k, delta=delta)
    if isinstance(guarantee, ZCDP):
        return ZCDP(rho=_group_scale(k * k, guarantee.rho, "rho"))
    raise PrivacyParameterError(
        f"group_privacy needs a PureDP, ApproxDP or ZCDP guarantee, got {type(guarantee).__name__}."
    )
