"""PLD accounting above ε ≈ 709 (where e^ε overflows a float) must not underestimate ε."""

from __future__ import annotations

import math

import pytest

from dpkit.accounting import (
    Accountant,
    ApproxDP,
    GaussianEvent,
    SelfComposedEvent,
    compose,
    gaussian_epsilon,
)
from dpkit.errors import BudgetExceededError

# k Gaussians of σ = 1 compose exactly to one Gaussian with μ = √k (Dong, Roth & Su 2019,
# Corollary 3.3), whose exact curve is Balle & Wang (2018, Theorem 8): ε(1e-5) = 914.23 for
# k = 1500, 746.80 for k = 1200.


@pytest.mark.parametrize(("k", "h"), [(1500, 1e-2), (1200, 1e-3)])
def test_pld_epsilon_above_709_is_an_upper_bound_close_to_exact(k: int, h: float) -> None:
    exact = gaussian_epsilon(1e-5, math.sqrt(k))
    assert exact > 740  # the regime where exp() overflowed and ε was clamped to 709.78
    got = compose([SelfComposedEvent(GaussianEvent(sigma=1.0), count=k)], method="pld",
                  discretization=h).epsilon(1e-5)  # fmt: skip
    assert got >= exact
    # the pessimistic discretisation costs at most a few grid steps per unit of ε: 1e-4 relative
    assert got <= exact * (1 + 1e-4)


def test_auto_never_picks_an_underestimate() -> None:
    k = 1500
    exact = gaussian_epsilon(1e-5, math.sqrt(k))
    c = compose([SelfComposedEvent(GaussianEvent(sigma=1.0), count=k)], discretization=1e-2)
    assert c.epsilon(1e-5) >= exact


def test_pld_delta_at_large_epsilon_is_finite_and_safe() -> None:
    k = 1500
    c = compose([SelfComposedEvent(GaussianEvent(sigma=1.0), count=k)], method="pld",
                discretization=1e-2)  # fmt: skip
    eps = gaussian_epsilon(1e-5, math.sqrt(k))
    d = c.delta(eps)
    assert 1e-5 * (1 - 1e-9) <= d <= 1.0


def test_budget_of_720_refuses_a_composition_worth_747() -> None:
    """The accountant prices a curve event with ``epsilon_of`` (method "auto", grid 1e-4): for
    1200 Gaussians that PLD used to say 709.78 < 720, and the charge was accepted."""
    acct = Accountant(ApproxDP(epsilon=720.0, delta=1e-5), event_delta=1e-5)
    event = SelfComposedEvent(GaussianEvent(sigma=1.0), count=1200)
    with pytest.raises(BudgetExceededError):
        acct.charge(event)
    assert acct.ledger == ()
