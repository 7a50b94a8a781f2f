"""The service's one parser of the numbers a request holds.

JSON numbers arrive as Python ``int`` (of any size: ``10**400`` parses) or ``float`` (``1e400``
parses to infinity), and ``true``/``false`` as ``bool``, a subclass of ``int``. Every numeric
field of every endpoint (privacy parameters, bounds, bin edges, quantile levels, contribution
bounds, row counts, admin budgets and totals) goes through :func:`real` or :func:`integer`, so
that

* a boolean, a string, a list… is refused as "not a number";
* an integer too large for a float64 (or, for :func:`integer`, outside its declared range) is
  refused, never converted (``float(10**400)`` raises ``OverflowError``, an HTTP 500);
* NaN and ±infinity are refused;

each with a :class:`~dpkit.errors.DataError` (HTTP 400) that names the field and what it expects,
never the value received (a request is not the place to reflect input back). Everything is
checked before any charge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dpkit.errors import DataError, DPKitError, PrivacyParameterError

__all__ = ["integer", "privacy", "real"]


def real(
    value: object,
    field: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    hint: str = "",
    error: type[DPKitError] = DataError,
) -> float:
    """``value`` as a finite float64 in the given range, or :class:`DataError` naming ``field``.

    Examples
    --------
    >>> real(0.5, "alpha", low=0, high=1, low_open=True, high_open=True)
    0.5
    >>> real(10**400, "epsilon")
    Traceback (most recent call last):
    ...
    dpkit.errors.DataError: epsilon must be a finite number (within the range of a 64-bit float).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(f"{field} must be a number{hint}.")
    if isinstance(value, int):
        try:  # a JSON integer has any number of digits; past ~1.8e308 it has no float
            out = float(value)
        except OverflowError:
            out = math.inf
    else:
        out = value
    if not math.isfinite(out):
        raise error(f"{field} must be a finite number (within the range of a 64-bit float).")
    too_low = out <= low if low_open else out < low
    too_high = out >= high if high_open else out > high
    if too_low or too_high:
        if math.isinf(high):
            rng = f"be {'>' if low_open else '>='} {low:g}"
        else:
            lb, hb = "(" if low_open else "[", ")" if high_open else "]"
            rng = f"lie in {lb}{low:g}, {high:g}{hb}"
        raise error(f"{field} must {rng}{hint}.")
    return float(out)


def integer(value: object, field: str, *, low: int, high: int, hint: str = "") -> int:
    """``value`` as an integer in ``[low, high]`` (a JSON integer, not ``true``/``1.0``).

    Examples
    --------
    >>> integer(3, "max_rows", low=1, high=1000)
    3
    >>> integer(True, "max_rows", low=1, high=1000)
    Traceback (most recent call last):
    ...
    dpkit.errors.DataError: max_rows must be an integer from 1 to 1000.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DataError(f"{field} must be an integer from {low} to {high}{hint}.")
    return int(value)


def privacy(params: Mapping[str, Any], *, pure: bool = False) -> tuple[float, float]:
    """A request's ``epsilon`` (finite, > 0) and ``delta`` (in [0, 1), default 0).

    :class:`~dpkit.errors.PrivacyParameterError` (HTTP 400) naming the parameter otherwise;
    ``pure``: the query is ε-DP only and ``delta`` must be 0.

    Examples
    --------
    >>> privacy({"epsilon": 1, "delta": 1e-6})
    (1.0, 1e-06)
    """
    eps = real(
        params.get("epsilon"), "epsilon", low=0, low_open=True, error=PrivacyParameterError,
        hint=" (ε > 0, typically 0.1 to 10)",
    )  # fmt: skip
    dlt = real(
        params.get("delta", 0.0), "delta", low=0, high=1, high_open=True,
        error=PrivacyParameterError, hint=" (well below 1/n, e.g. 1e-6)",
    )  # fmt: skip
    if pure and dlt != 0:
        raise DataError("this query is ε-DP only; leave delta at 0.")
    return eps, dlt
