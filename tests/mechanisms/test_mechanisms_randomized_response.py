"""Randomized response: ε mappings, the report distribution, the estimator and its CI.

Statistical thresholds: p > 1e-4 with fixed seeds (chi-square, exact binomial), see
test_mechanisms_additive.py.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms import RandomizedResponse

P_MIN = 1e-4


def test_kamath_gamma_and_warner_coin_agree() -> None:
    # Kamath 2020: truthful with probability 1/2 + γ; γ = 1/4 is Warner's p = 3/4; ε = ln 3
    by_gamma = RandomizedResponse(gamma=0.25)
    by_coin = RandomizedResponse(truth_probability=0.75)
    by_eps = RandomizedResponse(epsilon=math.log(3))
    assert by_gamma.p == by_coin.p == 0.75
    assert by_gamma.epsilon == pytest.approx(math.log(3), rel=1e-14)
    assert by_gamma.epsilon >= math.log(3)  # reported ε is an upper bound
    assert by_eps.p <= 0.75 and by_eps.p == pytest.approx(0.75, rel=1e-12)
    assert math.log(by_eps.p / by_eps.q) <= math.log(3)


@pytest.mark.parametrize("k", [2, 3, 10])
@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0, 60.0])
def test_epsilon_mapping_never_exceeds(k: int, eps: float) -> None:
    rr = RandomizedResponse(epsilon=eps, categories=k)
    num = Fraction(rr.p)
    ratio = num * (k - 1) / (1 - num)  # exact p/q of what is sampled
    with localcontext() as ctx:
        ctx.prec = 60
        bound = Fraction(Decimal(eps).exp())  # e^ε to 60 digits
    assert ratio <= bound
    if eps < 40:  # beyond that, 1 - p is below the 2^-60 resolution
        assert rr.p == pytest.approx(math.exp(eps) / (math.exp(eps) + k - 1), rel=1e-12)


def test_gamma_to_epsilon() -> None:
    g = 0.1
    assert RandomizedResponse(gamma=g).epsilon == pytest.approx(math.log((1 + 2 * g) / (1 - 2 * g)))


def test_reports_follow_p_and_q() -> None:
    rr = RandomizedResponse(epsilon=1.0, categories=4)
    answers = np.array([0] * 60_000 + [2] * 60_000)
    reports = rr.randomize(answers, rng=np.random.default_rng(4))
    for truth in (0, 2):
        got = np.bincount(reports[answers == truth], minlength=4)
        expected = np.full(4, rr.q)
        expected[truth] = rr.p
        assert stats.chisquare(got, expected * 60_000).pvalue > P_MIN


def test_estimator_unbiased_and_ci_covers() -> None:
    rr = RandomizedResponse(gamma=0.2)
    repeats, n, true_p = 1000, 2000, 0.3
    rng = np.random.default_rng(8)
    truth = rng.random((repeats, n)) < true_p
    reports = rr.randomize(truth, rng=rng)
    ests = [rr.estimate(row) for row in reports]
    values = np.array([e.value for e in ests])
    # unbiased for the realised share of each row; the average error is 0 ± 4 standard errors
    realised = truth.mean(axis=1)
    err = values - realised
    assert abs(err.mean()) < 4 * err.std() / math.sqrt(repeats)
    # the estimated variance agrees with Kamath's (2020) bound and with the spread over repeats
    var = np.array([e.variance for e in ests])
    assert np.all(var <= ests[0].variance_bound * 1.01)
    assert values.var() == pytest.approx(var.mean(), rel=0.15)  # sd of a variance, n=1000: 4.5%
    # 95% intervals for the population share cover it about 95% of the time (normal approx)
    cover = sum(abs(e.value - true_p) <= e.ci(0.05) for e in ests)
    assert stats.binomtest(cover, repeats, 0.95).pvalue > P_MIN


def test_kary_estimate() -> None:
    rr = RandomizedResponse(epsilon=2.0, categories=3)
    truth = np.repeat([0, 1, 2], [5000, 3000, 2000])
    est = rr.estimate(rr.randomize(truth, rng=5))
    assert isinstance(est.value, np.ndarray) and est.value.shape == (3,)
    assert est.value.sum() == pytest.approx(1.0)
    assert np.all(np.abs(est.value - [0.5, 0.3, 0.2]) <= 4 * np.sqrt(est.variance))
    lo, hi = est.interval(0.05)
    assert np.all(lo < est.value) and np.all(est.value < hi)


def test_binary_accepts_bools_and_returns_ints() -> None:
    rr = RandomizedResponse(epsilon=1.0)
    out = rr.randomize([True, False, True], rng=0)
    assert out.dtype == np.int64 and set(out.tolist()) <= {0, 1}


@pytest.mark.parametrize(
    "bad", [None, [], [0, 2], [-1], [0.5], [float("nan")], ["yes"], [[0, 1], [1, 5]]]
)
def test_bad_answers(bad: object) -> None:
    rr = RandomizedResponse(epsilon=1.0)
    with pytest.raises(DataError):
        rr.estimate(bad)  # reports (post-processing): only codes of the domain


@pytest.mark.parametrize("bad", [None, [], [float("nan")], ["yes"]])
def test_answers_with_no_place_in_the_domain_are_refused(bad: object) -> None:
    # a missing answer under missing="raise" (NaN, a non-number), or no answers at all
    with pytest.raises(DataError):
        RandomizedResponse(epsilon=1.0).randomize(bad)


@pytest.mark.parametrize(("far", "last"), [([0, 2], [0, 1]), ([-1], [1]), ([0.5], [1]),
                                           ([[0, 1], [1, 5]], [[0, 1], [1, 1]])])  # fmt: skip
def test_answers_outside_the_categories_are_randomised_as_the_last(
    far: object, last: object
) -> None:
    rr = RandomizedResponse(epsilon=1.0)
    np.testing.assert_array_equal(rr.randomize(far, rng=3), rr.randomize(last, rng=3))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gamma": 0.5},
        {"gamma": 0.0},
        {"gamma": -0.1},
        {"truth_probability": 1.0},
        {"truth_probability": 0.5},
        {"truth_probability": 0.2, "categories": 3},
        {"gamma": 0.2, "categories": 3},
        {"epsilon": 1.0, "categories": 1},
        {"epsilon": 1e-30},
    ],
)
def test_bad_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(PrivacyParameterError):
        RandomizedResponse(**kwargs)  # type: ignore[arg-type]
