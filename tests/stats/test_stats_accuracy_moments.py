"""dpkit.stats.accuracy for var, std, cov (worst-case bounds) and quantiles (rank error).

Coverage: the share of releases (200 each, fixed seed, exact noise) within ``accuracy(alpha)``
of the exact statistic of the clamped data must be at least ``1 − alpha`` minus 4 binomial
standard deviations (√(alpha(1 − alpha)/m)): the bounds hold for every dataset, so no upper band.
Each bound must also not be loose beyond a stated factor on data near its worst case (mean near a
bound): the empirical ``1 − alpha`` quantile of the error reaches at least that share of it (the
factors below are about half of what was measured, so a bound several times too wide fails).

The quantile's rank error is checked where the exponential mechanism's utility bound is nearly
tight: n equal records, so every grid point but one has the score −n/2, and ε chosen so that the
bound ``t`` is just under n/2. Then a miss (a value other than the records') happens with
probability ``(G − 1)e^{−εn/2} / (1 + (G − 1)e^{−εn/2}) ≈ 0.138`` at alpha = 0.2: the miss rate
must be at most alpha (+4 sd) and at least alpha/2 (a bound with a wrong constant fails one side).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit.stats as st
from dpkit.accounting import Neighbouring
from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded
from dpkit.stats._quantile import _grid_data, quantile_grid

ALPHA = 0.1
RELEASES = 200
X = np.array([10.0] * 180 + [0.0] * 20)  # u-mean 0.8: near the worst case of the bounds
Y = np.where(X > 5, 1.0, 0.0)


def _floor(m: int, alpha: float) -> float:
    return 1 - alpha - 4 * math.sqrt(alpha * (1 - alpha) / m)


@pytest.mark.parametrize(
    ("statistic", "kw", "truth", "tight"),
    [
        ("var", {"n": X.size}, X.var(), 0.25),
        ("var", {"expected_n": X.size}, X.var(), 0.1),
        ("std", {"n": X.size}, X.std(), 0.05),
        ("var", {"n": X.size, "ddof": 1, "delta": 1e-6}, X.var(ddof=1), 0.1),
    ],
    ids=["var-n", "var-unknown-n", "std-n", "var-ddof-gauss"],
)
def test_moment_bound_covers(statistic, kw, truth, tight):
    w = st.accuracy(statistic, bounds=(0, 10), epsilon=1.0, alpha=ALPHA, **kw)
    release = {k: v for k, v in kw.items() if k != "expected_n"}
    gen = seeded(1)
    fn = getattr(st, statistic)
    err = np.array(
        [
            abs(fn(X, bounds=(0, 10), epsilon=1.0, rng=gen, **release).value - truth)
            for _ in range(RELEASES)
        ]
    )
    assert np.mean(err <= w) >= _floor(RELEASES, ALPHA)
    assert np.quantile(err, 1 - ALPHA) >= tight * w


def test_cov_bound_covers_with_a_noisy_count():
    bounds = ((0, 10), (0, 1))
    w = st.accuracy("cov", bounds=bounds, epsilon=1.0, alpha=ALPHA, expected_n=X.size)
    truth = np.cov(X, Y, ddof=0)[0, 1]
    gen = seeded(2)
    err = np.array(
        [abs(st.cov(X, Y, bounds=bounds, epsilon=1.0, rng=gen).value - truth) for _ in range(150)]
    )
    assert np.mean(err <= w) >= _floor(150, ALPHA)
    assert np.quantile(err, 1 - ALPHA) >= 0.03 * w


def test_median_rank_error_is_nearly_attained():
    alpha, n = 0.2, 200
    g = quantile_grid(0.0, 1.0)
    _, kl, kh = _grid_data(np.empty(0), 0.0, 1.0, g)
    points = kh - kl + 1
    eps = (math.log(points / alpha) + math.log(1.25)) / (n / 2)
    t = st.accuracy("median", bounds=(0, 1), epsilon=eps, alpha=alpha)
    assert n / 2 - 1 < t < n / 2  # every value but the records' is n/2 below the best score
    x = np.full(n, 0.5)
    gen = seeded(2)
    m = 400
    misses = sum(st.median(x, bounds=(0, 1), epsilon=eps, rng=gen).value != 0.5 for _ in range(m))
    band = 4 * math.sqrt(alpha * (1 - alpha) / m)
    assert alpha / 2 <= misses / m <= alpha + band


def test_quantile_rank_error_scales_with_the_split_and_relation():
    one = st.accuracy("quantile", q=0.9, bounds=(0, 1), epsilon=1.0)
    two = st.accuracy("quantile", q=[0.1, 0.9], bounds=(0, 1), epsilon=1.0)
    assert math.isclose(two, 2 * one, rel_tol=1e-9)
    rep = st.accuracy(
        "quantile", q=0.9, bounds=(0, 1), epsilon=1.0, neighbouring=Neighbouring.REPLACE
    )
    assert math.isclose(rep, one / 0.9, rel_tol=1e-9)  # Δu: 1 instead of max(q, 1 − q)


def test_var_bound_is_infinite_when_the_count_may_vanish():
    assert st.accuracy("var", bounds=(0, 1), epsilon=0.01, expected_n=3) == math.inf


@pytest.mark.parametrize(
    ("statistic", "kw"),
    [
        ("corr", {"bounds": ((0, 1), (0, 1)), "n": 10}),
        ("var", {"bounds": (0, 1)}),  # no n, no expected_n
        ("var", {"bounds": (0, 1), "n": 10, "ddof": -1}),
        ("cov", {"bounds": (0, 1), "n": 10}),
        ("quantile", {"bounds": (1, 0)}),
    ],
)
def test_refusals(statistic, kw):
    with pytest.raises((PrivacyParameterError, ValueError)):
        st.accuracy(statistic, epsilon=1.0, **kw)
    with pytest.raises(PrivacyParameterError):
        st.accuracy("median", rho=0.5, bounds=(0, 1))


def test_the_planner_meets_a_var_bound_and_a_rank_error() -> None:
    from dpkit import plan

    eps = plan.epsilon_for("var", bounds=(0, 10), n=10_000, half_width=0.1)
    assert st.accuracy("var", bounds=(0, 10), n=10_000, epsilon=eps) <= 0.1
    assert st.accuracy("var", bounds=(0, 10), n=10_000, epsilon=eps * 0.99) > 0.1
    eps = plan.epsilon_for("median", bounds=(0, 10), half_width=50.0)  # records of rank error
    assert st.accuracy("median", bounds=(0, 10), epsilon=eps) <= 50.0
