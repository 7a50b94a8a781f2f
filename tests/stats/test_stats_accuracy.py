"""dpkit.stats.accuracy: equal to the released ci() half-width, and covering like the releases.

Coverage: the share of histogram bins (2000, one release) or of scalar releases (400: each draws
exact noise, a few ms) within ``accuracy(alpha)`` of the exact statistic, at alpha = 0.1 and a
fixed seed, must lie within ±4 binomial standard deviations (√(0.09/m)) of [0.9, 0.9 + 0.03] (the
half-width is the smallest integer quantile of the noise, which can add the probability of its
last integer, below 0.03 at these scales).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit.stats as st
from dpkit.accounting import Neighbouring
from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded

N = 2000
RELEASES = 400
ALPHA = 0.1


def _check(cov: float, m: int) -> None:
    band = 4 * math.sqrt(ALPHA * (1 - ALPHA) / m)
    assert 1 - ALPHA - band <= cov <= 1 - ALPHA + 0.03 + band


X = np.linspace(0.0, 10.0, 101)


@pytest.mark.parametrize(
    ("statistic", "kw", "release", "truth"),
    [
        ("count", {}, lambda g, kw: st.count(X, rng=g, **kw), X.size),
        ("count", {"delta": 1e-6}, lambda g, kw: st.count(X, rng=g, **kw), X.size),
        ("sum", {"bounds": (0.0, 10.0)}, lambda g, kw: st.sum(X, rng=g, **kw), X.sum()),
        (
            "mean",
            {"bounds": (0.0, 10.0), "n": X.size},
            lambda g, kw: st.mean(X, rng=g, **kw),
            X.mean(),
        ),
    ],
    ids=["count", "count-gauss", "sum", "mean-n"],
)
def test_accuracy_matches_ci_and_covers(statistic, kw, release, truth):
    h = st.accuracy(statistic, epsilon=0.5, alpha=ALPHA, **kw)
    gen = seeded(3)
    hits = 0
    for i in range(RELEASES):
        r = release(gen, {"epsilon": 0.5, **kw})
        if i < 5:
            lo, hi = r.ci(ALPHA)
            assert math.isclose((hi - lo) / 2, h, rel_tol=1e-12)
        hits += abs(r.value - truth) <= h
    _check(hits / RELEASES, RELEASES)


def test_histogram_accuracy_covers_every_bin():
    x = np.random.default_rng(0).uniform(0, 1, 5000)
    edges = np.linspace(0, 1, N + 1)
    exact, _ = np.histogram(x, bins=edges)
    for kw in ({}, {"delta": 1e-6}):
        h = st.accuracy("histogram", epsilon=1.0, alpha=ALPHA, **kw)
        r = st.histogram(x, bins=edges, epsilon=1.0, rng=seeded(5), **kw)
        _, hi = r.ci(ALPHA)
        assert np.allclose(hi - r.value, h)
        _check(float(np.mean(np.abs(r.value - exact) <= h)), N)


def test_mean_with_unknown_n_at_its_stated_scale():
    # the box interval of a release whose noisy count is near expected_n has that half-width
    h = st.accuracy("mean", bounds=(0, 10), epsilon=1.0, expected_n=1000, alpha=ALPHA)
    r = st.mean(np.full(1000, 5.0), bounds=(0, 10), epsilon=1.0, rng=seeded(1))
    lo, hi = r.ci(ALPHA)
    assert math.isclose((hi - lo) / 2, h, rel_tol=0.05)


def test_replace_count_is_exact_and_bad_requests_are_refused():
    assert st.accuracy("count", epsilon=1.0, neighbouring=Neighbouring.REPLACE) == 0.0
    with pytest.raises(PrivacyParameterError, match="expected_n"):
        st.accuracy("mean", bounds=(0, 1), epsilon=1.0)
    with pytest.raises(PrivacyParameterError, match="bounds"):
        st.accuracy("sum", epsilon=1.0)
    with pytest.raises(PrivacyParameterError):
        st.accuracy("corr", bounds=((0, 1), (0, 1)), epsilon=1.0, n=10)
    with pytest.raises(PrivacyParameterError):
        st.accuracy("count", epsilon=-1.0)
    with pytest.raises(PrivacyParameterError):
        st.accuracy("count", epsilon=1.0, alpha=0.0)
