"""Package surface, accounting integration and the runnable examples of docs/mechanisms.md."""

from __future__ import annotations

import doctest
import math
from pathlib import Path

import numpy as np
import pytest

import dpkit.mechanisms as mech
from dpkit.accounting import ZCDP, Accountant, ApproxDP, PureDP, epsilon_of
from dpkit.errors import BudgetExceededError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mechanisms.md"


def test_all_sorted_and_complete() -> None:
    names = list(mech.__all__)
    assert names == sorted(names)
    for name in names:
        assert hasattr(mech, name)
    assert mech.DiscreteLaplace is mech.Geometric


@pytest.mark.parametrize(
    ("mechanism", "eps"),
    [
        (mech.Laplace(epsilon=0.3, sensitivity=7.0, shape=5), 0.3),
        (mech.Geometric(epsilon=0.1, sensitivity=3), 0.1),
        (mech.RandomizedResponse(epsilon=0.9, categories=5), 0.9),
        (mech.Exponential(epsilon=0.4), 0.4),
        (mech.ReportNoisyMax(epsilon=0.4), 0.4),
        (mech.PermuteAndFlip(epsilon=0.4), 0.4),
        (mech.SparseVector(epsilon=0.4, threshold=1.0), 0.4),
    ],
)
def test_pure_events_cost_epsilon(mechanism: object, eps: float) -> None:
    cost = epsilon_of(mechanism.event)  # type: ignore[attr-defined]
    assert cost == pytest.approx(eps, rel=1e-14)
    acct = Accountant(PureDP(epsilon=eps))
    acct.charge(mechanism.event)  # type: ignore[attr-defined]  # the whole budget fits exactly


@pytest.mark.parametrize("shape", [(), (3,)])
def test_approx_events_cost_at_most_epsilon_delta(shape: tuple[int, ...]) -> None:
    g = mech.Gaussian(epsilon=0.8, delta=1e-6, sensitivity=2.0, shape=shape)
    assert epsilon_of(g.event, delta=1e-6) <= 0.8 * (1 + 1e-12)
    dg = mech.DiscreteGaussian(epsilon=0.8, delta=1e-6, sensitivity=2.0, shape=shape)
    assert epsilon_of(dg.event, delta=1e-6) <= 0.8


def test_budget_is_enforced_across_mechanisms() -> None:
    acct = Accountant(PureDP(epsilon=1.0))
    gen = np.random.default_rng(0)
    mech.Laplace(epsilon=0.5).release(10.0, rng=gen, accountant=acct, label="sum")
    mech.Exponential(epsilon=0.25).select(["a", "b"], [0.0, 1.0], rng=gen, accountant=acct)
    mech.RandomizedResponse(epsilon=0.25).randomize([0, 1, 1], rng=gen, accountant=acct)
    assert acct.spent.epsilon == pytest.approx(1.0)  # type: ignore[attr-defined]
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        mech.Geometric(epsilon=0.01).release(3, rng=gen, accountant=acct)
    assert gen.bit_generator.state == state  # nothing drawn, nothing released
    assert len(acct.ledger) == 3
    assert acct.ledger[0].label == "sum"


def test_zcdp_budget_pays_for_gaussians() -> None:
    acct = Accountant(ZCDP(rho=0.5))
    for _ in range(4):
        mech.DiscreteGaussian(rho=0.125).release(5, rng=1, accountant=acct)
    with pytest.raises(BudgetExceededError):
        mech.DiscreteGaussian(rho=0.125).release(5, rng=1, accountant=acct)


def test_approx_budget_with_gaussian() -> None:
    acct = Accountant(ApproxDP(epsilon=2.0, delta=1e-5))
    y = mech.Gaussian(epsilon=1.0, delta=1e-6).release(0.0, rng=2, accountant=acct)
    assert math.isfinite(y)  # type: ignore[arg-type]
    assert len(acct.ledger) == 1


def test_docs_examples_run() -> None:
    text = DOCS.read_text(encoding="utf-8")
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, DOCS.name, str(DOCS), 0)
    assert test.examples, "the docs page has runnable examples"
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    runner.run(test)
    assert runner.failures == 0
