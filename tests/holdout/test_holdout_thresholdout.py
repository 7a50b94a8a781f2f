"""Thresholdout: its rules, its budget, its privacy (audited), and the Science experiment."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpkit.accounting import Accountant, PureDP
from dpkit.audit import epsilon_lower_bound
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.holdout import Thresholdout, _thresholdout, reusable_holdout_experiment


def test_below_threshold_answers_the_training_value_exactly() -> None:
    train = np.r_[np.zeros(500), np.ones(500)]
    t = Thresholdout(train, train[::-1].copy(), threshold=0.1, sigma=0.001, budget=3, rng=0)
    assert t.query(lambda r: r) == 0.5  # identical means: the train mean, untouched
    assert t.remaining == 3 and t.queries == 1


def test_over_threshold_answers_noisy_holdout_and_spends_budget() -> None:
    train, holdout = np.zeros(1000), np.ones(1000)
    t = Thresholdout(train, holdout, threshold=0.1, sigma=0.001, budget=2, rng=0)
    a = t.query(lambda r: r)
    # holdout mean 1 plus Lap(0.001): within 0.02 except with probability e^-20
    assert a != 1.0 and abs(a - 1.0) < 0.02
    assert t.remaining == 1
    t.query(lambda r: r)
    assert t.remaining == 0
    with pytest.raises(BudgetExceededError):
        t.query(lambda r: r)


def test_vectorized_and_batched_queries_agree_with_rules() -> None:
    g = np.random.default_rng(1)
    train, holdout = g.random((400, 3)), g.random((400, 3))
    t = Thresholdout(train, holdout, threshold=0.2, sigma=0.001, budget=5, rng=2)
    answers = t.query_many(lambda R: R)
    assert np.allclose(answers, train.mean(axis=0))  # gaps ~0.02 ≪ T = 0.2
    one = t.query(lambda R: R[:, 0], vectorized=True)
    assert one == pytest.approx(train[:, 0].mean())
    assert t.queries == 4


def test_batch_stops_when_budget_runs_out() -> None:
    train, holdout = np.zeros((100, 4)), np.ones((100, 4))
    t = Thresholdout(train, holdout, threshold=0.1, sigma=0.001, budget=2, rng=0)
    answers = t.query_many(lambda R: R)
    assert np.all(np.isfinite(answers[:2])) and np.all(np.isnan(answers[2:]))
    assert t.remaining == 0


def test_epsilon_and_accountant() -> None:
    acct = Accountant(PureDP(epsilon=10.0))
    t = Thresholdout(np.zeros(100), np.zeros(100), threshold=0.1, sigma=0.05, budget=5,
                     accountant=acct, rng=0)  # fmt: skip
    # 2·B·Δ/σ with Δ = 1/100, plus the grid's rounding (relative ~1e-10)
    assert t.epsilon == pytest.approx(2 * 5 * 0.01 / 0.05, rel=1e-9)
    assert acct.spent.epsilon == pytest.approx(t.epsilon)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 0.0, "sigma": 0.1, "budget": 1},
        {"threshold": 0.1, "sigma": -1.0, "budget": 1},
        {"threshold": 0.1, "sigma": 0.1, "budget": 0},
        {"threshold": 0.1, "sigma": 0.1, "budget": 1, "bounds": (1, 0)},
    ],
)
def test_bad_parameters(kwargs: dict[str, Any]) -> None:
    with pytest.raises(PrivacyParameterError):
        Thresholdout(np.zeros(10), np.zeros(10), **kwargs)


def test_bad_queries() -> None:
    t = Thresholdout(np.zeros(10), np.zeros(10), threshold=0.1, sigma=0.1, budget=1, rng=0)
    with pytest.raises(DataError):
        t.query(lambda r: float("nan"))
    with pytest.raises(DataError):
        t.query(lambda r: 1 / 0)
    with pytest.raises(DataError):
        t.query(lambda R: R[:3], vectorized=True)
    with pytest.raises(DataError):
        Thresholdout(np.zeros(10), np.zeros(0), threshold=0.1, sigma=0.1, budget=1)


def _one_query(holdout: Any, rng: np.random.Generator) -> float:
    # n_h = 2, values in [0, 1]: Δ = 1/2; σ = 1/2, budget 1 → ε = 2Δ/σ = 2
    t = Thresholdout(np.zeros(2), holdout, threshold=0.25, sigma=0.5, budget=1, rng=rng)
    return t.query(lambda r: r)


def test_audit_does_not_refute_epsilon() -> None:
    res = epsilon_lower_bound(_one_query, np.zeros(2), np.array([0.0, 1.0]), trials=1000, rng=0)
    assert res.epsilon <= 2.0


def test_audit_catches_noise_that_is_too_small(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _thresholdout.laplace
    monkeypatch.setattr(
        _thresholdout, "laplace", lambda v, scale, rng=None: real(v, scale / 20, rng=rng)
    )
    res = epsilon_lower_bound(_one_query, np.zeros(2), np.array([0.0, 1.0]), trials=1000, rng=0)
    assert res.epsilon > 2.0


def test_science_experiment_at_n_d_2000() -> None:
    """Dwork et al. (2015): the reused holdout overfits, Thresholdout does not (n = d = 2,000).

    Accuracies over n = 2,000 records have standard error √(¼/2000) ≈ 0.011, so ±0.045 is
    4 standard errors around chance.
    """
    c = reusable_holdout_experiment(n=2000, d=2000, rng=0)
    big = c.k >= 100
    assert np.all(np.abs(c.fresh - 0.5) < 0.045)  # the models are worthless on new data
    assert np.all(np.abs(c.fresh_thresholdout - 0.5) < 0.045)
    assert np.min(c.standard_holdout[big]) > 0.58  # the reused holdout climbs > 7 SE
    assert abs(np.mean(c.thresholdout[big]) - 0.5) < 0.03  # Thresholdout reports ~chance
    assert np.mean(c.thresholdout[big]) < np.mean(c.standard_holdout[big]) - 0.08
    assert 0.005 < c.over_threshold / c.queries < 0.08  # ≈ 2% of queries cross (paper)


def _spying_query(holdout: Any, rng: np.random.Generator) -> float:
    # A vectorised query that gives every record the value "is the secret record present?":
    # not a statistical query. n_h = 50, Δ = 1/50, σ = 0.5, budget 1 → ε = 2Δ/σ = 0.08.
    t = Thresholdout(np.zeros(50), holdout, threshold=0.25, sigma=0.5, budget=1, rng=rng)
    return t.query(lambda R: np.full(len(R), float(np.any(R == 1.0))), vectorized=True)


def test_vectorized_query_cannot_see_other_holdout_records() -> None:
    # Regression: the whole holdout was passed to a vectorised query, so one record could move
    # every value (sensitivity 1 instead of 1/50) and the audit found ε_LB far above 0.08.
    d1 = np.zeros(50)
    d1[7] = 1.0
    t = Thresholdout(np.zeros(50), d1, threshold=0.25, sigma=0.5, budget=1, rng=0)
    assert t.epsilon < 0.081
    res = epsilon_lower_bound(_spying_query, np.zeros(50), d1, trials=1000, rng=0)
    assert res.epsilon <= t.epsilon


def test_failures_on_holdout_records_are_not_revealed() -> None:
    # Regression: a query that raised (or gave NaN) on one holdout record raised DataError,
    # revealing that record for free. Now such a record counts as the middle of the bounds.
    d1 = np.zeros(10)
    d1[3] = 1.0
    for bad in (lambda r: 1 / 0 if r == 1.0 else 0.0, lambda r: float("nan") if r else 0.0):
        t = Thresholdout(np.zeros(10), d1, threshold=0.3, sigma=1e-3, budget=5, rng=0)
        assert t.query(bad) == 0.0  # gap 0.05 < T: the training answer, no error
    t = Thresholdout(np.zeros(10), d1, threshold=0.3, sigma=1e-3, budget=5, rng=0)
    vec = t.query_many(lambda R: np.column_stack([R, 1 / (1 - R)]) if np.all(R < 1) else 1 / 0)
    assert np.array_equal(vec, [0.0, 1.0])
