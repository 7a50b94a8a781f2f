"""The accountant remembers an event's cost per event object: never a wrong cost."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpkit.accounting import (
    ZCDP,
    Accountant,
    ApproxDP,
    ApproxDPEvent,
    ComposedEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDP,
)
from dpkit.accounting import _costs as costs
from dpkit.errors import BudgetExceededError, PrivacyParameterError


def test_costs_of_many_distinct_events_match_the_unremembered_sum() -> None:
    # More distinct events than the memo holds, so that it is cleared along the way; each
    # accountant's spend is the event's own ε, never another event's.
    for i in range(1, costs.MEMO_SIZE + 200):
        event = LaplaceEvent(scale=float(i))
        a = Accountant(PureDP(epsilon=10.0))
        a.charge(event)
        assert a.spent.epsilon == float(costs.pure_cost_of(event))
        assert Accountant._pure_cost(event) == costs.pure_cost_of(event)
        assert len(costs.COSTS) <= costs.MEMO_SIZE


def test_same_event_object_charged_repeatedly_spends_exactly_n_times() -> None:
    event = ComposedEvent(events=(DiscreteLaplaceEvent(scale=Fraction(7, 3)),) * 2)
    a = Accountant(PureDP(epsilon=100.0))
    for _ in range(10):
        a.charge(event)
    one = Accountant(PureDP(epsilon=100.0))
    one.charge(ComposedEvent(events=(DiscreteLaplaceEvent(scale=Fraction(7, 3)),) * 2))
    assert a.spent.epsilon == pytest.approx(10 * one.spent.epsilon, rel=1e-15)
    # and the budget is still enforced on the remembered cost
    small = Accountant(PureDP(epsilon=one.spent.epsilon * 2.5))
    small.charge(event)
    small.charge(event)
    with pytest.raises(BudgetExceededError):
        small.charge(event)


def test_equal_events_of_different_objects_are_costed_each_on_its_own() -> None:
    # Remembered by identity, not equality: a fresh object is costed from its own fields.
    first, second = LaplaceEvent(scale=2.0), LaplaceEvent(scale=2.0)
    assert first == second and first is not second
    Accountant._pure_cost(first)
    assert costs.COSTS[(costs.pure_cost_of, id(first))][0] is first
    assert (costs.pure_cost_of, id(second)) not in costs.COSTS
    Accountant._pure_cost(second)
    assert costs.COSTS[(costs.pure_cost_of, id(second))][0] is second


def test_refusals_and_infinite_costs_are_not_remembered() -> None:
    z = Accountant(ZCDP(rho=1.0))
    event = ApproxDPEvent(epsilon=0.5, delta=1e-9)
    for _ in range(2):  # raised every time, not cached as a cost
        with pytest.raises(PrivacyParameterError, match="no zCDP bound"):
            z.charge(event)
    assert (costs.rho_cost, id(event)) not in costs.COSTS
    tiny = LaplaceEvent(scale=5e-324)  # ε = inf: fits no budget
    a = Accountant(PureDP(epsilon=1e308))
    for _ in range(2):
        with pytest.raises(BudgetExceededError):
            a.charge(tiny)
    assert (costs.pure_cost_of, id(tiny)) not in costs.COSTS


def test_zcdp_costs_are_remembered_and_exact() -> None:
    event = GaussianEvent(sigma=4.0)
    a = Accountant(ZCDP(rho=1.0))
    for _ in range(8):
        a.charge(event)
    assert a.spent.rho == pytest.approx(8 * (1 / (2 * 16.0)), rel=1e-15)
    assert costs.COSTS[(costs.rho_cost, id(event))] == (event, costs.rho_cost(event))
    b = Accountant(ApproxDP(epsilon=1.0, delta=1e-6), method="zcdp")
    b.charge(GaussianEvent(sigma=10.0))  # ρ = 0.005 of the ≈0.0175 that (1, 1e-6) allows
    assert b.spent.epsilon < 1.0
