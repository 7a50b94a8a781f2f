"""A privacy parameter given as an integer (or fraction) beyond every float is refused with a
:class:`~dpkit.errors.PrivacyParameterError`, like infinity, never an ``OverflowError``:
``PureDP(epsilon=10**400)`` raised one from ``float()``."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpkit.accounting import ApproxDP, LaplaceEvent, PureDP
from dpkit.errors import PrivacyParameterError

HUGE = [10**400, -(10**400), Fraction(10**400, 3)]


@pytest.mark.parametrize("value", HUGE, ids=["int", "negative-int", "fraction"])
def test_a_parameter_beyond_every_float_is_a_privacy_parameter_error(value: object) -> None:
    with pytest.raises(PrivacyParameterError):
        PureDP(epsilon=value)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        ApproxDP(epsilon=1.0, delta=value)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        LaplaceEvent(scale=value)  # type: ignore[arg-type]
