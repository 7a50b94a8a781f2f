"""A client's value mapped into a randomizer's declared domain, never refused on its value.

In the local model each user's value goes through a randomizer whose input domain is public:
category codes ``0..k−1`` (frequency oracles, randomized response) or the interval ``[−1, 1]``
(numeric randomizers). A value outside that domain must still give a valid report, and
whether a call succeeds must not depend on a value (a refusal is an unprotected output):

* a number outside ``[−1, 1]`` (±inf included) is clamped to the interval;
* a value that is not a code of the domain (a negative or too large integer, a fraction, ±inf)
  is mapped to the *last* code, ``k − 1``. Its report is then exactly the report of the
  declared value ``k − 1``, so for any two inputs the report distributions are those of two
  in-domain values, and the ε-LDP guarantee (a likelihood ratio of at most ``e^ε`` for every
  pair of inputs and every report) holds unchanged. Reserve code ``k − 1`` for "other" when
  such values are expected, so that the estimate of its share reads as a catch-all.

Only a missing value (NaN, None, a non-number in an untyped list) has no place in either domain:
it is refused before anything is charged (the refusal reveals that one exists). ``missing="drop"``
is refused as a parameter: leaving a user's report out would tell a missing value from every
other with certainty (a batch one report shorter), while these reports hold under replacement of
one user's value, where a present value may be replaced by a missing one. Map missing values to a
declared value first (the catch-all code ``k − 1``, a bound) so that every user sends a report.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpkit._missing import check_missing, object_to_float
from dpkit.errors import DataError

__all__ = ["category_codes", "clamped", "unit_interval"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


_FILL_FIRST = (
    "map missing values to a declared value first (e.g. the catch-all code k - 1 or a bound) "
    "so that every user reports"
)


def _report_policy(missing: object) -> None:
    """The missing policy of a per-user report: ``"raise"`` only (a parameter check)."""
    if check_missing(missing) == "drop":
        raise DataError(
            "missing='drop' would leave a user without a report, and a missing report tells a "
            "missing value from every other (these reports hold under replacement of one user's "
            f"value); {_FILL_FIRST}, or keep missing='raise'."
        )


def _refuse_missing(x: FloatArray, name: str) -> None:
    """Refuse a batch holding a missing value (NaN), before anything is charged."""
    if np.isnan(x).any():
        raise DataError(
            f"{name} contains a missing value (NaN or None); nothing was charged. This refusal "
            f"reveals that a missing value exists: {_FILL_FIRST}."
        )


def _floats(values: object, name: str, what: str) -> FloatArray | IntArray:
    """The values as float64 (or int64 when integer-typed), each non-number made NaN."""
    if values is None:
        raise DataError(f"{name} is None; pass {what}.")
    raw = np.asarray(values)
    if raw.dtype.kind in "US" and not isinstance(values, np.ndarray):
        raw = np.asarray(values, dtype=object)  # a list typed by its values: read each one
    if raw.dtype == object or raw.dtype.kind in "US":
        return object_to_float(np.asarray(raw, dtype=object))
    if raw.dtype.kind in "iu":
        # a uint64 beyond int64 wraps negative: outside anyway. No copy: every caller makes a
        # new array from it (np.where, astype to float)
        return raw.astype(np.int64, copy=False)
    if raw.dtype.kind == "f":
        return raw.astype(np.float64)
    raise DataError(f"{name} must hold numbers ({what}); its type cannot.")


def category_codes(
    values: object, k: int, missing: object = "raise", name: str = "values", *, flat: bool = True
) -> IntArray:
    """Each value as a code in ``0..k−1``; a value that is not one becomes ``k − 1``.

    ``flat``: a scalar is one value and the result is 1-d; otherwise the shape is kept.
    """
    _report_policy(missing)
    raw = _floats(values, name, f"integer codes 0..{k - 1}")
    if flat and raw.ndim == 0:
        raw = raw.reshape(1)
    if flat and raw.ndim != 1:
        raise DataError(f"{name} must be one-dimensional (one value per user), got {raw.ndim}-d.")
    if raw.dtype == np.int64:
        # one comparison: a negative code reads as a huge unsigned one, so both ends fall outside
        inside = raw.view(np.uint64) < k
        return np.where(inside, raw, k - 1)
    x = raw.astype(np.float64)
    _refuse_missing(x, name)
    with np.errstate(invalid="ignore"):
        inside = (x >= 0) & (x < k) & (x == np.rint(x))
    return np.where(inside, x, k - 1).astype(np.int64)


def unit_interval(values: object, missing: object = "raise", name: str = "values") -> FloatArray:
    """Values in ``[−1, 1]``, as a 1-d (or, given 2-d, row-wise) float64 array, clamped.

    A 2-d array is one row per user: a row with a missing value is refused.
    """
    return clamped(values, -1.0, 1.0, missing, name)


def clamped(
    values: object, lo: float, hi: float, missing: object = "raise", name: str = "values"
) -> FloatArray:
    """Values clamped to the declared ``[lo, hi]``, 1-d (or 2-d, one row per user)."""
    _report_policy(missing)
    raw = _floats(values, name, f"numbers in [{lo:g}, {hi:g}]")
    x = raw.astype(np.float64)
    if x.ndim == 0:
        x = x.reshape(1)
    if x.ndim not in (1, 2):
        raise DataError(f"{name} must be a 1-d array of numbers in [{lo:g}, {hi:g}].")
    _refuse_missing(x, name)
    # a per-user map into the declared interval (±inf included): each report is the report of
    # an in-range value, so the ε-LDP bound over every pair of inputs holds as calibrated
    out: FloatArray = np.clip(x, lo, hi)
    return out
