"""Turning a user's scale into an exact rational the int64 kernels can use."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

from dpkit._checks import exact_fraction
from dpkit.errors import PrivacyParameterError

__all__ = ["rational_at_least"]


def rational_at_least(value: object, name: str, *, max_numerator: int) -> tuple[int, int]:
    """Return ``(a, b)`` with ``a / b >= value`` and ``a <= max_numerator``.

    ``value`` (int, Fraction or float) is taken at its exact value. When its numerator is at most
    ``max_numerator`` (and its denominator below 2^62) it is returned as it is; otherwise it is
    rounded **up** to ``ceil(value · 2**k) / 2**k`` with the largest ``k`` keeping the numerator
    within ``max_numerator``: the relative increase is below ``2 / max_numerator``. The result is
    a fixed point: rounding it again returns it unchanged, so the σ or scale a caller reads back
    is exactly the one the sampler uses.

    A function of the exact value alone (checked the same way for every type), so results are
    remembered per ``(type, value, max_numerator)``: a service drawing the same noise scale for
    every answer does the rational arithmetic once. Refusals are not remembered.
    """
    try:
        kind: Any = type(value)  # types are hashable (typeshed's `object.__hash__` says otherwise)
        return _remembered(kind, value, max_numerator)
    except TypeError:  # unhashable (e.g. an array): checked and refused below
        return _rounded(value, name, max_numerator)
    except PrivacyParameterError:  # refused: again, with this caller's name in the message
        return _rounded(value, name, max_numerator)


@lru_cache(maxsize=4096)
def _remembered(kind: Any, value: Any, max_numerator: int) -> tuple[int, int]:
    return _rounded(value, "value", max_numerator)


def _rounded(value: object, name: str, max_numerator: int) -> tuple[int, int]:
    frac = exact_fraction(value, name)
    if frac.numerator <= max_numerator and frac.denominator < 1 << 62:
        return frac.numerator, frac.denominator
    bits = max_numerator.bit_length() - 1  # 2**bits <= max_numerator
    e = frac.numerator.bit_length() - frac.denominator.bit_length()  # 2**(e-1) < frac < 2**(e+1)
    while frac > Fraction(2) ** e:
        e += 1
    # frac · 2**k ≤ 2**bits keeps the ceiling within max_numerator; the denominator stays ≤ 2**61
    # so that the samplers' int64 arithmetic can use it
    k = min(bits - e, 61)
    scaled = frac * Fraction(2) ** k
    a = math.ceil(scaled)
    if k >= 0:
        num, den = a, 1 << k
    else:
        num, den = a << -k, 1
    if num > max_numerator:
        # (a scale beyond every float, e.g. Δ / 5e-324 computed exactly, has no float to show)
        shown = f"{float(frac):.6g}" if frac < Fraction(2) ** 1023 else "(beyond 1.7e308)"
        raise PrivacyParameterError(
            f"{name}={shown} is too large for exact sampling (limit "
            f"{float(max_numerator):.3g}); rescale the query so the noise scale is smaller."
        )
    reduced = Fraction(num, den)
    return reduced.numerator, reduced.denominator
