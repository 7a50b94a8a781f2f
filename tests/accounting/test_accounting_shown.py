"""An accountant shows what it spent rounded up (remaining rounded down), keeping exact fields."""

from __future__ import annotations

import numpy as np

import dpkit as dp
from dpkit.accounting import ZCDP, Accountant, ApproxDP, GaussianEvent, LaplaceEvent, PureDP


def test_spent_repr_is_rounded_up_and_the_field_is_exact() -> None:
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    x = np.random.default_rng(0).uniform(0, 100, 1_000)
    dp.mean(x, bounds=(0, 100), epsilon=0.5, accountant=acct)
    dp.median(x, bounds=(0, 100), epsilon=0.25, accountant=acct)
    spent = acct.spent
    # The statistics pay ε·(1 − 2^-40)-type safe margins: the exact spend is just below 0.75.
    assert spent.epsilon != 0.75 and abs(spent.epsilon - 0.75) < 1e-9  # type: ignore[attr-defined]
    assert repr(spent) == "ApproxDP(epsilon=0.75, delta=0.0)"
    assert "spent=ApproxDP(epsilon=0.75, delta=0.0)" in repr(acct)
    assert repr(acct.remaining) == "ApproxDP(epsilon=0.25, delta=1e-06)"


def test_display_never_understates_spent_or_overstates_remaining() -> None:
    acct = Accountant(PureDP(epsilon=1.0))
    acct.charge(LaplaceEvent(scale=1 / 0.123456789012))
    s = float(repr(acct.spent).split("=")[1].rstrip(")"))
    r = float(repr(acct.remaining).split("=")[1].rstrip(")"))
    assert s >= acct.spent.epsilon * (1 - 1e-12)  # type: ignore[attr-defined]
    assert r <= acct.remaining.epsilon * (1 + 1e-12)  # type: ignore[attr-defined]
    assert abs(s - acct.spent.epsilon) <= 1e-6 * acct.spent.epsilon  # type: ignore[attr-defined]


def test_user_built_guarantees_keep_their_exact_repr_and_equality() -> None:
    assert repr(ApproxDP(epsilon=1.0, delta=1e-6)) == "ApproxDP(epsilon=1.0, delta=1e-06)"
    assert repr(ZCDP(rho=0.30000000000000004)) == "ZCDP(rho=0.30000000000000004)"
    z = Accountant(ZCDP(rho=1.0))
    z.charge(GaussianEvent(sigma=2.0))
    assert z.spent == ZCDP(rho=z.spent.rho)  # type: ignore[attr-defined]
    assert repr(z.spent) == "ZCDP(rho=0.125)"
