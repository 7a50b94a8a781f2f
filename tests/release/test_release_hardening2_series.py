"""series_density charges the whole release once, up front, with a degree fixed before it.

It used to charge and draw the noisy count, then charge the coefficients, whose degree depended
on that count: an accountant that refused the second charge had already paid for (and the
generator already drawn) noise for a release that never happened. Later the whole release was
charged up front, but the degree still came from the noisy count, so its accuracy could not be
known before the charge. Now the degree comes from public inputs only (degree=, n= or
expected_n=): a private n with none of them is refused, before anything is charged.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpkit.accounting import Accountant, ApproxDP, PureDP
from dpkit.errors import BudgetExceededError, PrivacyParameterError
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
        series_density(
            X, bounds=(0, 1), epsilon=1.0, delta=delta, expected_n=2000, accountant=acct, rng=gen
        )
    assert not acct.ledger
    assert _state(gen) == state


def test_private_n_without_a_degree_is_refused_before_anything() -> None:
    acct = Accountant(PureDP(epsilon=5.0))
    gen = seeded(1)
    state = _state(gen)
    with pytest.raises(PrivacyParameterError, match="degree="):
        series_density(X, bounds=(0, 1), epsilon=1.0, accountant=acct, rng=gen)
    assert not acct.ledger
    assert _state(gen) == state


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_one_charge_that_is_the_release_event(delta: float) -> None:
    acct = Accountant(ApproxDP(epsilon=2.0, delta=1e-5))
    dens = series_density(
        X, bounds=(0, 1), epsilon=1.0, delta=delta, expected_n=2000, accountant=acct, rng=seeded(2)
    )
    assert len(acct.ledger) == 1
    assert acct.spent.epsilon <= 1.0 + 1e-12  # type: ignore[attr-defined]
    assert acct.spent.delta <= delta + 1e-15  # type: ignore[attr-defined]
    # the reported event costs what was charged
    again = Accountant(ApproxDP(epsilon=2.0, delta=1e-5))
    again.charge(dens.event, delta=delta) if delta else again.charge(dens.event)
    assert again.spent.epsilon == acct.spent.epsilon  # type: ignore[attr-defined]
