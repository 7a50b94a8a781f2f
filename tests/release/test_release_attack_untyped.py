"""Records given as a plain list are read one by one, as :mod:`dpkit.stats` reads them.

The densities made ``np.asarray`` of the list: one Python int beyond 64 bits (a number, far
outside the bounds) turned the whole list into an object array, refused as "not numeric", while
the list without it was released — a refusal, before any charge, that revealed the record. A
record holding a sequence raised NumPy's ``ValueError`` (not a ``DataError``), and
``discover_domain`` let an int beyond the doubles escape as ``OverflowError``. Whether a call
succeeds, and which error it raises, now depend on no record's value beyond the documented
refusal of values with no place in any box (NaN, None, non-numbers, ±inf).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import dpkit.release as dpr
from dpkit.random import seeded

B = (0.0, 10.0)
XS: list[Any] = [float(i % 10) + 0.5 for i in range(40)]

K: dict[str, Any] = {"bounds": B, "epsilon": 1.0}
CALLS: dict[str, Callable[[list[Any]], object]] = {
    "histogram_density": lambda x: dpr.histogram_density(x, **K, bins=4, rng=seeded(0)),
    "bernstein_density": lambda x: dpr.bernstein_density(x, **K, bandwidth=2.0, rng=seeded(0)),
    "kde_density": lambda x: dpr.kde_density(x, **K, bandwidth=2.0, delta=1e-6, rng=seeded(0)),
    "series_density": lambda x: dpr.series_density(x, **K, degree=3, rng=seeded(0)),
    "ks_synthetic": lambda x: dpr.ks_synthetic(x, **K, rng=seeded(0)),
    "discover_domain": lambda x: dpr.discover_domain(
        {"x": x}, numeric={"x": B}, epsilon=1.0, delta=1e-6, rng=seeded(0)
    ),
}


def _outcome(name: str, x: list[Any]) -> str:
    try:
        CALLS[name](x)
    except Exception as exc:
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_int_beyond_64_bits_is_a_far_value(name: str) -> None:
    far = _outcome(name, [*XS, 1e21])  # a float far outside the bounds: clamped
    assert far == "ok"
    assert _outcome(name, [*XS, 10**21]) == far  # the same number as a Python int


@pytest.mark.parametrize("name", sorted(CALLS))
def test_odd_records_are_refused_as_data_errors(name: str) -> None:
    assert _outcome(name, XS) == "ok"
    for odd in (float("inf"), 10**400, [1.0], "n/a", None, float("nan")):
        assert _outcome(name, [*XS, odd]) in ("ok", "DataError"), odd
    # an int beyond the doubles is +inf, whatever the policy for ±inf is
    assert _outcome(name, [*XS, 10**400]) == _outcome(name, [*XS, float("inf")])
