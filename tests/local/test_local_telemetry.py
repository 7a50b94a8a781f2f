"""Microsoft's 1BitMean and dBitFlip: unbiased, exact variances, memoization, audits, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.audit import Predicate, epsilon_lower_bound
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local import DBitFlip, MemoizedOneBitClient, OneBitMean


def test_one_bit_mean_unbiased_with_exact_variance():
    ob = OneBitMean(epsilon=1.0, m=10.0)
    x = np.random.default_rng(0).uniform(0, 10, 2000)
    reps = 400
    means = np.array([ob.estimate_mean(ob.randomize(x, rng=s)).value for s in range(reps)])
    e = math.exp(1.0)
    prob = 1 / (e + 1) + (x / 10) * (e - 1) / (e + 1)
    var = (10 * (e + 1) / (e - 1)) ** 2 * np.sum(prob * (1 - prob)) / x.size**2
    assert abs(means.mean() - x.mean()) < 5 * math.sqrt(var / reps)
    # sample variance of 400 near-normal means: relative SE √(2/399) ≈ 0.071; 5 SE ≈ 0.35
    assert abs(means.var(ddof=1) / var - 1) < 0.35


def test_memoized_client_repeats_its_bit_and_rounds_without_bias():
    ob = OneBitMean(epsilon=1.0, m=100.0)
    dev = MemoizedOneBitClient(ob, levels=4, rng=1)
    first = dev.report(37.0)
    assert all(dev.report(37.0) == first for _ in range(50))  # same level: same bit forever
    assert dev.level(0.0) == 0 and dev.level(100.0) == 4
    # α-point rounding is unbiased over devices: E[level·m/s] = x
    levels = [MemoizedOneBitClient(ob, levels=4, rng=s).level(37.0) for s in range(4000)]
    assert abs(np.mean(levels) * 25 - 37.0) < 5 * 25 * 0.5 / math.sqrt(4000)
    with pytest.raises(PrivacyParameterError):
        MemoizedOneBitClient(ob, levels=0)
    with pytest.raises(DataError):
        dev.report(float("nan"))
    assert dev.report(1e9) == dev.report(dev.mechanism.m)  # beyond m: clamped, not refused


def test_dbitflip_unbiased_with_exact_variance():
    db = DBitFlip(epsilon=1.0, k=12, d=3)
    x = np.random.default_rng(2).choice(12, 3000, p=np.r_[0.5, np.full(11, 0.5 / 11)])
    truth = np.bincount(x, minlength=12)
    reps = 400
    ests = np.array([db.estimate(db.randomize(x, rng=s)).counts for s in range(reps)])
    var = db.variance(x.size, truth)
    assert np.all(np.abs(ests.mean(axis=0) - truth) < 5 * np.sqrt(var / reps))
    assert np.all(np.abs(ests.var(axis=0, ddof=1) / var - 1) < 0.36)


def test_audits():
    db = DBitFlip(epsilon=1.0, k=4, d=4)  # every bucket drawn: the bits alone carry the value

    def mech(v, n, rng):
        return db.randomize(np.full(n, v), rng=rng).values[:, 4:]

    region = Predicate(lambda b: (b[:, 1] == 1) & (b[:, 0] == 0), name="bit1 & !bit0")
    r = epsilon_lower_bound(mech, 0, 1, trials=200_000, rng=3, region=region)
    assert 0.8 <= r.epsilon <= 1.0, r
    ob = OneBitMean(epsilon=1.0, m=5.0)
    r = epsilon_lower_bound(
        lambda v, n, rng: ob.randomize(np.full(n, v), rng=rng).values,
        0.0,
        5.0,
        trials=200_000,
        rng=4,
        region=Predicate(lambda b: b == 1, name="bit"),
    )
    assert 0.8 <= r.epsilon <= 1.0, r


def test_bad_input():
    with pytest.raises(PrivacyParameterError):
        OneBitMean(epsilon=1.0, m=0.0)
    with pytest.raises(PrivacyParameterError):
        DBitFlip(epsilon=1.0, k=4, d=5)
    with pytest.raises(PrivacyParameterError):
        DBitFlip(epsilon=0.0, k=4, d=1)
    ob = OneBitMean(epsilon=1.0, m=5.0)
    for bad in ([np.nan], None, ["a"]):
        with pytest.raises(DataError):
            ob.randomize(bad, rng=0)
    for far, bound in (([-1.0], [0.0]), ([6.0], [5.0]), ([np.inf], [5.0])):  # clamped
        assert (
            ob.randomize(far, rng=0).values.tolist() == ob.randomize(bound, rng=0).values.tolist()
        )
    for bad in ([2], [[0, 1]], np.zeros(0, dtype=int), None):
        with pytest.raises(DataError):
            ob.estimate_mean(bad)
    db = DBitFlip(epsilon=1.0, k=4, d=2)
    with pytest.raises(DataError):
        db.randomize([np.nan], rng=0)
    # outside 0..k-1: reported as the last code, never refused
    assert db.randomize([4], rng=0).values.tolist() == db.randomize([3], rng=0).values.tolist()
    for bad in ([[0, 1, 0]], [[1, 0, 0, 1]], [[0, 0, 1, 1]], [[0, 4, 1, 1]], [[0, 1, 2, 0]]):
        with pytest.raises(DataError):
            db.estimate(np.asarray(bad))
    with pytest.raises(DataError):
        db.estimate(np.zeros((0, 4), dtype=int))
