"""Review of the first-plan memo: every kind of event and budget plans as if computed afresh,
and a subclass that plans differently never receives a plain accountant's plan."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest

from dpkit.accounting import (
    ZCDP,
    Accountant,
    ApproxDP,
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDP,
    ZCDPEvent,
)
from dpkit.accounting._events import PoissonSubsampledEvent, SelfComposedEvent
from dpkit.errors import BudgetExceededError

_EVENTS: list[Any] = [
    LaplaceEvent(scale=2.0),
    LaplaceEvent(scale=5e-324),  # infinite ε: fits nothing
    GaussianEvent(sigma=5.0),
    GaussianEvent(sigma=0.5),
    DiscreteGaussianEvent(sigma=Fraction(9, 2), sensitivity=2),
    DiscreteLaplaceEvent(scale=Fraction(7, 3)),
    ApproxDPEvent(epsilon=0.5, delta=1e-7),
    ApproxDPEvent(epsilon=0.5, delta=1e-3),
    ZCDPEvent(rho=0.01),
    ExponentialEvent(epsilon=0.3),
    ComposedEvent(events=(GaussianEvent(sigma=5.0), LaplaceEvent(scale=3.0))),
    PoissonSubsampledEvent(GaussianEvent(sigma=2.0), sampling_rate=0.01),
    SelfComposedEvent(GaussianEvent(sigma=20.0), count=10),
]
_BUDGETS: list[tuple[Any, str, float | None]] = [
    (PureDP(epsilon=1.0), "auto", None),
    (ApproxDP(epsilon=1.0, delta=1e-6), "basic", None),
    (ApproxDP(epsilon=1.0, delta=1e-6), "basic", 1e-8),
    (ApproxDP(epsilon=1.0, delta=1e-6), "zcdp", None),
    (ZCDP(rho=0.5), "auto", None),
    (ApproxDP(epsilon=1.0, delta=0.0), "basic", None),
]


def _outcome(f: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        return ("ok", f())
    except Exception as exc:  # the same refusal, message included
        return ("error", type(exc).__name__, str(exc))


@pytest.mark.parametrize(("budget", "method", "event_delta"), _BUDGETS)
def test_remembered_plans_equal_fresh_ones(
    budget: Any, method: str, event_delta: float | None
) -> None:
    def make() -> Accountant:
        return Accountant(budget, method=method, event_delta=event_delta)

    for event, hint in itertools.product(_EVENTS, [None, 1e-7, 1e-6, 5e-7]):
        fresh = _outcome(lambda e=event, h=hint: make()._plan_anew(e, h))
        for _ in range(3):
            a = make()
            got = _outcome(lambda a=a, e=event, h=hint: a._plan(e, h))
            assert got == fresh, (budget, method, event, hint)
        a, b = make(), make()
        ra = _outcome(lambda a=a, e=event, h=hint: a.charge(e, delta=h))
        rb = _outcome(lambda b=b, e=event, h=hint: b.charge(e, delta=h))
        assert ra[0] == rb[0] and a.ledger == b.ledger and a.spent == b.spent


class _Strict(Accountant):
    """Refuses anything costing more than half the budget (it fits differently)."""

    def _fits(self, s: Any) -> bool:
        return float(s.eps) <= self.budget.epsilon / 2  # type: ignore[union-attr]


def test_a_subclass_is_never_handed_a_plain_accountant_s_plan() -> None:
    budget = ApproxDP(epsilon=1.0, delta=1e-6)
    event = LaplaceEvent(scale=1.0)  # ε = 1
    assert Accountant(budget).can_afford(event)  # a plain accountant remembers its plan
    with pytest.raises(BudgetExceededError):
        _Strict(budget).charge(event)  # the strict one plans for itself, and refuses
