"""Regression tests from an independent review: calibration at extreme ε, tagged telemetry
reports, and what memoized 1BitMean does (and does not) protect over time."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local import (
    GRR,
    OLH,
    OUE,
    SUE,
    CountMeanSketch,
    DBitFlip,
    DuchiMean,
    HadamardResponse,
    HybridMean,
    MemoizedOneBitClient,
    OneBitMean,
    PiecewiseMean,
    PrefixExtension,
    SubsetSelection,
    VectorMean,
)
from dpkit.local._coins import ONE, log_up


def _keep_odds(obj: object) -> tuple[int, float]:
    """(keep numerator, ε allowed per changed coin) of the classes with one bias coin."""
    if isinstance(obj, DuchiMean):
        return obj._num, obj.epsilon
    if isinstance(obj, OneBitMean):
        return obj._duchi._num, obj.epsilon
    if isinstance(obj, DBitFlip):
        return obj._p, obj.epsilon / 2  # two biases change
    assert isinstance(obj, CountMeanSketch)
    return obj._num, obj.epsilon if obj.hadamard else obj.epsilon / 2


BIASED = [
    lambda e: DuchiMean(epsilon=e),
    lambda e: OneBitMean(epsilon=e, m=1.0),
    lambda e: DBitFlip(epsilon=e, k=4, d=2),
    lambda e: CountMeanSketch(epsilon=e, rows=2, width=8),
    lambda e: CountMeanSketch(epsilon=e, rows=2, width=8, hadamard=True),
]


@pytest.mark.parametrize("make", BIASED)
@pytest.mark.parametrize("eps", [1e-17, 1e-15, 2e-15, 1e-12, 0.5, 3.0, 60.0, 1e6])
def test_bias_coins_are_above_half_and_within_epsilon_both_ways(make, eps):
    # below ε ≈ 1.8e-15, e^ε/(e^ε + 1) rounds to 1/2 and the safe-side rounding used to land
    # below it: the keep coin favoured the wrong answer, its reverse odds exceeded e^ε (a CMS
    # at ε = 1e-17 leaked ≈ 3.6e-15) and Duchi's debiasing constant became negative (every
    # estimate ≈ 1 whatever the data). Now such ε are refused.
    try:
        obj = make(eps)
    except PrivacyParameterError:
        assert eps < 1e-14
        return
    num, per = _keep_odds(obj)
    assert 2 * num > ONE
    worst = max(Fraction(num, ONE - num), Fraction(ONE - num, num))
    assert log_up(worst) <= per


def test_duchi_at_tiny_epsilon_is_refused_rather_than_biased():
    with pytest.raises(PrivacyParameterError):
        DuchiMean(epsilon=1e-16)
    with pytest.raises(PrivacyParameterError):
        OneBitMean(epsilon=1e-16, m=10.0)
    m = DuchiMean(epsilon=1e-12)  # the smallest ε the message suggests still works
    assert m.C > 0


HUGE = [
    lambda e: GRR(epsilon=e, k=3),
    lambda e: OUE(epsilon=e, k=3),
    lambda e: SUE(epsilon=e, k=3),
    lambda e: OLH(epsilon=e, k=3),
    lambda e: HadamardResponse(epsilon=e, k=3),
    lambda e: SubsetSelection(epsilon=e, k=5),
    lambda e: DuchiMean(epsilon=e),
    lambda e: PiecewiseMean(epsilon=e, cells=64),
    lambda e: HybridMean(epsilon=e, cells=64),
    lambda e: VectorMean(epsilon=e, d=3),
    lambda e: CountMeanSketch(epsilon=e, rows=2, width=8),
    lambda e: DBitFlip(epsilon=e, k=4, d=2),
    lambda e: PrefixExtension(epsilon=e, length=1, top=2, step=2),
]


@pytest.mark.parametrize("make", HUGE)
def test_huge_epsilon_builds_instead_of_overflowing(make):
    # math.exp(ε) overflowed (a bare OverflowError) for ε > 709 in every calibration
    obj = make(1e6)
    assert obj.epsilon == 1e6


def test_olh_decodes_when_epsilon_makes_g_exceed_32_bits():
    # g = e^ε + 1 passed 2^32 at ε ≈ 22.2 and the decoder's np.uint32(g) raised OverflowError
    # (numpy 2; numpy 1 wrapped g silently) after the reports had been collected
    olh = OLH(epsilon=25.0, k=6)
    assert 2 <= olh.g < 2**32
    x = np.repeat(np.arange(6), 50)
    est = olh.estimate(olh.randomize(x, rng=0))
    assert np.all(np.abs(est.counts - 50) <= 6 * np.sqrt(est.variance) + 1e-9)


def test_telemetry_reports_of_other_parameters_are_refused():
    # dBitFlip and 1BitMean returned bare arrays: bits made at another ε (or k, d, m) were
    # decoded silently with the wrong debiasing
    x = np.arange(8) % 4
    r1 = DBitFlip(epsilon=1.0, k=4, d=2).randomize(x, rng=0)
    with pytest.raises(DataError, match="made by"):
        DBitFlip(epsilon=2.0, k=4, d=2).estimate(r1)
    assert DBitFlip(epsilon=1.0, k=4, d=2).estimate(r1).n == 8
    b1 = OneBitMean(epsilon=1.0, m=5.0).randomize([1.0, 2.0], rng=0)
    with pytest.raises(DataError, match="made by"):
        OneBitMean(epsilon=2.0, m=5.0).estimate_mean(b1)
    with pytest.raises(DataError, match="made by"):
        OneBitMean(epsilon=1.0, m=6.0).estimate_mean(b1)
    assert OneBitMean(epsilon=1.0, m=5.0).estimate_mean(b1).n == 2


def test_memoized_one_bit_reveals_a_change_of_level_with_certainty():
    # the client's docstring claimed "ε per distinct level visited"; in fact a user whose
    # level stays put never sends two different bits, while one that moves from level 0 to 1
    # does with probability P0(1 − P1) + P1(1 − P0) > 0: an infinite likelihood ratio
    ob = OneBitMean(epsilon=1.0, m=1.0)
    devices = [MemoizedOneBitClient(ob, levels=1, rng=s) for s in range(400)]
    constant = sum(d.report(0.0) != d.report(0.0) for d in devices)
    moving = sum(d.report(0.0) != d.report(1.0) for d in devices)
    assert constant == 0
    # P(differ) = 2·e/(e + 1)² ≈ 0.39: 400 devices give ≈ 157 ± 10; 60 is 10 standard errors off
    assert moving > 60
    doc = MemoizedOneBitClient.__doc__ or ""
    assert "not protected" in doc and "per distinct level" not in doc


def _exact_clone_delta(eps0: float, n: int, eps: float) -> Fraction:
    """The hockey-stick divergence of FMT 2021 Thm 3.2's pair, in exact rationals (the inputs
    e^{−ε₀} and e^ε taken as the floats they round to)."""
    import math

    clone = Fraction(math.exp(-eps0))
    q1 = clone / (1 + clone)
    p, ee = 1 - q1, Fraction(math.exp(eps))
    total = Fraction(0)
    for c in range(n):
        w = math.comb(n - 1, c) * clone**c * (1 - clone) ** (n - 1 - c)
        b = [Fraction(math.comb(c, x), 2**c) for x in range(c + 1)]
        for x in range(c + 2):
            b1 = b[x - 1] if x >= 1 else Fraction(0)
            b0 = b[x] if x <= c else Fraction(0)
            d = p * b1 + q1 * b0 - ee * (q1 * b1 + p * b0)
            if d > 0:
                total += w * d
    return total


@pytest.mark.parametrize(("eps0", "n"), [(1.0, 60), (0.3, 50), (2.0, 40)])
def test_shuffle_delta_is_never_below_the_exact_divergence(eps0, n):
    # the float computation came out up to ~1e-14 (relative) below the exact value, e.g.
    # ε₀ = 1, n = 60, ε = 0.8; it is now rounded up
    from dpkit.local import shuffle_delta

    for frac in (0.2, 0.5, 0.8, 0.95):
        got = shuffle_delta(epsilon0=eps0, n=n, epsilon=frac * eps0)
        assert Fraction(got) >= _exact_clone_delta(eps0, n, frac * eps0)


def test_shuffle_bound_at_large_epsilon_is_not_zero():
    # ⌊r*(c+1)/(1+r*)⌋ + 1 rounded to c + 2 for r* > 2^53/(c+1): an empty region, δ = 0 where
    # the true δ is ≈ 0.95, and shuffle_epsilon(ε₀=40, n=10, δ=1e-6) claimed 37.2 (truth ≈ 40)
    import math

    from dpkit.local import shuffle_delta, shuffle_epsilon

    e0, eps = 40.0, 37.0
    q1 = 1 / (1 + math.exp(e0))
    no_clone = (1 - math.exp(-e0)) ** 9 * ((1 - q1) - math.exp(eps) * q1)  # the c = 0 term
    assert shuffle_delta(epsilon0=e0, n=10, epsilon=eps) >= no_clone > 0.95
    assert shuffle_epsilon(epsilon0=e0, n=10, delta=1e-6) > 39.99
    assert shuffle_delta(epsilon0=1000.0, n=10, epsilon=800.0) == 1.0  # no overflow


def test_subset_selection_calibration_memory_does_not_grow_with_k():
    # calibration built five float arrays of length k: at k = 2^30 (accepted, and built by
    # choose_protocol) ≈ 40 GiB. Blocks of 2^20 sizes keep it at a few MiB; 2^22 shows the
    # difference (≈ 200 MiB before) in a fraction of a second.
    import tracemalloc

    tracemalloc.start()
    try:
        ss = SubsetSelection(epsilon=1.0, k=1 << 22)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak
    assert abs(ss.d - (1 << 22) / (np.e + 1)) < 0.01 * (1 << 22)  # ≈ k/(e^ε + 1)


def test_heavy_hitter_threshold_covers_the_spread_of_a_frequent_item():
    # the error bound used the rare-item σ (q(1−q) per user), but a frequent item's holders
    # add p(1−p) each: with every user holding "a" its estimate spreads ≈ 2.3× wider at ε = 3,
    # so "2zσ" was not the margin the union bound needs
    from scipy.special import ndtri

    pem = PrefixExtension(epsilon=3.0, length=1, top=2, step=4)
    n, reps = 3000, 120
    ests = []
    for s in range(reps):
        found = pem.identify(pem.randomize(["a"] * n, rng=s))
        ests.append(found.counts[found.items.index("a")])
    spread = float(np.std(ests, ddof=1))
    assert spread > 1.8 * pem.sigma(n)  # the rare-item σ is too small for this item
    compared = pem.top * 2**pem.step * len(pem.bits)
    z = float(ndtri(1 - 0.05 / (2 * compared)))
    # 120 replicates: the sample sd is within ±20% (3 SE of √(1/238) ≈ 0.065) of the truth
    assert pem.threshold(n, beta=0.05) / z > 0.8 * spread


def test_sketch_variance_does_not_cover_the_fixed_hash_offset():
    # the docstring called the estimate unbiased with an exact variance; for the fixed hashes
    # a value colliding with nothing is off by −(n − n_v)/(m − 1) in every run, which at
    # n = 10^6, m = 1024 is ≈ 2.3 standard deviations of the stated variance
    cms = CountMeanSketch(epsilon=4.0, rows=8, width=1024)
    population = {"heavy": 1_000_000}
    mean, var = cms.moments(population, "absent")
    stated = float(cms.variance(1_000_000, 0))
    assert mean == pytest.approx(-1_000_000 / 1023, rel=1e-9)
    assert abs(mean) > 2 * np.sqrt(stated)  # a 95% interval from `variance` misses
    assert var == pytest.approx(stated, rel=1e-2)  # the spread itself is as stated
    doc = CountMeanSketch.__doc__ or ""
    assert "does not cover" in doc


def test_tagged_reports_with_fractional_values_are_refused():
    # Reports.from_dict accepts JSON numbers; a tagged batch skipped the integer-dtype check of
    # untagged reports, so [1.5, 2.7, 0.9] was truncated into a valid OLH report and counted
    from dpkit.local import Reports

    olh = OLH(epsilon=1.0, k=8)
    with pytest.raises(DataError):
        olh.estimate(Reports.from_dict({"protocol": olh.tag, "values": [[1.5, 2.7, 0.9]]}))
    oue = OUE(epsilon=1.0, k=8)
    with pytest.raises(DataError):
        oue.estimate(Reports.from_dict({"protocol": oue.tag, "values": [[0.5]]}))
    good = olh.randomize([1, 2, 3], rng=0)
    assert olh.estimate(Reports.from_dict(good.to_dict())).n == 3
