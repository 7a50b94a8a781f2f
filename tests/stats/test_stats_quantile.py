"""Quantiles by the exponential mechanism: McSherry's (2016) examples and exactness of the
sampler."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

import dpkit.stats as st
from dpkit.stats import _quantile as qm


def test_seed001_concentrated_median() -> None:
    x = np.random.default_rng(0).uniform(0.123, 0.124, 1000)
    vals = np.array([st.median(x, bounds=(-1, 1), epsilon=0.1, rng=i).value for i in range(200)])
    # analysis in the module notes: P(further than 1e-4) is about 5e-4 per run
    assert np.mean(np.abs(vals - 0.1235) < 1e-4) >= 0.99


def test_seed001_all_equal_median() -> None:
    g = qm.quantile_grid(-1.0, 1.0)
    on_grid = math.ldexp(round(math.ldexp(0.4, -g)), g)
    vals = [st.median([0.4] * 1000, bounds=(-1, 1), epsilon=0.1, rng=i).value for i in range(200)]
    # every other grid point weighs e^-50 each, 2^41 of them: e^-21.6 in total
    assert all(v == on_grid for v in vals)


def _exact_cell_probs(z: np.ndarray, kl: int, kh: int, q: float, beta: float) -> qm._Cells:
    return qm._cells(np.sort(z), 0, 0, kl, kh, q, beta)


@pytest.mark.parametrize("tail", [qm._TAIL, -3.0])
def test_windowed_sampler_matches_exact_distribution(
    tail: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partition/window sampler (and its rejection fallback, forced with a negative tail
    margin) draws exactly from the exponential mechanism: chi-square p > 1e-4 (fixed seed)."""
    monkeypatch.setattr(qm, "_TAIL", tail)
    g = np.random.default_rng(11)
    z = np.rint(g.normal(0, 30, 600)).clip(-100, 100)
    kl, kh, q, beta = -100, 100, 0.3, 0.4
    cells = _exact_cell_probs(z, kl, kh, q, beta)
    p = np.exp(cells.logw - np.logaddexp.reduce(cells.logw))
    gen = np.random.default_rng(12)
    draws = np.array([qm._sample(z, kl, kh, q, beta, gen) for _ in range(6000)], dtype=float)
    idx = np.searchsorted(cells.start, draws, side="right") - 1
    obs = np.bincount(idx, minlength=p.size).astype(float)
    exp = p * draws.size
    big = exp >= 5
    obs_b = np.append(obs[big], obs[~big].sum())
    exp_b = np.append(exp[big], exp[~big].sum())
    if exp_b[-1] < 5:
        obs_b[-2] += obs_b[-1]
        exp_b[-2] += exp_b[-1]
        obs_b, exp_b = obs_b[:-1], exp_b[:-1]
    assert sps.chisquare(obs_b, exp_b).pvalue > 1e-4


def test_quantiles_several_and_order() -> None:
    x = np.random.default_rng(2).normal(0, 1, 50_000)
    r = st.quantile(x, [0.1, 0.5, 0.9], bounds=(-5, 5), epsilon=1.0, rng=0)
    assert r.value.shape == (3,)
    assert np.allclose(r.value, np.quantile(x, [0.1, 0.5, 0.9]), atol=0.02)
    with pytest.raises(Exception, match="exponential mechanism"):
        r.ci()


def test_replace_relation_scales_score() -> None:
    x = np.random.default_rng(3).uniform(0, 1, 2001)
    a = st.median(x, bounds=(0, 1), epsilon=1.0, rng=0)
    b = st.median(
        x, bounds=(0, 1), epsilon=1.0, rng=0, neighbouring=st._events.Neighbouring.REPLACE
    )
    assert abs(a.value - 0.5) < 0.05 and abs(b.value - 0.5) < 0.05
