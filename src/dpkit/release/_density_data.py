"""Checks shared by the density releases: the public box, the records, n, and memory.

Every density in :mod:`dpkit.release` lives on a public box ``Π_k [lo_k, hi_k]`` given by the
user (``bounds=``); nothing is read from the data to set it. Records outside the box are moved to
the nearest face of the box (clamped), a per-record map, so neighbouring datasets stay neighbours
and the sensitivity computed for records inside the box covers them; nothing about how many were
outside is released. They are never refused: a refusal that depends on one record's value would
reveal that value (or the record's presence) for free. Only values that have no place in any box
(NaN) are refused, before anything is charged, and such a refusal reveals that one exists.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.stats._data import _as_float_array, check_bounds

__all__ = [
    "MAX_BYTES",
    "Box",
    "FloatArray",
    "Outside",
    "as_records",
    "check_box",
    "check_memory",
    "check_outside",
    "check_public_n",
    "per_dim_ints",
    "to_unit",
]

FloatArray = npt.NDArray[np.float64]
Box = tuple[tuple[float, float], ...]
Outside = Literal["clamp"]

MAX_BYTES = 1 << 30
"""Largest working array a density release allocates (1 GiB) before refusing, uncharged."""


def check_box(bounds: object) -> Box:
    """``bounds`` as one ``(lo, hi)`` pair per dimension (a single pair means d = 1)."""
    if bounds is None:
        raise DataError(
            "bounds are required: give (lo, hi), or one (lo, hi) per dimension, from domain "
            "knowledge; dpkit never reads them from the data."
        )
    try:
        items = list(bounds)  # type: ignore[call-overload]
    except TypeError:
        raise DataError(f"bounds must be (lo, hi) or a list of (lo, hi), got {bounds!r}.") from None
    if len(items) == 2 and all(isinstance(v, numbers.Real) for v in items):
        return (check_bounds(tuple(items)),)
    if not items:
        raise DataError("bounds is empty; give one (lo, hi) pair per dimension.")
    return tuple(check_bounds(b, f"bounds[{i}]") for i, b in enumerate(items))


def check_outside(outside: object) -> None:
    """The ``outside=`` parameter: only ``"clamp"`` (checked on the parameter, not the data).

    ``"raise"`` (refuse data with a record outside the box) was the default once; it made the
    call's success depend on one record's value, a membership oracle at ε = 0, so it is refused
    as a parameter whatever the data.
    """
    if outside == "raise":
        raise DataError(
            "outside='raise' is no longer offered: refusing data because one record lies "
            "outside the bounds reveals that record for free. Records outside the box are "
            "clamped to it (outside='clamp', the only choice)."
        )
    if outside != "clamp":
        raise DataError("outside must be 'clamp' (records outside the box are clamped to it).")


def as_records(x: object, box: Box, outside: object = "clamp") -> FloatArray:
    """The records as a float64 array of shape (n, d), clamped into the box; n = 0 is allowed.

    An empty dataset is valid under add/remove neighbours: it is answered with noise like any
    other, since refusing it would reveal that it is empty. NaN and infinities are refused
    (before anything is charged); that refusal reveals that the data hold one.
    """
    check_outside(outside)
    d = len(box)
    if x is None:
        raise DataError("x is None; pass an array of records (n, or n × d).")
    # dpkit.stats' reader: an untyped list is read one element at a time (an int beyond 64
    # bits is a number, an int beyond the doubles ±inf, a non-number NaN), never as a whole by
    # NumPy, whose inferred type (object, or str) one record's value decided
    arr = _as_float_array(x, "x")
    if arr.ndim == 1 and d == 1:
        arr = arr[:, None]
    elif arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, d)
    if arr.ndim != 2 or arr.shape[1] != d:
        raise DataError(
            f"x must have shape (n, {d}) to match {d} pair(s) of bounds, got {arr.shape}."
        )
    if not np.all(np.isfinite(arr)):
        raise DataError(
            "x contains NaN or infinite values, or values that are not numeric (None, text); "
            "remove or impute them first."
        )
    lo = np.array([b[0] for b in box])
    hi = np.array([b[1] for b in box])
    # a per-record map onto the box: neighbours stay neighbours (under add/remove and under
    # replace, n unchanged), so every sensitivity computed for records in the box holds
    clamped: FloatArray = np.clip(arr, lo, hi)
    return clamped


def to_unit(data: FloatArray, box: Box) -> FloatArray:
    """Map the box affinely onto ``[0, 1]^d`` (clipped, so rounding cannot leave the cube)."""
    lo = np.array([b[0] for b in box])
    width = np.array([b[1] - b[0] for b in box])
    out: FloatArray = np.clip((data - lo) / width, 0.0, 1.0)
    return out


def check_public_n(n: object, size: int) -> int | None:
    """A public record count given by the user; it must match the data it describes."""
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, numbers.Integral | np.integer) or int(n) < 1:
        raise DataError(f"n must be a positive int (the public number of records), got {n!r}.")
    if int(n) != size:
        raise DataError("n (the public number of records) does not match the rows of x.")
    return int(n)


def check_memory(items: float, bytes_each: int, what: str) -> None:
    """Refuse, before anything is charged, a release whose working arrays would not fit."""
    need = items * bytes_each
    if not math.isfinite(need) or need > MAX_BYTES:
        raise DataError(
            f"{what} needs about {_human(need)} of memory (limit {_human(MAX_BYTES)}); use "
            "fewer bins or grid points per dimension, or fewer dimensions. Nothing was charged."
        )


def _human(b: float) -> str:
    if not math.isfinite(b):
        return "an unbounded amount"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if b < 1024:
            return f"{b:.3g} {unit}"
        b /= 1024
    return f"{b:.3g} EiB"


def per_dim_ints(value: object, d: int, name: str, minimum: int) -> tuple[int, ...]:
    """An int, or one int per dimension, each at least ``minimum``."""
    items: Sequence[object] = (
        list(value) if isinstance(value, list | tuple | np.ndarray) else [value] * d
    )
    if len(items) != d:
        raise DataError(f"{name} must be an int or one int per dimension ({d}).")
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral | np.integer):
            raise DataError(f"{name} must be an int or one int per dimension, got {value!r}.")
        if int(v) < minimum:
            raise DataError(f"{name} must be at least {minimum}, got {value!r}.")
        out.append(int(v))
    return tuple(out)
