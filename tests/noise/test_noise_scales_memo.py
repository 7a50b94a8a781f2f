"""Remembered rational rounding of noise scales: the same answers and refusals as computing."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.noise._scales import _rounded, rational_at_least

LIMIT = 2**52


@pytest.mark.parametrize(
    "value",
    [0.1, 3.5, 1e-300, 2.0**60, 7, Fraction(1, 3), Fraction(10**30, 7), np.float64(0.1),
     np.float32(0.1), np.int64(5), True, 1.0000000000000002],
)  # fmt: skip
def test_remembered_equals_computed(value: object) -> None:
    try:
        fresh = _rounded(value, "scale", LIMIT)
    except PrivacyParameterError as exc:
        with pytest.raises(PrivacyParameterError, match="scale"):
            rational_at_least(value, "scale", max_numerator=LIMIT)
        assert "scale" in str(exc)
        return
    for _ in range(2):  # computed, then remembered
        assert rational_at_least(value, "scale", max_numerator=LIMIT) == fresh
    a, b = fresh
    exact = Fraction(value) if isinstance(value, int | Fraction) else Fraction(float(value))  # type: ignore[arg-type]
    assert Fraction(a, b) >= exact and a <= LIMIT


def test_refusals_are_not_remembered_and_name_the_caller() -> None:
    for name in ("sigma", "scale"):
        with pytest.raises(PrivacyParameterError, match=name):
            rational_at_least(-1.0, name, max_numerator=LIMIT)
        with pytest.raises(PrivacyParameterError, match=name):
            rational_at_least(float("nan"), name, max_numerator=LIMIT)
        with pytest.raises(PrivacyParameterError, match=name):
            rational_at_least(2.0**80, name, max_numerator=LIMIT)


def test_equal_values_of_different_types_do_not_share_an_entry() -> None:
    # 1 == 1.0 == True: a type refused by the check must not reuse another type's result.
    rational_at_least(1, "scale", max_numerator=LIMIT)
    rational_at_least(1.0, "scale", max_numerator=LIMIT)
    try:
        expected = _rounded(True, "scale", LIMIT)
    except PrivacyParameterError:
        with pytest.raises(PrivacyParameterError):
            rational_at_least(True, "scale", max_numerator=LIMIT)
    else:
        assert rational_at_least(True, "scale", max_numerator=LIMIT) == expected


def test_an_unhashable_value_is_still_checked() -> None:
    arr = np.array([0.5])
    try:
        expected: object = _rounded(arr, "scale", LIMIT)
    except Exception as exc:  # whatever the check does with it, the same happens
        with pytest.raises(type(exc)):
            rational_at_least(arr, "scale", max_numerator=LIMIT)
    else:
        assert rational_at_least(arr, "scale", max_numerator=LIMIT) == expected
