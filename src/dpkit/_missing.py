"""One policy for missing values (NaN, ``None``, null), shared by every layer.

A *missing* value is one with no place in any numeric domain: NaN, ``None`` or a null, and any
non-number found where a number is expected in an untyped (object) array. Values that are
merely far away (``1e308``, ``±inf``, a subnormal) are not missing: bounds clamp them, and the
sensitivity already covers that. What a release does with a missing value is the caller's
choice, with one keyword, ``missing=``, and one default in every layer:

``"raise"`` (the default)
    Refuse with :class:`~dpkit.errors.DataError` before anything is charged or released. The
    refusal itself is an unprotected output: it reveals that at least one missing value is in
    the data. That is why it is the default: nothing is silently changed, and a caller who owns
    the data learns about the gap before spending budget on it. Services that answer people who
    may not see the data must clean at ingestion (or pass ``"drop"``) instead.
``"drop"``
    Remove every record (row) with a missing value in a column the release reads, *before*
    contribution bounding. Removing records by a rule applied to each record alone is a stable
    transformation under add/remove neighbours (a neighbouring dataset loses or gains at most the
    one record that differs), so the guarantee holds as stated and the number of records used
    stays private (it is never released). Under replace-one neighbours a replaced record may turn
    into a removed one, which the add/remove analysis covers with the same ε per record
    (replace = remove + add, as the sensitivities already assume).

The same keyword is taken by every ``dpkit.stats`` statistic, by ``dpkit.frame.Query``, by the
``dpkit.release`` densities, ``ks_synthetic``, ``Synthesizer.fit`` and ``discover_domain``, by
every ``dpkit.ml`` estimator (a constructor parameter), and by the ``randomize`` of the
``dpkit.local`` randomizers and of ``dpkit.mechanisms.RandomizedResponse``, which accept
``"raise"`` only (one report per user: a user dropped would be told apart by the missing report).
"""

from __future__ import annotations

import math
import numbers
from typing import Literal, cast

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError

__all__ = [
    "MISSING_DEFAULT",
    "Missing",
    "check_missing",
    "drop_pairs",
    "handle_missing",
    "missing_error",
    "object_to_float",
]

Missing = Literal["raise", "drop"]
MISSING_DEFAULT: Missing = "raise"
_POLICIES: tuple[Missing, ...] = ("raise", "drop")


def check_missing(missing: object, *, public_size: bool = False) -> Missing:
    """The policy, checked (a parameter: refused before any data is read).

    ``public_size``: the release treats the number of records as public (replace-one
    neighbours in :mod:`dpkit.stats`). Dropping records would make that number private (a
    record replaced by a missing one changes it), so ``"drop"`` is refused there.
    """
    policy: Missing | None = None
    for p in _POLICIES:
        if isinstance(missing, str) and missing == p:
            policy = p
    if policy is None:
        raise DataError(
            "missing must be 'raise' (refuse data with a NaN/None, before charging) or 'drop' "
            "(remove such records before the release)."
        )
    if policy == "drop" and public_size:
        raise DataError(
            "missing='drop' makes the number of records used private, while replace-one "
            "neighbours treat it as public; use add/remove neighbours, or clean the data first."
        )
    return policy


def missing_error(name: str) -> DataError:
    """The one refusal of a missing value (its message never quotes the data)."""
    return DataError(
        f"{name} contains a missing value (NaN or None); nothing was charged. This refusal "
        "reveals that a missing value exists: pass missing='drop' to remove such records before "
        "the release (the guarantee holds), or clean the data first."
    )


def object_to_float(arr: npt.NDArray[np.object_]) -> npt.NDArray[np.float64]:
    """An object array as float64, every element that is not a real number made NaN (missing)."""
    flat = arr.ravel()
    out = np.fromiter((_real(v) for v in flat), dtype=np.float64, count=flat.size)
    return out.reshape(arr.shape)


def _real(v: object) -> float:
    if not isinstance(v, numbers.Real):
        return math.nan
    try:
        return float(v)
    except OverflowError:  # an int beyond the doubles: a value beyond any bound, not missing
        return math.inf if cast(int, v) > 0 else -math.inf  # only an int overflows a float


def handle_missing(
    arr: npt.NDArray[np.float64], missing: Missing, name: str = "x"
) -> npt.NDArray[np.float64]:
    """Apply the policy to a 1-d array (records) or a 2-d array (records × columns).

    Under ``"drop"`` a 2-d array loses every row with a NaN in any column. One pass to look;
    the copy happens only when there is something to drop.
    """
    nan = np.isnan(arr)
    bad = np.asarray(nan.any(axis=1) if arr.ndim == 2 else nan, dtype=np.bool_)
    if not bad.any():
        return arr
    if missing == "raise":
        raise missing_error(name)
    return arr[~bad]


def drop_pairs(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], missing: Missing
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Paired records: a record is missing when either of its two values is."""
    both = handle_missing(np.stack([x, y], axis=1), missing, "x or y")
    return both[:, 0].copy(), both[:, 1].copy()
