"""Budget arithmetic: the one definition of "does this charge fit", for every budget in dpkit.

The library's :class:`~dpkit.accounting.Accountant` and the curator service's ledger both decide
with these functions (the ledger in integer units of 10⁻¹², the accountant in exact fractions).

The definition
--------------
Amounts (ε, δ or ρ) arrive as floats: decimals someone wrote (``0.05``, whose binary value is
0.05000000000000000277…) or costs computed from a mechanism's parameters (``1.0000000000009097 /
20.000000000018197``). Each is taken at its exact binary value, and then

* a **cost** counts for its value times (1 − 2⁻⁵⁰) (:func:`counted`),
* a **budget** allows its value times (1 + 2⁻⁵⁰) (:func:`allowed`),
* charges **fit** when the sum of what they count for is at most what the budget allows
  (:func:`within`), summed exactly.

The relative 2⁻⁵⁰ (:data:`RESOLUTION`, ≈ 8.9·10⁻¹⁶) forgives the few units in the last place by
which a float differs from the decimal it stands for (at most 2⁻⁵³ relative) or a computed cost
from the ε it was calibrated to; so decimals add up as decimals: 20 charges of 0.05 fit 1.0,
0.1 + 0.2 pays 0.3, a budget of 0.3 pays a query of 0.3. In return, an accepted sequence's exact
sum of costs is at most the budget times (1 + 2⁻⁵⁰)/(1 − 2⁻⁵⁰): above it by a relative
1.8·10⁻¹⁵ at most, never more.

The ledger stores amounts as integers in units of 10⁻¹² (:data:`UNIT`): a cost's counted value
rounded **up** (:func:`cost_units`), a budget's allowed value rounded **down**
(:func:`budget_units`), so the integer sums decide exactly and the units can only refuse more
than the fractions, never accept more. For amounts written with at most 12 decimal places (every
amount the service shows) the two agree exactly; for others (ε = 1/3) the ledger may refuse the
last charge that the fractions would accept. A query is quoted, charged and shown at
:func:`quoted` (:func:`from_units` of its :func:`cost_units`), so the dry run's quote is what
the ledger charges.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "RESOLUTION",
    "UNIT",
    "allowed",
    "budget_units",
    "cost_units",
    "counted",
    "from_units",
    "quoted",
    "within",
]

RESOLUTION = Fraction(1, 2**50)
"""The relative amount forgiven on each side of a comparison (see the module)."""

UNIT = 10**12
"""The ledger's units per 1 of ε or δ."""

_DOWN = 1 - RESOLUTION
_UP = 1 + RESOLUTION
_DOWN_NUM = 2**50 - 1  # _DOWN and _UP over their common denominator 2**50
_UP_NUM = 2**50 + 1


def counted(cost: float | Fraction) -> Fraction:
    """What a cost (or a sum of costs) counts for against a budget: its exact value × (1 − 2⁻⁵⁰).

    >>> counted(0.05) < Fraction(5, 100)   # 0.05 in binary is just above 1/20; it counts below
    True
    """
    return Fraction(cost) * _DOWN


def allowed(budget: float | Fraction) -> Fraction:
    """What a budget allows: its exact value × (1 + 2⁻⁵⁰).

    >>> allowed(0.3) > Fraction(3, 10)   # 0.3 in binary is just below 3/10; it allows above
    True
    """
    return Fraction(budget) * _UP


def within(total_cost: float | Fraction, budget: float | Fraction) -> bool:
    """Whether costs whose exact sum is ``total_cost`` fit ``budget``: the one definition.

    >>> within(20 * Fraction(0.05), 1.0), within(Fraction(0.1) + Fraction(0.2), 0.3)
    (True, True)
    >>> within(Fraction(1) + Fraction(1, 10**13), 1.0)   # beyond the resolution: refused
    False
    """
    # counted(total) <= allowed(budget), cross-multiplied in integers: no Fraction arithmetic
    # (and its gcds) on the path of every charge
    p, q = total_cost.as_integer_ratio()
    m, n = budget.as_integer_ratio()
    return p * _DOWN_NUM * n <= m * _UP_NUM * q


@lru_cache(maxsize=1024, typed=True)
def cost_units(x: float) -> int:
    """A cost in ledger units: :func:`counted` rounded up (never under-charged).

    Remembered per value and type (a service prices the same few amounts over and over).

    >>> cost_units(0.05), cost_units(0.7499999999993179), cost_units(1e-300)
    (50000000000, 750000000000, 1)
    """
    return math.ceil(counted(x) * UNIT)


def budget_units(x: float) -> int:
    """A budget in ledger units: :func:`allowed` rounded down (never over-granted).

    >>> budget_units(0.3), budget_units(1.0), budget_units(1e-300)
    (300000000000, 1000000000000, 0)
    """
    return math.floor(allowed(x) * UNIT)


def from_units(u: int) -> float:
    """Ledger units back to a float, for quotes and display (0.05 for 5·10¹⁰ units).

    >>> from_units(cost_units(0.05))
    0.05
    """
    return u / UNIT


def quoted(cost: float) -> float:
    """What a cost is quoted, charged and shown at: its :func:`cost_units`, back as a float.

    >>> quoted(0.05), quoted(0.1000000000004)
    (0.05, 0.100000000001)
    """
    return from_units(cost_units(cost))
