"""What an event costs an accountant, exactly, and a memo of such pure results by identity.

An event's pure ε or zCDP ρ is the exact (``Fraction``) sum over its leaves of each leaf's
bound (:mod:`._bounds`); an infinite one (Laplace of scale 5e-324) fits no budget. Costs are
pure functions of frozen events, so an accountant remembers them — for the event *object*
(:class:`IdentityMemo`), never for an equal one.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar, cast

from dpkit.accounting._bounds import pure_epsilon, zcdp_rho
from dpkit.accounting._events import Event, flatten
from dpkit.accounting._guarantees import zcdp_epsilon
from dpkit.errors import PrivacyParameterError

__all__ = [
    "COSTS",
    "MEMO_SIZE",
    "IdentityMemo",
    "InfiniteCost",
    "memoised",
    "pure_cost_of",
    "rho_cost",
    "rho_for",
]

MEMO_SIZE = 4096
"""Entries an :class:`IdentityMemo` holds before it is cleared (and rebuilt as it is used)."""

_V = TypeVar("_V")


class InfiniteCost(Exception):
    """An event whose cost (ε or ρ) is infinite in floating point: it fits no budget."""


# A pure function of two floats, asked again on every query that weighs Laplace against Gaussian
# noise (each call is a bisection over ~45 numerical minimisations): remembered.
@functools.lru_cache(maxsize=4096)
def rho_for(epsilon: float, delta: float) -> float:
    """The largest ρ (to 1e-12 relative, rounded down) whose CKS conversion is within (ε, δ)."""
    lo, hi = 0.0, epsilon
    while zcdp_epsilon(hi, delta) <= epsilon:  # pragma: no cover - ε(ρ) ≥ ρ, so never
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if zcdp_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return lo


def rho_cost(event: Event) -> Fraction:
    """The exact sum of the zCDP ρ of ``event``'s leaves (raises if one has no ρ)."""
    total = Fraction(0)
    for leaf, count in flatten(event):
        r = zcdp_rho(leaf)
        if r is None:
            raise PrivacyParameterError(
                f"{type(leaf).__name__} has no zCDP bound ({leaf!r}); use an ApproxDP budget "
                "with method='basic'."
            )
        if not math.isfinite(r):
            raise InfiniteCost
        total += count * Fraction(r)
    return total


def pure_cost_of(event: Event) -> Fraction | None:
    """The exact sum of the pure ε of ``event``'s leaves, or None if one is not pure ε-DP."""
    total = Fraction(0)
    for leaf, count in flatten(event):
        pe = pure_epsilon(leaf)
        if pe is None:
            return None
        if not math.isfinite(pe):
            raise InfiniteCost
        total += count * Fraction(pe)
    return total


class IdentityMemo(dict[Any, tuple[Any, ...]]):
    """Pure results remembered for objects themselves, never for equal ones.

    A key holds the ``id`` of each object the result depends on (with any plain values); the
    entry keeps those objects alive (so their ids are not reused while remembered) followed by
    the result, and a hit is confirmed by identity. Two objects that compare equal but differ
    (``1`` and ``True``, ``-0.0`` and ``0.0`` inside an event) therefore never share a result.
    Bounded: cleared when full. Errors are not remembered (``compute`` raises through).

    >>> memo = IdentityMemo()
    >>> a, b = [1.0], [1.0]
    >>> memo.remember((id(a),), (a,), lambda: "a's"), memo.remember((id(b),), (b,), lambda: "b's")
    ("a's", "b's")
    """

    def remember(
        self, key: Any, objects: tuple[Any, ...], compute: Callable[..., _V], *args: Any
    ) -> _V:
        """``compute(*args)``, remembered under ``key`` (which holds the ids of ``objects``)."""
        hit = self.get(key)
        if hit is not None and all(map(operator.is_, hit, objects)):
            return cast(_V, hit[-1])
        value = compute(*args)
        if len(self) >= MEMO_SIZE:
            self.clear()
        self[key] = (*objects, value)
        return value


COSTS = IdentityMemo()
"""Costs remembered per (cost function, event object)."""

_C = TypeVar("_C")


def memoised(cost: Callable[[Event], _C], event: Event) -> _C:
    """``cost(event)``, remembered for the event object itself (:class:`IdentityMemo`).

    A cost is a pure function of an event (a frozen dataclass validated when it is made), and
    a service charges the very same event object for every identical query (plans are
    memoised).
    """
    return COSTS.remember((cost, id(event)), (event,), cost, event)
