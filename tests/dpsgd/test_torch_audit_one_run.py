"""The one-run audit (Steinke, Nasr & Jagielski 2023): its bound, and dpkit.torch runs audited."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from dpkit.audit import (
    draw_canary_coins,
    one_run_audit,
    one_run_bound,
    one_run_epsilon,
    one_run_p_value,
)
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.random import seeded
from dpkit.torch import audit_training, make_private, random_canaries


def _p_value_by_hand(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The theorem's p-value from exact binomial terms (math.comb), one loop per sum."""
    q = math.exp(eps) / (1 + math.exp(eps))

    def pmf(k: int) -> float:
        return math.comb(r, k) * q**k * (1 - q) ** (r - k)

    beta = sum(pmf(k) for k in range(v, r + 1))
    alpha = max(sum(pmf(k) for k in range(v - i, v)) / i for i in range(1, v + 1))
    return min(1.0, beta + 2 * m * delta * alpha)


@pytest.mark.parametrize(
    ("m", "r", "v", "eps", "delta"),
    [
        (100, 10, 10, 1.0, 0.0),
        (1000, 60, 50, 1.5, 1e-5),
        (200, 40, 31, 0.7, 1e-3),
        (50, 7, 1, 2, 0),
    ],
)
def test_p_value_is_the_theorem_exact_binomial_tail(m, r, v, eps, delta):
    got = one_run_p_value(canaries=m, guesses=r, correct=v, epsilon=eps, delta=delta)
    assert got == pytest.approx(_p_value_by_hand(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(
    ("m", "r", "v", "delta", "published"),
    [
        (100, 100, 75, 0.0, 0.702),  # m = r: no abstention, δ = 0
        (100, 100, 75, 1e-4, 0.699),
        (1000, 100, 75, 1e-4, 0.673),  # the worked example of their appendix D
        (100_000, 1510, 1439, 1e-5, 2.675),  # a result reported in their experiments
    ],
)
def test_epsilon_reproduces_the_papers_numbers(m, r, v, delta, published):
    # Steinke, Nasr & Jagielski (2023), values printed to three decimals at 95% confidence
    got = one_run_epsilon(canaries=m, guesses=r, correct=v, delta=delta, confidence=0.95)
    assert got == pytest.approx(published, abs=1e-3)


def test_epsilon_with_every_guess_right_and_delta_zero_is_closed_form():
    # P[Bin(r, q) ≥ r] = q^r: the bound is log(q/(1−q)) at q = (1−confidence)^(1/r)
    for r, conf in ((100, 0.95), (30, 0.99), (500, 0.9)):
        q = (1 - conf) ** (1 / r)
        want = math.log(q / (1 - q))
        got = one_run_epsilon(canaries=1000, guesses=r, correct=r, confidence=conf)
        assert got == pytest.approx(want, rel=1e-7)
        # and the p-value at the bound sits at the level (the bisection's rejected end)
        assert one_run_p_value(canaries=1000, guesses=r, correct=r, epsilon=got) < 1 - conf


def test_delta_and_errors_lower_the_bound():
    base = one_run_epsilon(canaries=1000, guesses=100, correct=95)
    assert 0 < one_run_epsilon(canaries=1000, guesses=100, correct=95, delta=1e-5) < base
    assert one_run_epsilon(canaries=1000, guesses=100, correct=80) < base
    assert one_run_epsilon(canaries=1000, guesses=100, correct=55) == 0.0  # chance level


def _randomized_response(eps: float, gen: np.random.Generator):
    def run(included: np.ndarray) -> np.ndarray:
        keep = gen.random(included.size) < math.exp(eps) / (1 + math.exp(eps))
        return np.where(keep, included, ~included) + gen.random(included.size)

    return run


def test_randomized_response_bound_is_below_its_epsilon_and_catches_a_false_claim():
    # ε-DP randomized response on each coin is the worst case of the theorem: the bound comes
    # close to ε from below, and refutes a claim of half of it
    gen = np.random.default_rng(11)
    kw = {"canaries": 4000, "guess_in": 800, "guess_out": 800, "delta": 1e-6}
    honest = one_run_audit(_randomized_response(2.0, gen), rng=seeded(1), **kw)
    assert 1.5 < honest.epsilon <= 2.0
    leaky = one_run_audit(_randomized_response(4.0, gen), rng=seeded(2), **kw)
    assert leaky.exceeds(2.0)


def test_guesses_come_from_the_extreme_scores():
    coins = np.array([True] * 5 + [False] * 5)
    scores = np.arange(10.0)[::-1]  # the included canaries score highest
    r = one_run_bound(scores, coins, guess_in=3, guess_out=2)
    assert (r.guesses, r.correct, r.guessed_in, r.guessed_out) == (5, 5, 3, 2)
    r = one_run_bound(-scores, coins, guess_in=3, guess_out=2)
    assert r.correct == 0 and r.epsilon == 0.0


def test_bad_inputs_are_refused():
    coins = draw_canary_coins(10, rng=seeded(0))
    with pytest.raises(DataError):
        one_run_bound(np.r_[np.nan, np.zeros(9)], coins, guess_in=1, guess_out=1)
    with pytest.raises(DataError):
        one_run_bound(np.zeros(10), coins.astype(int), guess_in=1, guess_out=1)
    with pytest.raises(PrivacyParameterError):
        one_run_bound(np.zeros(10), coins, guess_in=6, guess_out=5)
    with pytest.raises(PrivacyParameterError):
        one_run_epsilon(canaries=10, guesses=5, correct=6)
    with pytest.raises(PrivacyParameterError):
        one_run_bound(np.zeros(10), coins, guess_in=1, guess_out=1, delta=1.5)
    with pytest.raises(DataError):
        one_run_audit(lambda inc: np.zeros(3), canaries=10, guess_in=1, guess_out=1)


# --- dpkit.torch: an honest run, and one with clipping and noise broken -----------------------

D, CLASSES = 100, 10


def _trainer(broken: bool):
    def train(ds):
        torch.manual_seed(0)
        model = nn.Linear(D, CLASSES)
        run = make_private(
            model, torch.optim.SGD(model.parameters(), lr=2.0), ds, n_samples=250,
            batch_size=125, epochs=4, max_grad_norm=1.0, delta=1e-5, noise_multiplier=4.0,
            rng=seeded(3),
        )  # fmt: skip
        # 250 = 200 examples + half of the 100 canaries: declared, not len(ds) (coin-dependent)
        if broken:  # the bug being caught: no clipping, and noise 1000 times too small
            run.optimizer.clipper.max_grad_norm = 1e9
            run.optimizer.plan = dataclasses.replace(run.plan, sigma=run.plan.sigma * 1e-3)
        run.fit(nn.CrossEntropyLoss(reduction="none"))
        _trainer.claimed = run.epsilon()  # type: ignore[attr-defined]
        return model

    return train


@pytest.fixture(scope="module")
def audit_data():
    gen = np.random.default_rng(0)
    x = torch.tensor(gen.standard_normal((200, D)), dtype=torch.float32)
    y = torch.tensor(gen.integers(0, CLASSES, 200))
    canaries = random_canaries(100, shape=(D,), classes=CLASSES, rng=1)
    return TensorDataset(x, y), canaries


@pytest.mark.parametrize("broken", [False, True])
def test_one_run_audit_of_dpkit_torch(audit_data, broken):
    data, canaries = audit_data
    r = audit_training(
        _trainer(broken), data, canaries, guess_in=15, guess_out=15, delta=1e-5, rng=seeded(5)
    )
    claimed = _trainer.claimed  # type: ignore[attr-defined]
    assert 1.0 < claimed < 2.0  # the run claims ε ≈ 1.4 at δ = 1e-5
    if broken:
        assert r.exceeds(claimed), str(r)  # every guess right: ε ≥ 2.25 refutes the claim
    else:
        assert r.epsilon <= claimed, str(r)
