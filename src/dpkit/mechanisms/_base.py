"""What every mechanism shares: value checks, charging an accountant, shapes."""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._messages import dtype_name, not_numeric
from dpkit.accounting._charge import SupportsCharge, charge_release
from dpkit.errors import DataError, PrivacyParameterError

__all__ = [
    "INT_LIMIT",
    "INT_MAX",
    "FloatArray",
    "IntArray",
    "SupportsCharge",
    "as_shape",
    "charge",
    "check_float_value",
    "check_int_value",
    "check_integer_parameter",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

INT_LIMIT = 2**62
"""Integer query values are clamped to ``[−(INT_LIMIT − 1), INT_LIMIT − 1]``, the range in which
adding noise cannot overflow int64. Clamping is 1-Lipschitz in each coordinate, so two answers
that differ by at most the sensitivity still do: the guarantee holds, and an answer beyond the
range is released as the range's end instead of refused (a refusal would depend on its value)."""

INT_MAX = INT_LIMIT - 1
"""The largest integer answer released as it is (see :data:`INT_LIMIT`)."""


# Every layer charges through the accounting package's one helper (the randomness check is
# there); the names stay importable from here for the layers that import them so.
charge = charge_release


def as_shape(shape: object) -> tuple[int, ...]:
    """Normalise a ``shape=`` parameter: ``()`` for scalars, an int or a tuple of ints."""
    items = shape if isinstance(shape, tuple | list) else (shape,)
    out: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Integral | np.integer):
            raise PrivacyParameterError(
                f"shape must be () for scalars, an int or a tuple of ints, got {shape!r}."
            )
        if int(item) < 1:
            raise PrivacyParameterError(f"shape entries must be positive, got {shape!r}.")
        out.append(int(item))
    return tuple(out)


def check_integer_parameter(value: object, name: str, *, minimum: int = 1) -> int:
    """An integer parameter (a sensitivity of an integer query, a count of categories…)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral | np.integer):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise PrivacyParameterError(f"{name} must be an int, got {value!r}.")
    v = int(value)
    if v < minimum:
        raise PrivacyParameterError(f"{name} must be at least {minimum}, got {v}.")
    return v


def _shape_error(got: tuple[int, ...], want: tuple[int, ...]) -> DataError:
    if want == ():
        hint = f"this mechanism releases scalars; build it with shape={got!r} to release arrays"
    else:
        hint = f"build a mechanism with shape={got!r} for such values"
    return DataError(f"value has shape {got!r} but the mechanism expects {want!r}; {hint}.")


def check_float_value(value: object, shape: tuple[int, ...]) -> FloatArray:
    """A finite float array of exactly ``shape`` (``()`` accepts a Python or NumPy scalar)."""
    if value is None:
        raise DataError("value is None; pass a number or an array of numbers.")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:  # Overflow: an int beyond 1.8e308
        raise DataError(not_numeric("value", exc)) from None
    if arr.shape != shape:
        raise _shape_error(arr.shape, shape)
    if not np.all(np.isfinite(arr)):
        raise DataError(
            "value contains NaN or infinite values; clean or clamp the data before releasing."
        )
    return arr


def _integral(v: numbers.Real | Decimal) -> int:
    """The exact integer value of a non-int number (Fraction, float, NumPy float, Decimal).

    Read through its exact ratio, never through float64: a Fraction or a long double of
    2^60 + 129 would otherwise become 2^60 + 128, the break of object-dtype integers again.
    """
    ratio = getattr(v, "as_integer_ratio", None)
    if ratio is None:  # a Real with no exact ratio: only integers below 2^53 survive float64
        f = float(v)
        if math.isfinite(f) and abs(f) >= 2.0**53:
            raise DataError("value has a non-int entry beyond 2^53; pass Python ints.")
        ratio = f.as_integer_ratio
    try:
        num, den = ratio()
    except (OverflowError, ValueError):  # infinities and NaN have no ratio
        raise DataError(
            "value contains NaN or infinite values; integer queries need integers."
        ) from None
    if den != 1:
        raise DataError(
            "value must hold integers (this mechanism is for counts and other integer "
            "queries); use Laplace or Gaussian for real-valued queries."
        )
    return int(num)


def _exact_ints(raw: npt.NDArray[Any]) -> IntArray:
    """An object array of integers (Python ints, NumPy ints, integral floats) as int64, exactly."""
    out: list[int] = []
    for v in raw.flat:
        if v is None:
            raise DataError("value contains None; pass integers only.")
        if isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Real | Decimal):
            raise DataError(
                f"value must be integer: an entry of type {type(v).__name__} is not a number."
            )
        i = int(v) if isinstance(v, numbers.Integral) else _integral(v)
        out.append(max(-INT_MAX, min(INT_MAX, i)))  # clamped to the range (see INT_LIMIT)
    return np.array(out, dtype=np.int64).reshape(raw.shape)


def check_int_value(value: object, shape: tuple[int, ...]) -> IntArray:
    """An int64 array of exactly ``shape``; floats are accepted only when integral."""
    if value is None:
        raise DataError("value is None; pass an integer or an array of integers.")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:  # pragma: no cover - numpy rarely refuses
        raise DataError(not_numeric("value", exc, "integer")) from None
    if raw.shape != shape:
        raise _shape_error(raw.shape, shape)
    if raw.dtype.kind == "O":
        # Python ints beyond 2^53 must not pass through float64 (2^60 + 129 would become
        # 2^60 + 128): convert entry by entry, exactly.
        raw = _exact_ints(raw)
    if raw.dtype.kind not in "iubf":
        raise DataError(f"value must be integer, got dtype {dtype_name(raw.dtype)}.")
    if raw.dtype.kind == "f":
        if not np.all(np.isfinite(raw)):
            raise DataError("value contains NaN or infinite values; integer queries need integers.")
        if not np.all(raw == np.rint(raw)):
            raise DataError(
                "value must hold integers (this mechanism is for counts and other integer "
                "queries); use Laplace or Gaussian for real-valued queries."
            )
    return _clamp_ints(raw)


def _clamp_ints(raw: npt.NDArray[Any]) -> IntArray:
    """Integral values as int64, each clamped to ``±INT_MAX`` (see :data:`INT_LIMIT`).

    Compared before any cast: a uint64 beyond int64, or a float beyond 2^63, would wrap.
    """
    if raw.dtype.kind == "b":
        return raw.astype(np.int64)
    high = raw >= INT_LIMIT
    low = raw <= -INT_LIMIT if raw.dtype.kind != "u" else np.zeros(raw.shape, dtype=np.bool_)
    if not (high.any() or low.any()):
        return raw.astype(np.int64)
    inside = np.where(high | low, 0, raw).astype(np.int64)
    out: IntArray = np.where(high, INT_MAX, np.where(low, -INT_MAX, inside)).astype(np.int64)
    return out
