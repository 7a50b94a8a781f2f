"""Apple's count-mean sketch and Hadamard count-mean sketch."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from dpkit.audit import Predicate, epsilon_lower_bound
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local import OUE, CountMeanSketch, sketch_hash

POP = {"ok": 3000, "lol": 1500, "brb": 400, "idk": 100}


@pytest.mark.parametrize("hadamard", [False, True])
def test_estimates_match_exact_fixed_hash_moments(hadamard):
    cms = CountMeanSketch(epsilon=3.0, rows=4, width=16, hadamard=hadamard)  # collisions likely
    words = [w for w, c in POP.items() for _ in range(c)]
    queries = [*POP, "zzz"]
    reps = 300
    ests = np.array(
        [cms.estimate(cms.randomize(words, rng=s), queries).counts for s in range(reps)]
    )
    for i, q in enumerate(queries):
        mean, var = cms.moments(POP, q)
        assert abs(ests[:, i].mean() - mean) < 5 * math.sqrt(var / reps), q
        # sample variance of 300 near-normal estimates: relative SE √(2/299) ≈ 0.082 → ±0.41
        assert abs(ests[:, i].var(ddof=1) / var - 1) < 0.41, q
    # without collisions the mean is the count up to the −(n − n_v)/(m − 1) random-hash term
    wide = CountMeanSketch(epsilon=3.0, rows=4, width=4096, hadamard=hadamard)
    mean, _ = wide.moments(POP, "ok")
    assert mean == pytest.approx(3000 - (5000 - 3000) / 4095, rel=1e-9)


def test_random_hash_variance_matches_fixed_when_no_collision():
    cms = CountMeanSketch(epsilon=2.0, rows=8, width=2048)
    _, var = cms.moments({"a": 1000}, "a")
    # with only the queried value present, ρ = 1 for its holders: the random-hash formula's
    # own-value term
    assert float(cms.variance(1000, 1000)) == pytest.approx(var, rel=1e-9)


def test_hash_is_specified():
    d = hashlib.sha256(b"3|hello").digest()
    assert sketch_hash("hello", 3, 1000) == int.from_bytes(d[:8], "big") % 1000


@pytest.mark.parametrize("hadamard", [False, True])
def test_audit(hadamard):
    cms = CountMeanSketch(epsilon=1.0, rows=1, width=8, hadamard=hadamard)
    a, b = "a", "b"
    ha, hb = sketch_hash(a, 0, 8), sketch_hash(b, 0, 8)
    assert ha != hb

    def mech(v, n, rng):
        return cms.randomize([v] * n, rng=rng).values

    if hadamard:
        # coefficient l with H[l, ha] ≠ H[l, hb]: the bit says which
        def region_fn(r):
            la = (r[:, 1] & ha).astype(np.int64)
            lb = (r[:, 1] & hb).astype(np.int64)
            pa = np.array([bin(int(x)).count("1") % 2 for x in la])
            pb = np.array([bin(int(x)).count("1") % 2 for x in lb])
            return (pa != pb) & ((r[:, 2] == 1) == (pb == 0))

        region = Predicate(region_fn, name="bit favours b")
    else:
        region = Predicate(
            lambda r: (r[:, 1 + hb] == 1) & (r[:, 1 + ha] == 0), name="b's cell set, a's clear"
        )
    res = epsilon_lower_bound(mech, a, b, trials=100_000, rng=8, region=region)
    assert res.epsilon <= 1.0, res
    assert res.epsilon >= 0.6, res


def test_bad_input():
    with pytest.raises(PrivacyParameterError):
        CountMeanSketch(epsilon=1.0, width=100, hadamard=True)
    with pytest.raises(PrivacyParameterError):
        CountMeanSketch(epsilon=1.0, rows=0)
    cms = CountMeanSketch(epsilon=1.0, rows=2, width=8)
    with pytest.raises(DataError):
        cms.randomize(["a", 1], rng=0)
    with pytest.raises(DataError):
        cms.randomize("abc", rng=0)
    r = cms.randomize(["a", "b"], rng=0)
    with pytest.raises(DataError):
        cms.estimate(r, [])
    with pytest.raises(DataError):
        CountMeanSketch(epsilon=2.0, rows=2, width=8).estimate(r, ["a"])
    with pytest.raises(DataError):
        cms.estimate(OUE(epsilon=1.0, k=8).randomize([1], rng=0), ["a"])
    with pytest.raises(DataError):
        cms.estimate(np.zeros((0, 9), dtype=int), ["a"])
    with pytest.raises(DataError):
        cms.estimate(np.full((1, 9), 2), ["a"])
    with pytest.raises(DataError):
        CountMeanSketch(epsilon=1.0, rows=2, width=8, hadamard=True).estimate(
            np.array([[0, 9, 1]]), ["a"]
        )
