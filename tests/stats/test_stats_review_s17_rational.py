"""Review s17: rational_at_least must never round a noise scale down, for any accepted type.

Pre-existing (dpkit._checks.exact_fraction, not the new memo): a value that is not an int,
Fraction or float but is accepted as a positive real (numpy's longdouble) is converted with
float(value), i.e. rounded to the *nearest* double, which may be below it. The memo added in
this change returns exactly what the uncached function returns (checked below), so it neither
causes nor hides this.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.noise._scales import _rounded, rational_at_least


def _exact(v: np.longdouble) -> Fraction:
    n, d = v.as_integer_ratio()
    return Fraction(n, d)


@pytest.mark.skipif(np.finfo(np.longdouble).nmant <= 52, reason="longdouble is a double here")
def test_a_longdouble_scale_is_never_rounded_down() -> None:
    v = np.longdouble(1) + np.longdouble(2) ** -60
    try:
        a, b = rational_at_least(v, "scale", max_numerator=2**62)
    except (PrivacyParameterError, TypeError):
        return  # refusing the type is also sound
    assert Fraction(a, b) >= _exact(v), f"{v!r} was rounded down to {a}/{b}"


@pytest.mark.parametrize(
    "value",
    [
        0.1,
        5e-324,
        1e300,
        3,
        2**70,
        Fraction(1, 3),
        np.float64(0.1),
        np.float32(0.1),
        True,
        0.0,
        -0.0,
        -1.0,
        float("nan"),
        float("inf"),
        "0.1",
        None,
        np.array(0.5),
        [0.5],
    ],
)
@pytest.mark.parametrize("max_numerator", [2**62, 2**40, 10])
def test_the_memo_returns_what_the_uncached_rounding_returns(
    value: object, max_numerator: int
) -> None:
    def run(f: object) -> object:
        try:
            return ("ok", f())  # type: ignore[operator]
        except Exception as exc:  # compared below
            return (type(exc).__name__, str(exc))

    want = run(lambda: _rounded(value, "noise scale", max_numerator))
    for _ in range(2):  # the second from the cache
        assert (
            run(lambda: rational_at_least(value, "noise scale", max_numerator=max_numerator))
            == want
        )
