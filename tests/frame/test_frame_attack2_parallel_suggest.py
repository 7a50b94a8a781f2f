"""``suggest_bounds`` on a part of a parallel composition escaped the part's budget.

A part made by ``Accountant.parallel`` pays every release from its own budget, which nothing
else can reach: that is what lets the parent pay the budget once. ``Query.suggest_bounds``
did not ask who pays: with no ``accountant=`` it read the part's data at ε each time, charged
to nothing (three calls at ε = 1 in a part of budget 1), and with another accountant it
charged that one while the parent's ledger still claimed the part's budget. It now pays from
the part's budget and refuses another accountant, as the part's releases do.
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit as dp
import dpkit.frame as dpf
from dpkit.errors import BudgetExceededError, PrivacyParameterError

DF = pl.DataFrame({"u": [1, 1, 2, 3, 3], "k": ["a", "b", "b", "c", "a"], "x": [1, 2, 3, 4, 5]})


def _part() -> dpf.Query:
    acct = dp.Accountant(dp.PureDP(epsilon=1.0))
    parts = acct.parallel(
        dpf.Query(DF, privacy_unit="u").partition_by("k", keys=["a", "b"]),
        budget=dp.PureDP(epsilon=1.0),
    )
    return parts["a"]  # type: ignore[no-any-return]


def test_suggest_bounds_on_a_part_pays_from_its_budget() -> None:
    part = _part()
    part.suggest_bounds("x", epsilon=0.6, rng=dp.random.seeded(1))
    with pytest.raises(BudgetExceededError):  # 0.6 + 0.6 > the part's 1
        part.suggest_bounds("x", epsilon=0.6, rng=dp.random.seeded(2))
    with pytest.raises(BudgetExceededError):  # and its releases share that budget
        part.agg(dpf.count(), max_rows=2).release(epsilon=0.6, rng=dp.random.seeded(3))


def test_suggest_bounds_on_a_part_refuses_another_accountant() -> None:
    other = dp.Accountant(dp.PureDP(epsilon=10.0))
    with pytest.raises(PrivacyParameterError, match="parallel"):
        _part().suggest_bounds("x", epsilon=0.5, accountant=other, rng=dp.random.seeded(1))
    assert not other.ledger
