"""Frequency oracles: unbiasedness and exact variances, coins, published values, consistency."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit.local import (
    GRR,
    OLH,
    OUE,
    PROTOCOLS,
    SUE,
    HadamardResponse,
    SubsetSelection,
    norm_sub,
)
from dpkit.local._coins import ONE, coins, log_up
from dpkit.local._hadamard import fwht
from dpkit.local._olh import PRIME, _collision

CONFIGS = [
    # (protocol, ε, k, n, replicates)
    (GRR, 0.5, 4, 1500, 1000),
    (GRR, 2.0, 16, 1500, 1000),
    (OUE, 1.0, 16, 1500, 1000),
    (OUE, 3.0, 40, 800, 1000),
    (SUE, 1.0, 10, 1500, 1000),
    (OLH, 1.0, 12, 1000, 1000),
    (OLH, 3.0, 30, 600, 1000),
    (HadamardResponse, 1.0, 20, 1500, 1000),
    (HadamardResponse, 0.5, 5, 1500, 1000),
    (SubsetSelection, 1.0, 16, 1000, 1000),
    (SubsetSelection, 0.5, 30, 800, 1000),
]


@pytest.mark.parametrize(("cls", "eps", "k", "n", "reps"), CONFIGS)
def test_unbiased_with_exact_variance(cls, eps, k, n, reps):
    oracle = cls(epsilon=eps, k=k)
    rng = np.random.default_rng(12345)
    # a skewed truth: one heavy value, a few medium, the rest rare or absent
    weights = np.r_[8.0, 3.0, 3.0, np.ones(k - 3)]
    x = rng.choice(k, size=n, p=weights / weights.sum())
    truth = np.bincount(x, minlength=k).astype(float)
    sigma2 = oracle.variance(n, truth)
    ests = np.array([oracle.estimate(oracle.randomize(x, rng=rng)).counts for _ in range(reps)])
    # bias: each value's mean over `reps` replicates within 5 exact standard errors
    # (Bonferroni over ≤ 40 values: a false alarm has probability below 40·6e-7)
    z_bias = (ests.mean(axis=0) - truth) / np.sqrt(sigma2 / reps)
    assert np.all(np.abs(z_bias) < 5.0), z_bias
    # variance: E[Σ_v (ĉ_v − c_v)²/σ_v²] = k exactly, whatever the correlation between values;
    # the replicate mean of that sum lies within 5 of its own empirical standard errors of k
    t = (((ests - truth) ** 2) / sigma2).sum(axis=1)
    se = t.std(ddof=1) / math.sqrt(reps)
    assert abs(t.mean() - k) < 5 * se, (t.mean(), k, se)
    # and each value's empirical variance is within a band of its formula: the relative
    # standard error of a sample variance of `reps` near-normal values (each count is a sum of
    # ≥ 600 independent coins) is √(2/(reps−1)) ≈ 0.045; 5 of them is ±22.4%, we allow ±25%
    ratio = ests.var(axis=0, ddof=1) / sigma2
    assert np.all(np.abs(ratio - 1.0) < 0.25), ratio


@pytest.mark.parametrize("cls", PROTOCOLS)
@pytest.mark.parametrize("eps", [0.25, 1.0, 4.0, 9.0])
def test_exact_likelihood_ratio_is_within_epsilon(cls, eps):
    o = cls(epsilon=eps, k=33)
    assert 0 <= o.q < o.p <= 1
    assert isinstance(o.p, Fraction) and isinstance(o.q, Fraction)
    _, _, ratio = o._calibrate()
    assert log_up(ratio) <= eps
    # …and not wastefully below it: the rounding of the coins costs < 1e-9 of ε
    assert math.log(ratio) > eps * (1 - 1e-9)


def test_published_variances():
    # Wang et al. 2017, Var* per user: GRR (e^ε+k−2)/(e^ε−1)², OUE 4e^ε/(e^ε−1)²,
    # SUE e^{ε/2}/(e^{ε/2}−1)²; OLH ≈ OUE (g = e^ε+1); HR (Acharya et al.) ((e^ε+1)/(e^ε−1))²
    for eps in (0.5, 1.0, 2.0):
        e = math.exp(eps)
        k = 50
        assert float(GRR(epsilon=eps, k=k).variance(1)) == pytest.approx(
            (e + k - 2) / (e - 1) ** 2, rel=1e-9
        )
        assert float(OUE(epsilon=eps, k=k).variance(1)) == pytest.approx(
            4 * e / (e - 1) ** 2, rel=1e-9
        )
        h = math.exp(eps / 2)
        assert float(SUE(epsilon=eps, k=k).variance(1)) == pytest.approx(h / (h - 1) ** 2, rel=1e-9)
        assert float(OLH(epsilon=eps, k=k).variance(1)) == pytest.approx(
            4 * e / (e - 1) ** 2, rel=0.03
        )
        assert float(HadamardResponse(epsilon=eps, k=k).variance(1)) == pytest.approx(
            ((e + 1) / (e - 1)) ** 2, rel=1e-9
        )


def test_olh_collision_probability_is_exact():
    # brute force on a small prime has the same structure: count equal residues mod g
    for g in (2, 3, 4, 7):
        quot, rem = divmod(PRIME, g)
        sizes = [quot + 1] * rem + [quot] * (g - rem)
        want = Fraction(sum(s * (s - 1) for s in sizes), PRIME * (PRIME - 1))
        assert _collision(g) == want
        assert abs(float(_collision(g)) - 1 / g) < 1e-8


def test_coins_are_exact_bernoulli():
    gen = np.random.Generator(np.random.PCG64(3))
    for num in (ONE // 2, ONE // 3 + 12345, (ONE >> 8) * 77, 1):
        x = coins(gen, num, 400_000)
        p = num / ONE
        se = math.sqrt(p * (1 - p) / x.size) + 1e-12
        assert abs(x.mean() - p) < 5 * se + 1e-6
    # a tie in the top byte is resolved by the low bits: probability (t + r/2^52)/256
    num = (100 << 52) + (1 << 51)  # 100.5 / 256
    x = coins(gen, num, 1_000_000)
    assert abs(x.mean() - 100.5 / 256) < 5 * math.sqrt(0.25 / x.size)
    assert coins(gen, ONE, 5).all()


def test_hadamard_transform_matches_matrix():
    K = 16
    y, c = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
    h = np.array([[(-1) ** bin(int(a) & int(b)).count("1") for b in range(K)] for a in range(K)])
    v = np.random.default_rng(0).integers(0, 9, K)
    assert fwht(v).tolist() == (h @ v).tolist()
    assert y.shape == c.shape


def test_hadamard_reports_uniform_within_each_side():
    hr = HadamardResponse(epsilon=1.0, k=6)
    r = hr.randomize(np.full(160_000, 2), rng=4).values
    col = 3
    inside = np.array([bin(int(y) & col).count("1") % 2 == 0 for y in range(hr.K)])
    freq = np.bincount(r, minlength=hr.K) / r.size
    want = np.where(inside, 2 * float(hr.p), 2 * (1 - float(hr.p))) / hr.K
    se = np.sqrt(want * (1 - want) / r.size)
    assert np.all(np.abs(freq - want) < 5 * se)


def test_subset_selection_reports_are_uniform_subsets():
    ss = SubsetSelection(epsilon=1.0, k=6)
    r = ss.randomize(np.zeros(60_000, dtype=int), rng=5).values
    assert np.all(np.diff(r, axis=1) > 0)
    # every d-subset containing 0 equally likely, and every subset without it
    keys, counts = np.unique(r, axis=0, return_counts=True)
    has0 = keys[:, 0] == 0
    c_in, c_out = math.comb(5, ss.d - 1), math.comb(5, ss.d)
    p_each_in = float(ss.p) / c_in
    p_each_out = (1 - float(ss.p)) / c_out
    assert has0.sum() == c_in and (~has0).sum() == c_out
    for cnt, want in ((counts[has0], p_each_in), (counts[~has0], p_each_out)):
        se = math.sqrt(want * (1 - want) / r.shape[0])
        assert np.all(np.abs(cnt / r.shape[0] - want) < 5 * se)


def test_consistency_post_processing():
    oue = OUE(epsilon=0.5, k=20)
    x = np.r_[np.zeros(900, dtype=int), np.ones(100, dtype=int)]
    est = oue.estimate(oue.randomize(x, rng=7))
    assert (est.counts < 0).any()  # unbiased estimates of absent values go negative
    c = est.consistent()
    assert np.all(c >= 0) and c.sum() == pytest.approx(1000)
    assert np.all(est.consistent("clip") >= 0)
    assert norm_sub(np.array([1.0, 1.0]), 0.0).tolist() == [0.0, 0.0]
    # Norm-Sub keeps the order and subtracts one constant from the kept values
    kept = c > 0
    shift = est.counts[kept] - c[kept]
    assert np.allclose(shift, shift[0])


def test_aggregator_equals_one_batch():
    olh = OLH(epsilon=1.0, k=30)
    x = np.arange(3000) % 30
    reports = olh.randomize(x, rng=9)
    agg = olh.aggregator()
    for lo in range(0, 3000, 700):
        agg.add(olh.reports(reports.values[lo : lo + 700]))
    assert np.array_equal(agg.estimate().counts, olh.estimate(reports).counts)


def test_single_report_is_plain_and_reproducible():
    for cls in PROTOCOLS:
        o = cls(epsilon=1.0, k=12)
        one = o.randomize_one(3, rng=11)
        assert one == o.randomize_one(3, rng=11)
        assert isinstance(one, int | list)
        # a foreign client's plain report is accepted by the server
        assert o.estimate(o.reports([one, one])).n == 2


def test_unary_accepts_unpacked_bits():
    sue = SUE(epsilon=1.0, k=10)
    r = sue.randomize([1, 2, 3], rng=0)
    bits = np.unpackbits(r.values, axis=1, count=10)
    assert np.array_equal(sue.reports(bits).values, r.values)


def test_packed_coins_are_exact_and_independent():
    from dpkit.local._coins import packed_coins

    gen = np.random.Generator(np.random.PCG64(8))
    for num in (ONE // 2, int(OUE(epsilon=1.0, k=4).q * ONE), 5, ONE - 3, (1 << 59) + 1):
        bits = np.unpackbits(packed_coins(gen, num, 20_000).view(np.uint8)).astype(float)
        p = num / ONE
        se = math.sqrt(p * (1 - p) / bits.size) + 1e-9
        assert abs(bits.mean() - p) < 5 * se + 1e-6, num
        # neighbouring lanes and neighbouring words are uncorrelated
        if 0.01 < p < 0.99:
            for lag in (1, 64):
                r = np.corrcoef(bits[:-lag], bits[lag:])[0, 1]
                assert abs(r) < 5 / math.sqrt(bits.size)


def test_olh_fast_modular_reduction_matches_definition():
    olh = OLH(epsilon=1.0, k=300)
    rng = np.random.default_rng(3)
    n = 500
    rep = np.c_[rng.integers(1, PRIME, n), rng.integers(0, PRIME, n), rng.integers(0, olh.g, n)]
    rep[:3, :2] = [[PRIME - 1, PRIME - 1], [1, 0], [PRIME - 1, 0]]  # extremes of the family
    want = [
        sum(int(((int(a) * v + int(b)) % PRIME) % olh.g == int(y)) for a, b, y in rep)
        for v in range(300)
    ]
    assert olh.support_counts(olh.reports(rep))[0].tolist() == want
    g3 = OLH(epsilon=0.6, k=300)  # g = 3: the general modulus path
    assert g3.g == 3
    rep[:, 2] %= 3
    want3 = [
        sum(int(((int(a) * v + int(b)) % PRIME) % 3 == int(y)) for a, b, y in rep)
        for v in range(300)
    ]
    assert g3.support_counts(g3.reports(rep))[0].tolist() == want3


def test_packed_coin_patterns_own_exact_intervals():
    # each byte is a pattern of eight coins drawn by inversion of a uniform U in [0, 2^480):
    # every 16-bit cell the table decides lies wholly inside its pattern's interval, whose
    # length is the pattern's exact probability, and an ambiguous cell lists exactly the
    # boundaries strictly inside it
    from dpkit.local._coins import _pattern_table

    for num in (int(OUE(epsilon=1.0, k=4).q * ONE), 12345678901234567, ONE // 2, ONE - 3):
        t = _pattern_table(num)
        b = t.bounds
        for pattern in (0, 1, 0b1011, 255):
            w = pattern.bit_count()
            assert b[pattern + 1] - b[pattern] == num**w * (ONE - num) ** (8 - w)
        assert b[0] == 0 and b[256] == 1 << 480
        shift = 480 - 16
        inside: dict[int, list[int]] = {}
        for j in range(1, 256):
            if b[j] & ((1 << shift) - 1):
                inside.setdefault(b[j] >> shift, []).append(j)
        cells = t.cells.tolist()
        for cell, c in enumerate(cells):
            lo, hi = cell << shift, (cell + 1) << shift
            if c < 256:
                assert cell not in inside and b[c] <= lo and hi <= b[c + 1]
            else:
                inner = inside[cell]
                assert int(t.first[c - 256]) == inner[0] and b[inner[-1] + 1] >= hi
                assert b[inner[0] - 1] <= lo < b[inner[0]]
                assert int(t.base[c - 256]) == inner[0] - 1
                assert int(t.valid[:, c - 256].sum()) == len(inner)
        assert len(inside) == t.base.size


def test_packed_coin_ties_resolved_exactly():
    # the next 64 bits equal to a boundary's: the remaining 400 bits decide, exactly
    from types import SimpleNamespace

    from dpkit.local._coins import _pattern_table, _resolve

    num = int(OUE(epsilon=1.0, k=4).q * ONE)
    t = _pattern_table(num)
    a = 0
    cell = int(np.flatnonzero(t.cells == 256 + a)[0])
    for low_word, want in ((0, int(t.base[a])), (2**64 - 1, int(t.base[a]) + 1)):
        feed = [np.array([t.inner[0, a]], dtype=np.uint64), np.full(7, low_word, np.uint64)]
        gen = SimpleNamespace(
            bit_generator=None, integers=lambda lo, hi, size, dtype, f=feed: f.pop(0)
        )
        got = _resolve(gen, t, np.array([cell], np.uint16), np.array([a], np.uint16))  # type: ignore[arg-type]
        assert int(got[0]) == want
