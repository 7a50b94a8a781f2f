"""Review of the core hardening (issue 13 part A): holes left in the mechanisms' input checks."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from dpkit.accounting import Accountant, ApproxDP, PureDP
from dpkit.errors import DataError, DPKitError, PrivacyParameterError
from dpkit.mechanisms import (
    DiscreteGaussian,
    Exponential,
    Gaussian,
    Geometric,
    Laplace,
    PermuteAndFlip,
    SparseVector,
)
from dpkit.noise import laplace

BASE = 2**60 + 128  # 2^60 + 129 is not a double: float64 moves it by up to 128


@pytest.mark.parametrize(
    "entry",
    [
        lambda i: Fraction(i),
        lambda i: np.longdouble(i) if np.finfo(np.longdouble).nmant >= 63 else Fraction(i),
        lambda i: Decimal(i),
    ],
    ids=["fraction", "longdouble", "decimal"],
)
def test_non_int_integral_entries_above_2_53_stay_exact(entry: Callable[[int], Any]) -> None:
    # A Fraction (or a long double, or a Decimal) went through float64 and was rounded:
    # neighbouring counts 2^60+128 and 2^60+129 could come out 256 apart with the same noise,
    # the privacy break of issue 13 item 9 through another number type.
    mech = Geometric(epsilon=1.0, shape=1)
    a = mech.release(np.array([entry(BASE)], dtype=object), rng=5)
    b = mech.release(np.array([entry(BASE + 1)], dtype=object), rng=5)
    assert int(b[0]) - int(a[0]) == 1


@pytest.mark.parametrize(
    "entry",
    [Fraction(1, 2), Decimal("0.5"), Decimal("NaN"), Decimal("Infinity")],
)
def test_object_entries_that_are_not_integers_are_refused(entry: object) -> None:
    with pytest.raises(DataError):
        Geometric(epsilon=1.0, shape=1).release(np.array([entry], dtype=object))


def test_object_integers_beyond_the_range_are_clamped_exactly() -> None:
    mech = Geometric(epsilon=1.0, shape=1)
    got = mech.release(np.array([Fraction(10**400)], dtype=object), rng=5)
    assert got.tolist() == mech.release(np.array([2**62 - 1], dtype=object), rng=5).tolist()


HUGE = 10**400  # a Python int beyond float range: NumPy raised a bare OverflowError


@pytest.mark.parametrize(
    "call",
    [
        lambda a: Laplace(epsilon=1.0).release(HUGE, accountant=a),
        lambda a: Laplace(epsilon=1.0, shape=2).release([1.0, HUGE], accountant=a),
        lambda a: Gaussian(epsilon=1.0, delta=1e-6).release(HUGE, accountant=a),
        lambda a: SparseVector(epsilon=1.0, threshold=0.0).test(HUGE, accountant=a),
        lambda a: Exponential(epsilon=1.0).select_index([0.0, HUGE], accountant=a),
        lambda a: PermuteAndFlip(epsilon=1.0).select_index([0.0, HUGE], accountant=a),
        lambda a: Exponential(epsilon=1.0).select_interval(
            [0.5, HUGE], lambda less, greater: -abs(greater - less), (0.0, 1.0), accountant=a
        ),
        lambda a: Exponential(epsilon=1.0).select_interval(
            [0.5], [0.0, HUGE], (0.0, 1.0), accountant=a
        ),
        lambda a: laplace([1.0, HUGE], 1.0),
    ],
)
def test_ints_beyond_float_range_are_a_data_error_before_charging(
    call: Callable[[Accountant], Any],
) -> None:
    acct = Accountant(PureDP(epsilon=10.0))
    with pytest.raises(DataError):
        call(acct)
    assert acct.spent.epsilon == 0.0


@pytest.mark.parametrize(
    "build",
    [
        lambda: Geometric(epsilon=1e-300, sensitivity=2**40),  # OverflowError
        lambda: Gaussian(epsilon=1.0, delta=1e-6, sensitivity=1.7e308),  # ZeroDivisionError
        lambda: Gaussian(epsilon=1e10, delta=1e-6, sensitivity=5e-324),  # ZeroDivisionError
        lambda: DiscreteGaussian(epsilon=1e-300, delta=1e-6, sensitivity=2**62),
    ],
)
def test_extreme_parameters_are_refused_with_a_dpkit_error(build: Callable[[], Any]) -> None:
    with pytest.raises(PrivacyParameterError):
        build()


EXTREME_USES: dict[str, tuple[Callable[[float, float], Any], Callable[[Any, Accountant], Any]]] = {
    "laplace": (
        lambda e, s: Laplace(epsilon=e, sensitivity=s),
        lambda m, a: m.release(1.0, accountant=a),
    ),
    "gaussian": (
        lambda e, s: Gaussian(epsilon=e, delta=1e-6, sensitivity=s),
        lambda m, a: m.release(1.0, accountant=a),
    ),
    "sparse_vector": (
        lambda e, s: SparseVector(epsilon=e, sensitivity=s, threshold=0.0),
        lambda m, a: m.test(1.7e308, accountant=a),
    ),
}


@pytest.mark.parametrize("name", sorted(EXTREME_USES))
def test_every_extreme_mechanism_either_refuses_at_build_or_releases(name: str) -> None:
    # The invariant behind "validate before charging", swept over the extreme corner: a
    # mechanism that could be built never raises after its charge (and a refusal is a dpkit
    # error: Gaussian(Δ = 1.7e308) used to raise ZeroDivisionError).
    build, use = EXTREME_USES[name]
    for eps in (2.0**-47, 2.0**-44, 1e-10, 1.0, 1e10, 1e300):
        for sens in (5e-324, 1e-300, 1.0, 1e300, 1.7e308):
            try:
                mech = build(eps, sens)
            except DPKitError:
                continue
            use(mech, Accountant(ApproxDP(epsilon=1e308, delta=0.5)))


def test_integer_errors_do_not_give_the_length_of_a_text_record() -> None:
    with pytest.raises(DataError) as info:  # "got dtype <U22": the record's length
        Geometric(epsilon=1.0).release("salary=91234.5 (alice)")
    assert "22" not in str(info.value)
