"""Sparse vector (AboveThreshold): budget split, stopping rule, charging once, answer law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpkit.accounting import Accountant, PureDP
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.mechanisms import SparseVector

P_MIN = 1e-4


def test_budget_split_follows_lyu_su_li() -> None:
    for c, monotonic in ((1, False), (4, False), (4, True)):
        sv = SparseVector(epsilon=2.0, threshold=0.0, max_above=c, monotonic=monotonic)
        assert sv.epsilon_threshold + sv.epsilon_queries == pytest.approx(2.0)
        ratio = (c if monotonic else 2 * c) ** (2 / 3)
        assert sv.epsilon_queries / sv.epsilon_threshold == pytest.approx(ratio)
        assert sv.threshold_scale == pytest.approx(1.0 / sv.epsilon_threshold, rel=1e-9)
        factor = c if monotonic else 2 * c
        assert sv.query_scale == pytest.approx(factor / sv.epsilon_queries, rel=1e-9)


def test_stops_after_max_above_positives() -> None:
    sv = SparseVector(epsilon=1.0, threshold=0.0, max_above=2)
    gen = np.random.default_rng(0)
    answers = sv.run([1e6, -1e6, 1e6, 1e6, 1e6], rng=gen)  # far from the threshold
    assert answers == [True, False, True]
    assert sv.halted and sv.remaining == 0
    with pytest.raises(BudgetExceededError, match="positive"):
        sv.test(5.0, rng=gen)
    with pytest.raises(BudgetExceededError):
        sv.run([5.0], rng=gen)


def test_charged_once_for_the_whole_run() -> None:
    acct = Accountant(PureDP(epsilon=1.0))
    sv = SparseVector(epsilon=0.6, threshold=10.0, max_above=3)
    gen = np.random.default_rng(1)
    for _ in range(50):
        sv.test(-1e6, rng=gen, accountant=acct, label="svt")
    assert len(acct.ledger) == 1
    assert acct.spent.epsilon == pytest.approx(0.6)  # type: ignore[attr-defined]
    # a second run that does not fit is refused before any noise is drawn
    sv2 = SparseVector(epsilon=0.6, threshold=10.0)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        sv2.test(1.0, rng=gen, accountant=acct)
    assert gen.bit_generator.state == state
    assert sv2.remaining == 1


def test_answer_at_threshold_is_a_fair_coin() -> None:
    # q = T: q + ν ≥ T + ρ with ν, ρ symmetric and independent has probability 1/2 (+ ties on a
    # 2^-40 grid, negligible)
    gen = np.random.default_rng(2)
    hits = sum(SparseVector(epsilon=1.0, threshold=3.0).test(3.0, rng=gen) for _ in range(1500))
    assert stats.binomtest(hits, 1500, 0.5).pvalue > P_MIN


def test_answer_law_away_from_threshold() -> None:
    # P(ν − ρ ≥ d) for ν ~ Lap(b2), ρ ~ Lap(b1), b1 ≠ b2 (difference of two Laplaces)
    sv0 = SparseVector(epsilon=1.0, threshold=0.0)
    b1, b2, d = sv0.threshold_scale, sv0.query_scale, 2.0

    def tail(x: float) -> float:  # P(ν − ρ > x), x ≥ 0
        return (b2**2 * math.exp(-x / b2) - b1**2 * math.exp(-x / b1)) / (2 * (b2**2 - b1**2))

    gen = np.random.default_rng(3)
    hits = sum(SparseVector(epsilon=1.0, threshold=0.0).test(-d, rng=gen) for _ in range(1500))
    assert stats.binomtest(hits, 1500, tail(d)).pvalue > P_MIN


def test_bad_inputs() -> None:
    sv = SparseVector(epsilon=1.0, threshold=0.0)
    for bad in (math.nan, None, [1.0, 2.0], "x"):
        with pytest.raises(DataError):
            sv.test(bad)  # type: ignore[arg-type]
    with pytest.raises(DataError):
        sv.run([1.0, math.nan])
    with pytest.raises(DataError):
        sv.run([])
    assert sv.remaining == 1
    with pytest.raises(PrivacyParameterError):
        SparseVector(epsilon=1.0, threshold=math.inf)
    with pytest.raises(PrivacyParameterError):
        SparseVector(epsilon=1.0, threshold=0.0, max_above=0)


def test_the_first_query_fixes_the_accountant() -> None:
    """A run is charged once, at its first query; a later query cannot switch accountants."""
    gen = np.random.default_rng(2)
    uncharged = SparseVector(epsilon=0.5, threshold=10.0)
    uncharged.test(-1e6, rng=gen)
    with pytest.raises(PrivacyParameterError, match="first query"):
        uncharged.test(-1e6, rng=gen, accountant=Accountant(PureDP(epsilon=1.0)))
    acct = Accountant(PureDP(epsilon=1.0))
    charged = SparseVector(epsilon=0.5, threshold=10.0)
    charged.test(-1e6, rng=gen, accountant=acct)
    with pytest.raises(PrivacyParameterError, match="first query"):
        charged.test(-1e6, rng=gen, accountant=Accountant(PureDP(epsilon=1.0)))
    charged.test(-1e6, rng=gen)  # same run, already paid for
    assert len(acct.ledger) == 1
