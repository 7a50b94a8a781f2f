"""A fresh accountant's first charge is remembered per (budget, event) object: never a wrong plan.

From nothing spent, the state a charge leads to is a pure function of the budget, the method,
the default δ, the event and the caller's δ; the accountant remembers it by identity of the
budget and the event. Every test compares with the plan computed afresh.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpkit.accounting import (
    Accountant,
    ApproxDP,
    ApproxDPEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDP,
)
from dpkit.accounting import _accountant as acc
from dpkit.accounting import _costs as costs
from dpkit.errors import BudgetExceededError, PrivacyParameterError


def _afresh(a: Accountant, event: object, hint: float | None) -> object:
    return a._plan_anew(event, hint)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("budget", "method", "event", "delta"),
    [
        (PureDP(epsilon=1.0), "auto", LaplaceEvent(scale=2.0), None),
        (PureDP(epsilon=1.0), "auto", DiscreteLaplaceEvent(scale=Fraction(7, 3)), None),
        (ApproxDP(epsilon=1.0, delta=1e-6), "basic", GaussianEvent(sigma=5.0), 1e-7),
        (ApproxDP(epsilon=1.0, delta=1e-6), "basic", GaussianEvent(sigma=5.0), None),
        (ApproxDP(epsilon=1.0, delta=1e-6), "zcdp", GaussianEvent(sigma=5.0), None),
        (ApproxDP(epsilon=1.0, delta=1e-6), "basic", ApproxDPEvent(epsilon=0.5, delta=1e-7), None),
    ],
)
def test_a_remembered_first_charge_is_the_computed_one(
    budget: object, method: str, event: object, delta: float | None
) -> None:
    first = Accountant(budget, method=method)  # type: ignore[arg-type]
    first.charge(event, delta=delta)  # type: ignore[arg-type]
    again = Accountant(budget, method=method)  # type: ignore[arg-type]
    again.charge(event, delta=delta)  # type: ignore[arg-type]
    hint = None if delta is None else delta
    expected = _afresh(Accountant(budget, method=method), event, hint)  # type: ignore[arg-type]
    assert expected is not None
    for a in (first, again):
        assert (a._state, a.ledger[0].epsilon, a.ledger[0].delta) == (
            expected[0],  # type: ignore[index]
            expected[1].epsilon,  # type: ignore[index]
            expected[1].delta,  # type: ignore[index]
        )
        assert a.spent == first.spent


def test_a_second_charge_is_planned_from_the_state_not_the_memo() -> None:
    event = LaplaceEvent(scale=2.0)  # ε = 0.5 (rounded up, safely)
    a = Accountant(PureDP(epsilon=1.2))
    a.charge(event)
    a.charge(event)
    with pytest.raises(BudgetExceededError):
        a.charge(event)  # 1.5 > 1.2: refused although the first charge's plan is remembered
    assert a.spent.epsilon == float(2 * costs.pure_cost_of(event)) and len(a.ledger) == 2


def test_a_refusal_is_remembered_as_a_refusal_and_changes_nothing() -> None:
    budget, event = PureDP(epsilon=0.1), LaplaceEvent(scale=1.0)
    for _ in range(3):
        a = Accountant(budget)
        with pytest.raises(BudgetExceededError):
            a.charge(event)
        assert a.spent.epsilon == 0 and a.ledger == ()


def test_equal_budgets_or_events_are_not_shared_only_identical_objects() -> None:
    # Two budgets that compare equal but are different objects get plans of their own; an
    # equal event of another object is planned again (and gives the same result).
    e1, e2 = LaplaceEvent(scale=4.0), LaplaceEvent(scale=4.0)
    b1, b2 = PureDP(epsilon=1.0), PureDP(epsilon=1.0)
    acc._FIRST_PLANS.clear()
    Accountant(b1).charge(e1)
    Accountant(b2).charge(e1)
    Accountant(b1).charge(e2)
    assert len(acc._FIRST_PLANS) == 3
    keys = {(k[1], k[4]) for k in acc._FIRST_PLANS}
    assert keys == {(id(b1), id(e1)), (id(b2), id(e1)), (id(b1), id(e2))}


def test_the_memo_is_bounded_and_stays_right_across_clears() -> None:
    budget = PureDP(epsilon=10.0)
    for i in range(1, costs.MEMO_SIZE + 50):
        event = LaplaceEvent(scale=float(i))
        a = Accountant(budget)
        a.charge(event)
        assert a.spent.epsilon == float(costs.pure_cost_of(event))
        assert len(acc._FIRST_PLANS) <= costs.MEMO_SIZE


def test_errors_are_not_remembered() -> None:
    a = Accountant(PureDP(epsilon=1.0))
    event = GaussianEvent(sigma=1.0)  # not pure: a PureDP budget cannot pay for it
    for _ in range(2):
        with pytest.raises(PrivacyParameterError):
            a.charge(event)
    assert not any(v[1] is event for v in acc._FIRST_PLANS.values())
