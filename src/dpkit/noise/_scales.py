"""Turning a user's scale into an exact rational the int64 kernels can use."""

from __future__ import annotations

import math
from fractions import Fraction

from dpkit._checks import exact_fraction
from dpkit.errors import PrivacyParameterError

__all__ = ["rational_at_least"]


def rational_at_least(value: object, name: str, *, max_numerator: int) -> tuple[int, int]:
    """Return ``(a, b)`` with ``a / b >= value``, ``a <= max_numerator`` when possible.

    ``value`` (int, Fraction or float) is taken at its exact value. When its numerator and
    denominator are small it is returned as it is; otherwise it is rounded **up** to
    ``ceil(value · 2**k) / 2**k`` with the largest ``k`` keeping the numerator within
    ``max_numerator``: the relative increase is below ``2 / max_numerator``. Rounding up means
    more noise than asked for, never less, so every privacy guarantee computed from ``value``
    still holds.
    """
    frac = exact_fraction(value, name)
    if frac.numerator <= max_numerator and frac.denominator <= max_numerator:
        return frac.numerator, frac.denominator
    # largest k with ceil(frac * 2**k) <= max_numerator
    k = math.floor(math.log2(max_numerator)) - math.ceil(math.log2(frac)) - 1
    if k >= 0:
        a = math.ceil(frac * (1 << k))
        b = 1 << k
    else:
        a = math.ceil(frac / (1 << -k)) << -k
        b = 1
    if a > max_numerator:
        raise PrivacyParameterError(
            f"{name}={float(frac):.6g} is too large for exact sampling (limit "
            f"{float(max_numerator):.3g}); rescale the query so the noise scale is smaller."
        )
    reduced = Fraction(a, b)
    return reduced.numerator, reduced.denominator
