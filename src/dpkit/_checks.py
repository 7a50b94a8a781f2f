"""Argument checks shared by every layer: one wording per mistake, and a fix in each message."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np

from dpkit.errors import PrivacyParameterError

__all__ = [
    "Rational",
    "check_delta",
    "check_epsilon",
    "check_positive",
    "check_probability",
    "check_size",
    "exact_fraction",
]

Rational = int | float | Fraction
"""A real parameter given exactly: an int, a Fraction, or a float (taken at its exact value)."""


def _real(value: object, name: str) -> float:
    if value is None:
        raise PrivacyParameterError(f"{name} is required; got None.")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PrivacyParameterError(f"{name} must be a real number, got {type(value).__name__}.")
    try:
        x = float(value)
    except OverflowError:  # an int or Fraction beyond every float: as large as infinity
        x = math.inf if value > 0 else -math.inf  # type: ignore[operator]
    if math.isnan(x):
        raise PrivacyParameterError(f"{name} is NaN; give a finite positive number.")
    return x


def check_positive(value: object, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float after checking it is finite and positive (or zero if allowed)."""
    x = _real(value, name)
    if math.isinf(x):
        raise PrivacyParameterError(f"{name} is infinite; give a finite number.")
    if x < 0 or (x == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise PrivacyParameterError(f"{name} must be {bound}, got {x!r}.")
    return x


def check_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """ε must be finite and > 0 (ε = inf promises nothing, ε ≤ 0 is impossible)."""
    x = _real(epsilon, name)
    if math.isinf(x):
        raise PrivacyParameterError(
            f"{name}=inf gives no privacy at all; choose a finite {name} (typically 0.1 to 10)."
        )
    if x <= 0:
        raise PrivacyParameterError(
            f"{name} must be > 0, got {x!r}; smaller {name} means more privacy and more noise."
        )
    return x


def check_delta(delta: object, name: str = "delta", *, allow_zero: bool = True) -> float:
    """δ must lie in [0, 1) (or (0, 1) when ``allow_zero`` is false)."""
    x = _real(delta, name)
    if not 0 <= x < 1 or (x == 0 and not allow_zero):
        lo = "[0" if allow_zero else "(0"
        raise PrivacyParameterError(
            f"{name} must be in {lo}, 1), got {x!r}; choose {name} well below 1/n, "
            "e.g. 1e-6 for a million records."
        )
    return x


def check_probability(value: object, name: str, *, low_open: bool = True) -> float:
    """A probability in (0, 1] (or [0, 1] when ``low_open`` is false)."""
    x = _real(value, name)
    if not (0 < x <= 1 if low_open else 0 <= x <= 1):
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise PrivacyParameterError(f"{name} must be in {interval}, got {x!r}.")
    return x


def exact_fraction(value: object, name: str) -> Fraction:
    """Convert a positive finite int, Fraction or float to the exact :class:`Fraction` it equals.

    Floats are converted at their exact binary value, so nothing is rounded in either direction.
    """
    if isinstance(value, Fraction):
        if value <= 0:
            raise PrivacyParameterError(f"{name} must be positive, got {value}.")
        return value
    check_positive(value, name)
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, np.floating):  # its own exact value (a long double is not a double)
        num, den = value.as_integer_ratio()
        return Fraction(int(num), int(den))
    return Fraction(float(value))  # type: ignore[arg-type]


def check_size(size: object) -> tuple[int, ...]:
    """Normalise a ``size=`` argument (None, a non-negative int, or a tuple of them) to a shape."""
    if size is None:
        return ()
    items = size if isinstance(size, tuple | list) else (size,)
    shape: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Integral | np.integer):
            raise PrivacyParameterError(
                f"size must be an int or a tuple of ints, got {size!r}; e.g. size=1000."
            )
        if int(item) < 0:
            raise PrivacyParameterError(f"size must be non-negative, got {size!r}.")
        shape.append(int(item))
    return tuple(shape)
