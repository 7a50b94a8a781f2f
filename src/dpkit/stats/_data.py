"""Checking the data and the bounds a statistic is given, before anything is computed."""

from __future__ import annotations

import math
import numbers

import numpy as np
import numpy.typing as npt

from dpkit._messages import dtype_name
from dpkit._missing import Missing, handle_missing, object_to_float
from dpkit.errors import DataError

__all__ = [
    "FloatArray",
    "as_matrix",
    "as_vector",
    "check_bounds",
    "check_n",
    "object_records",
    "records",
    "refuse_empty_public",
]

FloatArray = npt.NDArray[np.float64]


def object_records(items: object, refusal: str) -> npt.NDArray[np.object_]:
    """``items`` as a 1-d object array, one element per record, nested values kept whole.

    NumPy would read a list of records by their shapes and types together (one ragged or text
    record changes how every other is read); this reads each record alone. ``refusal`` is the
    message when ``items`` is not a sequence (a public property of the argument, not of a value).
    """
    try:
        seq = list(items)  # type: ignore[call-overload]
    except TypeError:
        raise DataError(refusal) from None
    arr = np.empty(len(seq), dtype=object)
    for i, v in enumerate(seq):
        arr[i] = v
    return arr


def _as_float_array(x: object, name: str) -> FloatArray:
    """A plain (base-class) float64 ndarray of the data, whatever array-like was given.

    Every input is converted to a base-class ``numpy.ndarray``: a subclass may redefine ``min``,
    ``max``, ``sum`` or ``clip`` (a ``numpy.ma.MaskedArray`` ignores masked entries in ``min`` and
    ``max`` while its buffer still holds them), and clamping must see exactly the values that are
    added. Masked arrays are refused rather than silently filled or compressed: which of the two
    is meant is the caller's decision (``x.compressed()`` drops the masked records, ``x.filled(v)``
    replaces them), and either choice changes the statistic.
    """
    if x is None:
        raise DataError(f"{name} is None; pass a 1-d array of numbers.")
    if isinstance(x, np.ma.MaskedArray):
        raise DataError(
            f"{name} is a masked array; decide what the masked records mean first: "
            f"{name}.compressed() drops them, {name}.filled(value) replaces them."
        )
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError, OverflowError):
        # the exception's text may quote a record: never pass it on
        raise DataError(
            f"{name} could not be read as an array of numbers (ragged rows or mixed types?)."
        ) from None
    if type(arr) is not np.ndarray:  # pragma: no cover - asarray returns the base class
        arr = np.array(arr, subok=False)
    if arr.dtype.kind in "US" and not isinstance(x, np.ndarray):
        # A list's type is inferred from its values (one string makes every number a string):
        # no declared type, so read it element by element like any untyped container.
        arr = np.asarray(x, dtype=object)
    if arr.dtype == object:
        # No declared type (a list with a None, say): each element that is not a real number is
        # missing (NaN), and the caller's ``missing=`` policy decides; refusing here would make
        # the outcome depend on one record's value (a number or not).
        return object_to_float(arr)
    if arr.dtype.kind not in "biuf":  # a declared non-numeric type: the schema, public
        raise DataError(
            f"{name} must be numeric (got dtype {dtype_name(arr.dtype)}); convert the column to "
            "numbers first."
        )
    if arr.dtype != np.float64:
        arr = arr.astype(np.float64)
    return arr


def as_vector(x: object, name: str = "x") -> FloatArray:
    """A 1-d float64 base-class array (missing values are checked while aggregating, in one pass).

    An empty array is valid: under add/remove neighbours the empty dataset and a one-record
    dataset are neighbours, so a refusal would be an unprotected output that reveals emptiness.
    Statistics answer it with noise (and refuse only where the record count is public and the
    statistic undefined, see :func:`refuse_empty_public`).
    """
    arr = _as_float_array(x, name)
    if arr.ndim != 1:
        raise DataError(
            f"{name} must be 1-d, got shape {arr.shape}; pass one column at a time (or use "
            "cov/corr/histogram for several columns)."
        )
    return arr


def as_matrix(x: object, name: str = "x") -> FloatArray:
    """A 2-d float64 array of shape (records, columns); a 1-d array is one column.

    Zero records is valid (see :func:`as_vector`); zero columns is not.
    """
    arr = _as_float_array(x, name)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise DataError(f"{name} must be 1-d or 2-d (records × columns), got shape {arr.shape}.")
    if arr.shape[1] == 0:
        raise DataError(f"{name} has no columns (shape {arr.shape}); pass at least one column.")
    return arr  # missing values are the caller's (``missing=``): see dpkit._missing


def refuse_empty_public(size: int, statistic: str) -> None:
    """Refuse a statistic that is undefined on no records, when the record count is public.

    Under replace-one neighbours (or with a public ``n``) the size is not private, so refusing
    an empty dataset reveals nothing; under add/remove a caller must answer it with noise.
    """
    if size == 0:
        raise DataError(
            f"x is empty and the number of records is public here (replace-one neighbours), so "
            f"the {statistic} of no records is undefined; nothing was charged."
        )


def check_bounds(bounds: object, name: str = "bounds") -> tuple[float, float]:
    """A finite pair ``(lower, upper)`` with ``lower < upper``, given by the user.

    dpkit never reads bounds from the data (that leaks the extremes); users with no bounds can
    estimate them privately with :func:`dpkit.stats.bounds`.
    """
    if bounds is None:
        raise DataError(
            f"{name} are required: give (lower, upper) from domain knowledge, or estimate them "
            "privately with dpkit.stats.bounds(x, epsilon=...); dpkit never reads them from data."
        )
    try:
        pair: tuple[object, ...] = tuple(bounds)  # type: ignore[call-overload, arg-type, unused-ignore]
        if len(pair) != 2:
            raise ValueError
    except (TypeError, ValueError):
        raise DataError(f"{name} must be a pair (lower, upper), got {bounds!r}.") from None
    out: list[float] = []
    for v in pair:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise DataError(f"{name} must be two real numbers, got {bounds!r}.")
        f = float(v)
        if not math.isfinite(f):
            raise DataError(f"{name} must be finite, got {bounds!r}.")
        if f != 0 and not 2.0**-500 < abs(f) < 2.0**500:
            raise DataError(f"{name} {bounds!r} are out of the supported range (2^-500, 2^500).")
        out.append(f)
    if not out[0] < out[1]:
        raise DataError(
            f"{name} must satisfy lower < upper, got {bounds!r}"
            + (" (reversed? swap them)." if out[0] > out[1] else ".")
        )
    return out[0], out[1]


def check_n(n: object) -> int | None:
    """A public record count given by the user (``None`` when unknown)."""
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, numbers.Integral | np.integer) or int(n) < 1:
        raise DataError(f"n must be a positive int (the public number of records), got {n!r}.")
    return int(n)


def records(x: object, name: str = "x", *, missing: Missing = "raise") -> int:
    """The number of records (rows) of a 1-d or 2-d array of numbers, after the missing policy."""
    arr = handle_missing(as_matrix(x, name), missing, name)
    return int(arr.shape[0])
