"""Unary-encoding coins are exact whatever bit generator the caller's Generator wraps.

A caller may pass any ``numpy.random.Generator`` (``rng=``). MT19937's raw words carry 32 random
bits in a uint64, so coins read from ``bit_generator.random_raw`` as 64-bit words drew half of
their 16-bit prefixes as zero: every other byte of an OUE report came out all zeros, the other
users' bits were Bernoulli(≈ q/2) instead of Bernoulli(q), and the likelihood ratio of a report
rose from e^1 to ≈ e^1.9 at ε = 1.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.audit import Predicate, epsilon_lower_bound
from dpkit.local import OUE, SUE


def _mt(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.MT19937(seed))


@pytest.mark.parametrize("cls", [OUE, SUE])
def test_unary_bits_are_bernoulli_q_with_a_32_bit_generator(cls):
    oracle = cls(epsilon=1.0, k=16)
    n = 20_000
    bits = np.unpackbits(oracle.randomize(np.zeros(n, np.int64), rng=_mt(5)).values, axis=1)
    q, p = float(oracle.q), float(oracle.p)
    other = bits[:, 1:]
    # 300,000 bits: 5 standard errors is ≈ 0.004; the broken draw was off by ≈ q/2 ≈ 0.13
    assert abs(other.mean() - q) < 5 * math.sqrt(q * (1 - q) / other.size)
    assert abs(bits[:, 0].mean() - p) < 5 * math.sqrt(p * (1 - p) / n)
    # every byte position, not only the average: bytes 0 and 1 of each report
    for j in (slice(1, 8), slice(8, 16)):
        col = other[:, j.start - 1 : j.stop - 1]
        assert abs(col.mean() - q) < 5 * math.sqrt(q * (1 - q) / col.size)


def test_oue_audit_with_a_32_bit_generator_stays_within_epsilon():
    oue = OUE(epsilon=1.0, k=16)

    def mech(x, n, rng):
        gen = _mt(int(rng.integers(2**32)))
        return np.unpackbits(oue.randomize(np.full(n, x), rng=gen).values[:, :1], axis=1)[:, :2]

    region = Predicate(lambda b: (b[:, 1] == 1) & (b[:, 0] == 0), name="b1 & !b0")
    # 100,000 trials: the broken draw audits at ≈ 1.8 (measured), a correct one at ≈ 0.95
    r = epsilon_lower_bound(mech, 0, 1, trials=100_000, rng=11, region=region)
    assert r.epsilon <= oue.epsilon, r


def test_raw_words_are_read_only_from_64_bit_generators():
    # the fast path reads bit_generator.random_raw: every generator it trusts fills all 64 bits
    # (a sample of 4,096 words whose top 16 bits are never set has probability 2^-65,536)
    from dpkit.local._coins import _RAW64

    for bg_type in _RAW64:
        words = bg_type(3).random_raw(4096)
        assert int(np.max(words >> np.uint64(48))) > 0, bg_type
    assert np.random.MT19937 not in _RAW64
