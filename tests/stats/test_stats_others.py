"""Correlation methods, histogram, private bounds, the Gaussian path's accounting."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit.stats as st
from dpkit.accounting import Neighbouring, epsilon_of


def _chocolate(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """McSherry 2016: type A = -1, B = +1; A people like chocolate (near 1), B people do not."""
    g = np.random.default_rng(seed)
    t = np.where(g.random(n) < 0.4, -1.0, 1.0)
    like = np.where(t < 0, g.uniform(0.5, 1, n), g.uniform(-1, -0.5, n))
    return t, like


def _corr_mse(x: np.ndarray, y: np.ndarray, method: str, runs: int) -> float:
    truth = np.corrcoef(x, y)[0, 1]
    vals = [
        st.corr(x, y, bounds=((-1, 1), (-1, 1)), epsilon=1.0, method=method, rng=i).value
        for i in range(runs)
    ]
    return float(np.mean((np.array(vals) - truth) ** 2))


def test_moments_method_beats_six_sums() -> None:
    """The default ("moments") has lower error than McSherry's (2016) six sums, clearly so when |r|
    < 1.

    Measured MSE (n = 1000, ε = 1): r ≈ 0: 9e-5 vs 3e-4; r ≈ 0.7: 1.2e-3 vs 1.9e-3 — gaps far
    beyond the run-to-run spread of 150-run averages. Near |r| = 1 (the chocolate example) both
    are ≈ 1.6e-4 vs 1.8e-4 over 800 runs, within two standard errors, so there the test asks
    only that the default is not worse by more than 30% over 400 runs.
    """
    g = np.random.default_rng(1)
    a = g.uniform(-1, 1, 1000)
    for x, y in [(a, g.uniform(-1, 1, 1000)), (a, 0.5 * a + 0.5 * g.uniform(-1, 1, 1000))]:
        assert _corr_mse(x, y, "moments", 150) < _corr_mse(x, y, "six_sums", 150)
    t, like = _chocolate(1000, 0)
    assert _corr_mse(t, like, "moments", 400) < 1.3 * _corr_mse(t, like, "six_sums", 400)


def test_histogram_unbiased_and_sensitivity() -> None:
    x = np.random.default_rng(1).uniform(0, 4, 1000)
    edges = [0, 1, 2, 3, 4]
    truth = np.histogram(x, edges)[0]
    vals = np.array([st.histogram(x, bins=edges, epsilon=1.0, rng=i).value for i in range(400)])
    # discrete Laplace scale 1: sd √2·e^{-1/2}/(1−e^{-1}) ≈ 1.30 per bin; 4 sd of the average
    assert np.all(np.abs(vals.mean(axis=0) - truth) < 4 * 1.31 / np.sqrt(400))
    rep = st.histogram(x, bins=edges, epsilon=1.0, rng=0, neighbouring=Neighbouring.REPLACE)
    assert rep.event.sensitivity == 2  # type: ignore[attr-defined]
    two_d = st.histogram(np.c_[x, x], bins=[edges, [0, 2, 4]], epsilon=1.0, rng=0)
    assert two_d.value.shape == (4, 2)


def test_bounds_cover_bulk() -> None:
    x = np.random.default_rng(2).normal(50, 10, 20_000)
    lo, hi = st.bounds(x, epsilon=1.0, rng=0).value
    assert lo <= np.quantile(x, 0.001) and hi >= np.quantile(x, 0.999)
    assert lo >= 0 and hi <= 256


def test_gaussian_statistics_are_eps_delta() -> None:
    x = np.random.default_rng(3).uniform(0, 1, 5000)
    for rel in (
        st.mean(x, bounds=(0, 1), epsilon=1.0, delta=1e-6, rng=0),
        st.var(x, bounds=(0, 1), epsilon=1.0, delta=1e-6, rng=0),
        st.corr(x, x, bounds=((0, 1), (0, 1)), epsilon=1.0, delta=1e-6, rng=0),
    ):
        assert epsilon_of(rel.event, delta=1e-6) <= 1.0 + 1e-9  # type: ignore[arg-type]


def test_bounds_of_zeros_contain_zero() -> None:
    lo, hi = st.bounds(np.zeros(10_000), epsilon=1.0, rng=0).value
    assert lo <= 0.0 <= hi


def test_corr_has_no_sampling_model() -> None:
    """(1 − r²)/√n under-covers for bounded non-normal data, so dpkit offers no sampling part."""
    from dpkit.errors import DPKitError

    g = np.random.default_rng(2)
    x = g.uniform(-1, 1, 200)
    r = st.corr(x, x + g.uniform(-1, 1, 200) / 2, bounds=((-1, 1), (-2, 2)), epsilon=1.0, rng=0)
    r.ci(0.05)
    with pytest.raises(DPKitError, match="sampling"):
        r.ci(0.05, include_sampling=True)


def test_very_large_epsilon_still_samples() -> None:
    """Tiny noise scales (ε in the thousands) keep int64-safe rationals, so nothing fails after
    the budget is charged."""
    from dpkit.accounting import Accountant, PureDP
    from dpkit.mechanisms import Geometric

    acct = Accountant(PureDP(epsilon=1e4))
    c = st.count(np.ones(10), epsilon=3000.0, accountant=acct, rng=0)
    assert c.value == 10.0
    assert Geometric(epsilon=5000.0).release(3, rng=0) == 3
