"""Correlation methods, histogram, private bounds, the Gaussian path's accounting."""

from __future__ import annotations

import numpy as np

import dpkit.stats as st
from dpkit.accounting import Neighbouring, epsilon_of


def _chocolate(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seed 001: type A = -1, B = +1; A people like chocolate (near 1), B people do not."""
    g = np.random.default_rng(seed)
    t = np.where(g.random(n) < 0.4, -1.0, 1.0)
    like = np.where(t < 0, g.uniform(0.5, 1, n), g.uniform(-1, -0.5, n))
    return t, like


def test_moments_method_beats_six_sums() -> None:
    t, like = _chocolate(1000, 0)
    g = np.random.default_rng(1)
    a = g.uniform(-1, 1, 1000)
    cases = [(t, like), (t, g.uniform(-1, 1, 1000)), (a, 0.5 * a + 0.5 * g.uniform(-1, 1, 1000))]
    for x, y in cases:
        truth = np.corrcoef(x, y)[0, 1]
        err = {}
        for method in ("moments", "six_sums"):
            vals = [
                st.corr(x, y, bounds=((-1, 1), (-1, 1)), epsilon=1.0, method=method, rng=i).value
                for i in range(150)
            ]
            err[method] = float(np.mean((np.array(vals) - truth) ** 2))
        assert err["moments"] < err["six_sums"]


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
