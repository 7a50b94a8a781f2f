"""Private key selection: release probabilities match each mechanism's closed form."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import special, stats

import dpkit.frame as dpf
from dpkit.frame._finish import finish
from dpkit.frame._pipeline import ALL
from dpkit.frame._selection import WEIGHT_BITS, weights
from dpkit.random import as_generator

N_MAX = 8


def _table(groups_per_unit: int = 1) -> pl.DataFrame:
    """Key k{n} is held by n units (n = 1 … 8); each unit holds ``groups_per_unit`` keys."""
    users, keys = [], []
    uid = 0
    for n in range(1, N_MAX + 1):
        for _ in range(n):
            for j in range(groups_per_unit):
                users.append(uid)
                keys.append(f"k{n}" if j == 0 else f"pad{uid}_{j}")
            uid += 1
    return pl.DataFrame({"user": users, "key": keys})


def _release_counts(
    df: pl.DataFrame, trials: int, seed: int, **kw: Any
) -> tuple[np.ndarray[Any, Any], Any]:
    """How often each key k1 … k8 is released in ``trials`` independent releases."""
    groups = kw.pop("max_groups", 1)
    g = (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", max_groups=groups, max_rows=1)
        .agg(dpf.count())
    )
    plan = g.explain(**kw).plan
    totals, _ = g._exact(plan, (1, 2, 3, 4))
    totals = totals.filter(pl.col("key").str.starts_with("k"))
    stacked = totals.join(pl.DataFrame({"trial": np.arange(trials)}), how="cross")
    out = finish(
        stacked, None, keys=["trial", "key"], aggs=g._aggs, plan=plan,
        gen=as_generator(seed), alpha=0.05, drop_keys=(ALL,),
    )  # fmt: skip
    got = out.group_by("key").len()
    counts = np.zeros(N_MAX, dtype=np.int64)
    for k, c in got.iter_rows():
        counts[int(k[1:]) - 1] = c
    return counts, plan.selection


def _chi_square_ok(counts: np.ndarray[Any, Any], p: np.ndarray[Any, Any], trials: int) -> bool:
    """Binomial counts vs probabilities: Pearson's statistic, p-value above 1e-4."""
    inside = (p > 0) & (p < 1)
    assert np.all(counts[p == 0] == 0) and np.all(counts[p == 1] == trials)
    e = trials * p[inside]
    x2 = float(np.sum((counts[inside] - e) ** 2 / (e * (1 - p[inside]))))
    return bool(stats.chi2.sf(x2, int(inside.sum())) > 1e-4)


def _laplace_tail(m: np.ndarray[Any, Any], scale: float) -> np.ndarray[Any, Any]:
    """P(Z ≥ m) for discrete Laplace: r^m/(1+r) for m ≥ 1, else 1 − r^(1−m)/(1+r)."""
    r = math.exp(-1.0 / scale)
    return np.where(
        m >= 1, r ** np.maximum(m, 1) / (1 + r), 1 - r ** (1 - np.minimum(m, 0)) / (1 + r)
    )


def test_truncated_geometric_release_probability() -> None:
    trials = 20_000
    counts, sel = _release_counts(_table(), trials, 1, epsilon=2.0, delta=1e-3)
    assert sel is not None and sel.method == "truncated_geometric"
    p = np.asarray(sel.probabilities)[1 : N_MAX + 1]
    assert _chi_square_ok(counts, p, trials)


def test_laplace_threshold_release_probability() -> None:
    trials = 20_000
    counts, sel = _release_counts(
        _table(2), trials, 2, epsilon=4.0, delta=1e-3, selection="laplace", max_groups=2
    )
    assert sel is not None and sel.keys_per_unit == 2
    n = np.arange(1, N_MAX + 1)
    p = _laplace_tail(sel.threshold - n, float(sel.scale))
    assert _chi_square_ok(counts, p, trials)


def test_weighted_gaussian_release_probability() -> None:
    trials = 20_000
    counts, sel = _release_counts(_table(2), trials, 3, epsilon=2.0, delta=1e-3, max_groups=2)
    assert sel is not None and sel.method == "gaussian"
    w = weights(2)[2]  # every unit holds two keys: weight 2^20/√2 on each
    n = np.arange(1, N_MAX + 1)
    sigma = float(sel.scale)
    # P(n·w + Z ≥ τ) for the discrete Gaussian with σ ≈ 2^22: the continuity-corrected normal
    # tail, accurate far beyond what 20,000 trials can resolve
    p = special.ndtr(-((sel.threshold - n * w - 0.5) / sigma))
    assert sigma > 2**WEIGHT_BITS
    assert _chi_square_ok(counts, p, trials)


@pytest.mark.parametrize(
    ("kw", "groups"),
    [
        ({"epsilon": 1.0, "delta": 1e-3}, 1),
        ({"epsilon": 1.0, "delta": 1e-3, "selection": "laplace"}, 3),
        ({"epsilon": 1.0, "delta": 2e-3}, 3),
    ],
)
def test_key_of_one_unit_released_at_most_delta(kw: dict[str, Any], groups: int) -> None:
    trials = 200_000
    counts, sel = _release_counts(_table(groups), trials, 4, max_groups=groups, **kw)
    assert sel is not None
    bound = sel.delta * trials + 5 * math.sqrt(sel.delta * trials)  # 5 binomial sd above δ
    assert counts[0] <= bound


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0, 6.0])
def test_truncated_geometric_is_exactly_dp_with_float_sampling(eps: float) -> None:
    """A key is kept iff U < p(n), U on the 2^-53 grid, so P(kept) = ceil(p·2^53)/2^53. Those
    exact probabilities must satisfy both (ε, δ) conditions of Desfontaines et al. (2022) in
    exact arithmetic; a flat 2^-50 slack left δ short by ~2e-16 at ε = 3 and ~2e-14 at ε = 6."""
    from fractions import Fraction

    from dpkit.frame._selection import key_selection

    delta = 1e-6
    s = key_selection("truncated_geometric", epsilon=eps, delta=delta, max_groups=1, replace=False)
    kept = [Fraction(math.ceil(Fraction(p) * 2**53), 2**53) for p in s.probabilities]
    e = Fraction(math.exp(eps)) * (1 - Fraction(1, 2**52))  # below the true e^ε
    d = Fraction(delta)
    for n in range(1, len(kept)):
        assert kept[n] <= e * kept[n - 1] + d
        assert 1 - kept[n - 1] <= e * (1 - kept[n]) + d
