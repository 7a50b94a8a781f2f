"""series_density with a private n and the default degree charges the whole release up front.

It used to charge and draw the noisy count, then charge the coefficients, whose degree depends
on that count: an accountant that refused the second charge had already paid for (and the
generator already drawn) noise for a release that never happened.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpkit.accounting import ZCDP, Accountant, ApproxDP, PureDP
from dpkit.errors import BudgetExceededError
from dpkit.random import seeded
from dpkit.release import series_density

X = np.random.default_rng(0).beta(2, 5, size=2000)


def _state(gen: np.random.Generator) -> str:
    """The generator's state as text (its arrays compared element by element)."""
    return json.dumps(gen.bit_generator.state, default=lambda a: np.asarray(a).tolist())


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_refused_charge_spends_nothing_and_draws_nothing(delta: float) -> None:
    # The budget covers the count's share (10% of ε) but not the whole release.
    budget = PureDP(epsilon=0.5) if delta == 0.0 else ApproxDP(epsilon=0.5, delta=1e-5)
    acct = Accountant(budget)
    gen = seeded(1)
    state = _state(gen)
    with pytest.raises(BudgetExceededError):
        series_density(X, bounds=(0, 1), epsilon=1.0, delta=delta, accountant=acct, rng=gen)
    assert not acct.ledger
    assert _state(gen) == state


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_one_charge_that_is_the_release_event(delta: float) -> None:
    acct = Accountant(ApproxDP(epsilon=2.0, delta=1e-5))
    dens = series_density(
        X, bounds=(0, 1), epsilon=1.0, delta=delta, accountant=acct, rng=seeded(2)
    )
    assert len(acct.ledger) == 1
    assert acct.spent.epsilon <= 1.0 + 1e-12  # type: ignore[attr-defined]
    assert acct.spent.delta <= delta + 1e-15  # type: ignore[attr-defined]
    # the reported event costs what was charged
    again = Accountant(ApproxDP(epsilon=2.0, delta=1e-5))
    again.charge(dens.event, delta=delta) if delta else again.charge(dens.event)
    assert again.spent.epsilon == acct.spent.epsilon  # type: ignore[attr-defined]


def test_the_noise_fits_the_budget_charged_in_advance() -> None:
    # δ > 0: the coefficients' noise is calibrated after the degree is known, to the ρ charged
    # before it; the drawn σ must give at most that ρ for the ℓ2 sensitivity of that degree.
    from dpkit.accounting import ZCDPEvent
    from dpkit.release._series import _plan

    acct = Accountant(ZCDP(rho=5.0))
    dens = series_density(X, bounds=(0, 1), epsilon=1.0, delta=1e-6, accountant=acct, rng=seeded(3))
    main = dens.event.events[1]  # type: ignore[attr-defined]
    assert isinstance(main, ZCDPEvent)
    m = (dens.raw.size,)
    _, _, noise = _plan(m, 1, 0.9, 1e-6, budget=main)
    assert noise.event is main
    assert noise.l2**2 / (2 * float(noise.scale) ** 2) <= main.rho
