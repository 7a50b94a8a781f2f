"""RAPPOR: published guarantees, memoization, decoding accuracy, audit, bad input."""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit.audit import Predicate, epsilon_lower_bound
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local import OUE, Rappor


def test_published_epsilons():
    # Erlingsson, Pihur, Korolova 2014, §3 example: h = 2, f = 0.5, p = 0.5, q = 0.75
    r = Rappor(m=128, h=2, f=0.5, p=0.5, q=0.75)
    assert r.epsilon_permanent == pytest.approx(4 * math.log(3), rel=1e-12)  # 4.39
    assert r.epsilon_one_report == pytest.approx(1.0743, abs=1e-4)
    # f/2 is rounded up to a multiple of 2^-60: f just below 1 is pure noise, no cost over time
    assert Rappor(f=Fraction(2**60 - 1, 2**60), h=1).epsilon_permanent == 0.0


def test_hash_is_the_specified_one():
    r = Rappor(m=64, h=3, cohorts=4)
    want = [
        int.from_bytes(hashlib.sha256(f"2|{i}|example.org".encode()).digest()[:8], "big") % 64
        for i in range(3)
    ]
    assert r.bloom_bits("example.org", 2) == want


def test_memoized_permanent_response():
    r = Rappor(m=64, h=2, f=0.5, p=0.0 + 2**-40, q=1.0 - 2**-40, cohorts=1)
    dev = r.client(0, rng=3)
    # with p ≈ 0 and q ≈ 1 a report shows the permanent response: it never changes
    first = dev.report("a")
    assert all(dev.report("a") == first for _ in range(20))
    fresh = [r.simulate(["a"], [0], rng=s).values[0].tolist() for s in range(20)]
    assert len({tuple(x) for x in fresh}) > 1  # without memoization the response is redrawn


def test_decoding_is_unbiased_with_stated_errors():
    r = Rappor(m=64, h=2, f=0.25, p=0.25, q=0.75, cohorts=8)
    cands = [f"site{i}" for i in range(12)]
    rng = np.random.default_rng(5)
    truth = np.array([4000, 2500, 1500, 1000, 500, 300, 200, 0, 0, 0, 0, 0])
    values = np.repeat(cands, truth).tolist()
    n = len(values)
    reps = 60
    ests, stds = [], []
    for s in range(reps):
        cohorts = rng.integers(0, 8, n)
        e = r.estimate(r.simulate(values, cohorts, rng=s), cands)
        ests.append(e.counts)
        stds.append(e.std)
    ests = np.array(ests)
    sd = np.array(stds).mean(axis=0)
    # unbiased: replicate mean within 5 standard errors of the truth
    assert np.all(np.abs(ests.mean(axis=0) - truth) < 5 * sd / math.sqrt(reps))
    # the stated standard errors describe the spread (within ±40%: 60 replicates, plus the
    # cohort-assignment noise the plug-in formula ignores)
    ratio = ests.std(axis=0, ddof=1) / sd
    assert np.all((ratio > 0.6) & (ratio < 1.4)), ratio
    assert np.all(e.nonnegative >= 0)


def test_one_report_audit():
    r = Rappor(m=16, h=1, f=0.5, p=0.25, q=0.75, cohorts=1)
    b0, b1 = r.bloom_bits("x", 0)[0], r.bloom_bits("y", 0)[0]
    assert b0 != b1

    def mech(v, n, rng):
        return r.simulate([v] * n, np.zeros(n, dtype=int), rng=rng).values[:, 1:]

    region = Predicate(lambda b: (b[:, b1] == 1) & (b[:, b0] == 0), name="y bit set, x clear")
    res = epsilon_lower_bound(mech, "x", "y", trials=100_000, rng=6, region=region)
    assert 0.7 * r.epsilon_one_report <= res.epsilon <= r.epsilon_one_report, res


def test_bad_input():
    with pytest.raises(PrivacyParameterError):
        Rappor(p=0.8, q=0.6)
    for bad in ({"f": 0.0}, {"f": 1.0}, {"m": 1}, {"h": 0}, {"cohorts": 0}, {"p": -0.1}):
        with pytest.raises(PrivacyParameterError):
            Rappor(**bad)
    r = Rappor(m=16, h=2, cohorts=2)
    with pytest.raises(DataError):
        r.simulate(["a", 3], [0, 1], rng=0)
    with pytest.raises(DataError):
        r.simulate(["a"], [2], rng=0)
    with pytest.raises(DataError):
        r.simulate("abc", [0, 0, 0], rng=0)
    reports = r.simulate(["a", "b"], [0, 1], rng=0)
    with pytest.raises(DataError):
        r.estimate(reports, [])
    with pytest.raises(DataError):
        r.estimate(reports, ["a", "a"])
    with pytest.raises(DataError):
        Rappor(m=16, h=3, cohorts=2).estimate(reports, ["a"])
    with pytest.raises(DataError):
        r.estimate(OUE(epsilon=1.0, k=16).randomize([1], rng=0), ["a"])
    with pytest.raises(DataError):
        r.estimate(np.zeros((0, 17), dtype=int), ["a"])
    with pytest.raises(DataError):
        r.estimate(np.full((2, 17), 2), ["a"])
    with pytest.raises(DataError):
        r.client(5)
