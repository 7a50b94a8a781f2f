"""Budget arithmetic has one definition, for the library's accountants and the service's ledger.

The decimals people write must add up as decimals (20 × 0.05 fits 1.0, 0.3 pays 0.3), and the
definition is never more permissive than the privacy maths beyond its documented resolution: a
sequence is accepted only if the exact sum of its costs (their binary values, what the
mechanisms were calibrated to) is at most the budget times (1 + 2⁻⁵⁰) / (1 − 2⁻⁵⁰). Today's
relative slack of 1e-12 accepted overspends four thousand times that.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import dpkit.mechanisms as mech
from dpkit.accounting import Accountant, ApproxDP, ApproxDPEvent, PureDP, PureDPEvent
from dpkit.accounting._budget import (
    RESOLUTION,
    UNIT,
    budget_units,
    cost_units,
    from_units,
    within,
)
from dpkit.errors import BudgetExceededError

WORST = (1 + RESOLUTION) / (1 - RESOLUTION)
"""How far above its budget an accepted sequence's exact sum may be (a ratio)."""


def _count_fitting(acct: Accountant, event: object, most: int = 100) -> int:
    n = 0
    while n < most:
        try:
            acct.charge(event)  # type: ignore[arg-type]
        except BudgetExceededError:
            return n
        n += 1
    return n


def test_the_resolution_is_what_the_docs_say() -> None:
    assert Fraction(2) ** -50 == RESOLUTION
    assert UNIT == 10**12


@pytest.mark.parametrize("eps, n", [(0.05, 20), (0.1, 10), (0.01, 100), (0.3, 3), (0.2, 5)])
def test_n_decimal_charges_fit_their_decimal_sum_and_no_more(eps: float, n: int) -> None:
    # As events the user wrote, and as the events of mechanisms calibrated to them (whose exact
    # binary cost may sit a few units in the last place above the decimal: 0.010000000000000002).
    for event in (PureDPEvent(epsilon=eps), mech.Laplace(epsilon=eps).event):
        assert (
            _count_fitting(Accountant(PureDP(epsilon=1.0 if n * eps >= 0.9 else n * eps)), event)
            >= n
        )
        assert _count_fitting(Accountant(PureDP(epsilon=1.0)), event) == round(1.0 / eps)
    # and in units of the ledger: the same decision
    assert n * cost_units(eps) <= budget_units(1.0)
    assert (round(1.0 / eps) + 1) * cost_units(eps) > budget_units(1.0)


def test_a_budget_of_0_3_pays_a_query_of_0_3() -> None:
    Accountant(PureDP(epsilon=0.3)).charge(PureDPEvent(epsilon=0.3))
    Accountant(PureDP(epsilon=0.3)).charge(mech.Laplace(epsilon=0.3).event)
    Accountant(ApproxDP(epsilon=0.3, delta=3e-7)).charge(ApproxDPEvent(epsilon=0.3, delta=3e-7))
    assert cost_units(0.3) == budget_units(0.3) == 3 * 10**11


def test_a_quote_is_what_is_charged() -> None:
    # the ledger stores 0.05 as 5·10^10 units; shown back it is the float 0.05 again
    assert cost_units(0.05) == 5 * 10**10
    assert from_units(cost_units(0.05)) == 0.05
    assert from_units(cost_units(0.3)) == 0.3


def test_a_computed_cost_is_rounded_up_never_down() -> None:
    # a spend like 0.7499999999993179 (a safe-side margin of the accounting) is charged as 0.75
    assert cost_units(0.7499999999993179) == 75 * 10**10
    assert cost_units(0.7500000000000001) == 75 * 10**10  # within the resolution: as written
    assert cost_units(0.750000000001) == 75 * 10**10 + 1
    assert cost_units(1e-300) == 1  # a tiny cost still costs a unit
    assert budget_units(1e-300) == 0  # and a tiny budget pays for nothing


def test_an_overspend_beyond_the_resolution_is_refused() -> None:
    # 0.5 + 0.5·(1 + 1e-13) exceeds 1 by 5e-14: far beyond 2⁻⁵⁰ ≈ 8.9e-16, so refused
    # (the old relative slack of 1e-12 accepted it).
    acct = Accountant(PureDP(epsilon=1.0))
    acct.charge(PureDPEvent(epsilon=0.5))
    with pytest.raises(BudgetExceededError):
        acct.charge(PureDPEvent(epsilon=0.5 * (1 + 1e-13)))
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    acct.charge(ApproxDPEvent(epsilon=0.5, delta=5e-7))
    with pytest.raises(BudgetExceededError):
        acct.charge(ApproxDPEvent(epsilon=0.5, delta=5e-7 * (1 + 1e-13)))
    assert not within(Fraction(1) + Fraction(1, 10**13), 1.0)


_amounts = hs.floats(min_value=1e-6, max_value=10.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(
    budget=_amounts,
    free=hs.lists(_amounts, min_size=1, max_size=12),
    n=hs.integers(min_value=1, max_value=12),
    wiggle=hs.floats(min_value=-1e-12, max_value=1e-12),
    boundary=hs.booleans(),
)
def test_no_accepted_sequence_exceeds_its_budget_beyond_the_resolution(
    budget: float, free: list[float], n: int, wiggle: float, boundary: bool
) -> None:
    # Either arbitrary costs, or n shares of the budget with the last moved across the boundary
    # by up to a relative 1e-12 (the old slack), so that the boundary is met often.
    share = budget / n
    costs = [share] * (n - 1) + [share * (1 + wiggle)] if boundary else free
    acct = Accountant(PureDP(epsilon=budget))
    accepted: list[float] = []
    for c in costs:
        exact = sum((Fraction(x) for x in accepted), Fraction(c))
        # whether the ledger's integer units would accept the same sequence (accepted, then c)
        ledger = sum(cost_units(x) for x in [*accepted, c]) <= budget_units(budget)
        try:
            acct.charge(PureDPEvent(epsilon=c))
        except BudgetExceededError:
            lib = False
        else:
            lib = True
            accepted.append(c)
        # the one definition: accepted exactly when the exact sum is within the resolution
        assert lib == (exact <= Fraction(budget) * WORST)
        # the ledger's integer units never accept a sequence that the library refuses
        assert lib or not ledger
        if not lib:
            break


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(
    budget=hs.integers(min_value=1, max_value=100 * 10**12),
    costs=hs.lists(hs.integers(min_value=1, max_value=10 * 10**12), min_size=1, max_size=12),
)
def test_decimals_with_twelve_places_add_exactly(budget: int, costs: list[int]) -> None:
    # ε's written with at most 12 decimal places (k·10⁻¹²) fit exactly when their decimal sum
    # does, in the library and in the ledger's units: 0.1 + 0.2 pays 0.3.
    b = float(Fraction(budget, UNIT))
    acct = Accountant(PureDP(epsilon=b))
    total = 0
    for k in costs:
        c = float(Fraction(k, UNIT))
        fits = total + k <= budget
        assert cost_units(c) == k and budget_units(b) == budget
        if fits:
            acct.charge(PureDPEvent(epsilon=c))
            total += k
        else:
            with pytest.raises(BudgetExceededError):
                acct.charge(PureDPEvent(epsilon=c))
            break
    assert math.isclose(acct.spent.epsilon, total / UNIT, rel_tol=1e-15)  # type: ignore[attr-defined]
