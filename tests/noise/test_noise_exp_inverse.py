"""Inversion against exp(-v) thresholds: the exact integers, the bucket table, the tie paths and
the distributions (geometric count, Bernoulli(exp(-v)))."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from scipy import stats

from dpkit.noise import _exp_inverse as inv
from tests.noise._pmf import CHI2_P_MIN


def _floor_exp_neg(v: int, prec: int) -> int:
    # Decimal's exp is correctly rounded; 150 digits leave a wide margin over 2^-prec · 2^prec
    with localcontext() as ctx:
        ctx.prec = 150
        return int((Decimal(2) ** prec * (-Decimal(v)).exp()).to_integral_value("ROUND_FLOOR"))


@pytest.mark.parametrize("prec", [0, 10, 62, 124, 200])
def test_exp_neg_floor_is_exact(prec: int) -> None:
    for v in (1, 2, 3, 7, 20, 43, 60):
        assert inv.exp_neg_floor(v, prec) == _floor_exp_neg(v, prec), (v, prec)
    with pytest.raises(ValueError):
        inv.exp_neg_floor(0, 10)


def test_thresholds_are_the_floors_of_2_62_exp_minus_v() -> None:
    t = inv.THRESHOLDS
    assert int(t[0]) == 1 << 62 and int(t[-1]) == 0
    for v in range(1, t.size - 1):
        assert int(t[v]) == _floor_exp_neg(v, 62) > 0
    assert _floor_exp_neg(t.size - 1, 62) == 0  # every later v rounds to 0 too


def test_bucket_table_agrees_with_the_exact_count() -> None:
    table, shift = inv._BUCKETS, inv._SHIFT
    ascending = [int(x) for x in inv.THRESHOLDS[-2:0:-1]]

    def count(r: int) -> int:
        return sum(1 for x in ascending if x > r)

    open_buckets = 0
    for b in range(table.size):
        lo, hi = b << shift, ((b + 1) << shift) - 1
        if table[b] == 255:
            open_buckets += 1
            continue
        # a clean bucket: no threshold in it, and one count for its whole range
        assert not any(lo <= x <= hi for x in ascending)
        assert count(lo) == count(hi) == table[b]
    assert open_buckets < 20  # the fast path covers all but a few buckets


def test_geometric_count_matches_its_pmf() -> None:
    n = 1_000_000
    v = inv.geometric_exp1(np.random.default_rng(2026), n)
    k = np.arange(8)
    p = np.exp(-k) * (1 - math.exp(-1))
    counts = np.bincount(np.minimum(v, 8), minlength=9)
    expected = np.append(p, math.exp(-8)) * n
    assert stats.chisquare(counts, expected).pvalue > CHI2_P_MIN


def test_bernoulli_exp_whole_probabilities() -> None:
    n = 400_000
    rng = np.random.default_rng(77)
    for v in (0, 1, 2, 5):
        x = inv.bernoulli_exp_whole(rng, np.full(n, v, dtype=np.int64))
        assert stats.binomtest(int(x.sum()), n, math.exp(-v)).pvalue > CHI2_P_MIN
    assert not inv.bernoulli_exp_whole(rng, np.full(1000, 60, dtype=np.int64)).any()


def test_a_tie_is_settled_with_the_exact_conditional_probability() -> None:
    # R = T_v leaves X in [T_v, T_v + 1) / 2^62; then X < e^-v has probability frac(2^62 e^-v).
    rng = np.random.default_rng(5)
    for v in (1, 2):
        r = int(inv.THRESHOLDS[v])
        with localcontext() as ctx:
            ctx.prec = 60
            frac = float(Decimal(2) ** 62 * (-Decimal(v)).exp() - r)
        n = 4000
        hits = sum(inv._below_exp(rng, v, [r, 62]) for _ in range(n))
        assert stats.binomtest(hits, n, frac).pvalue > CHI2_P_MIN
        # a count from R = T_v is v - 1 or v + (more, with the geometric's odds)
        counts = [inv._count_from(rng, r) for _ in range(200)]
        assert min(counts) == v - 1 and max(counts) >= v


def test_the_deep_tail_from_r_zero() -> None:
    # R = 0: X < 2^-62 < e^-42, so V >= 42; V >= 43 has probability 2^62 e^-43 ≈ 0.975
    rng = np.random.default_rng(9)
    counts = np.array([inv._count_from(rng, 0) for _ in range(2000)])
    assert counts.min() == 42
    p43 = math.exp(-43) * 2.0**62
    assert stats.binomtest(int((counts >= 43).sum()), counts.size, p43).pvalue > CHI2_P_MIN
    # the vectorised path sends R = 0 and exact ties to the same exact count
    r = np.array([0, int(inv.THRESHOLDS[3]), 5, 1 << 61], dtype=np.int64)
    out = inv._count_exact(rng, r)
    assert out[0] >= 42 and out[1] in (2, 3, 4, 5, 6, 7) and out[2] == 41 and out[3] == 0
