"""Exact Bernoulli(exp(−v)) for whole v, and the geometric count of exp(−1), by inversion.

A uniform real X in [0, 1) has P(X < e^{−v}) = e^{−v}, and V = #{v >= 1 : X < e^{−v}} has
P(V >= v) = e^{−v}: the count behind the discrete Laplace (Canonne, Kamath and Steinke 2020,
Algorithm 2, where it is drawn one Bernoulli(exp(−1)) at a time). Only X's first bits are ever
drawn: R, a uniform integer on [0, 2^62), places X in [R, R + 1) / 2^62. With the exact integers
T_v = floor(2^62 e^{−v}) (e^{−v} is irrational for v >= 1, so it is never a multiple of 2^−62):

- R < T_v  implies X < (R + 1)/2^62 <= T_v/2^62 < e^{−v}: the event holds;
- R > T_v  implies X >= (T_v + 1)/2^62 > e^{−v}: it does not;
- R = T_v  (probability 2^−62 per threshold) leaves it open: more bits of X are drawn, 62 at a
  time, and compared with more bits of e^{−v} (:func:`exp_neg_floor`, exact integer arithmetic)
  until the comparison is decided, which happens with probability one.

This is inversion of the uniform distribution with lazily drawn bits (decide as soon as the
bits drawn so far settle the comparison, as in Knuth and Yao 1976, "The complexity of nonuniform
random number generation", and Karney 2016, "Sampling exactly from the normal distribution"), so
every decision is exact; no floating point is used. One 62-bit draw settles a whole geometric
count, where the Bernoulli(exp(−1)) loop needs about 1.6 draws and as many passes.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

__all__ = [
    "BITS",
    "THRESHOLDS",
    "bernoulli_exp_whole",
    "exp_neg_floor",
    "geometric_exp1",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

BITS = 62
"""Bits of X drawn at once: uniform integers on [0, 2^62) are one int64 draw each."""


@lru_cache(maxsize=1024)
def exp_neg_floor(v: int, prec: int) -> int:
    """``floor(2**prec · e**-v)`` exactly, for whole ``v >= 1`` and ``prec >= 0``.

    The Taylor sum ``N/n! = Σ_{k<=n} v^k/k!`` bounds e^v from below, and adding the tail's bound
    ``v^{n+1}/(n+1)! · (n+2)/(n+2−v)`` (a geometric series, valid for n + 2 > v) bounds it from
    above; the floors of ``2**prec`` over both bounds are compared, and more terms are taken
    until they agree. They do agree eventually, because ``2**prec · e**-v`` is irrational.

    >>> exp_neg_floor(1, 10)  # 1024 / e = 376.70...
    376
    """
    if v < 1 or prec < 0:
        raise ValueError("exp_neg_floor needs v >= 1 and prec >= 0")
    n = max(2 * v, 16)
    while True:
        num, fact, power = 1, 1, 1  # num/fact = Σ_{k<=n} v^k/k!, power = v^n
        for k in range(1, n + 1):
            power *= v
            fact *= k
            num = num * k + power
        # e^v in (num/fact, upper_num/den): both bounds over the same denominator
        den = fact * (n + 1) * (n + 2 - v)
        upper_num = num * (n + 1) * (n + 2 - v) + power * v * (n + 2)
        low = (den << prec) // upper_num  # floor of 2^prec over the upper bound
        high = (fact << prec) // num  # floor of 2^prec over the lower bound
        if low == high:
            return low
        n *= 2


def _table() -> tuple[IntArray, int]:
    last = 1
    while exp_neg_floor(last + 1, BITS) > 0:
        last += 1
    # index v holds T_v; T_0 = 2^62 (X < 1 always: every R < 2^62), and past the last positive
    # threshold T_v = 0: only R = 0 is then undecided
    values = [1 << BITS] + [exp_neg_floor(v, BITS) for v in range(1, last + 1)] + [0]
    return np.array(values, dtype=np.int64), last


THRESHOLDS, _LAST = _table()
"""``THRESHOLDS[v] = floor(2^62 e^{−v})`` for v = 0 … 42, then a 0 for every larger v."""

# Fast path for the geometric count: the top 16 bits of R pick a bucket; a bucket with no
# threshold in it has one count for all its R (stored), the others (marked 255) are counted
# exactly. The table only saves time: every R gets the same count either way.
_SHIFT = BITS - 16


def _bucket_table() -> npt.NDArray[np.uint8]:
    starts = np.arange(1 << 16, dtype=np.int64) << _SHIFT
    positive = THRESHOLDS[1 : _LAST + 1]  # decreasing
    # count of v >= 1 with T_v > R, at the bucket's first R and at its last
    ascending = positive[::-1]
    first = ascending.size - np.searchsorted(ascending, starts, side="right")
    last = ascending.size - np.searchsorted(ascending, starts + ((1 << _SHIFT) - 1), side="right")
    # a bucket holding a threshold T_v must go the exact way (R = T_v is a tie)
    clean = (first == last) & ~np.isin(starts >> _SHIFT, ascending >> _SHIFT)
    table = np.where(clean, first, 255).astype(np.uint8)
    table[0] = 255  # the deep tail: all the thresholds past v ≈ 11 and R = 0
    return table


_BUCKETS = _bucket_table()
_ASCENDING = THRESHOLDS[_LAST:0:-1].copy()  # T_42 < … < T_1


def _uniform(rng: np.random.Generator, size: int) -> IntArray:
    """Uniform integers on [0, 2^62): the first 62 bits of X."""
    out: IntArray = (rng.bit_generator.random_raw(size) >> np.uint64(64 - BITS)).view(np.int64)
    return out


def _below_exp(rng: np.random.Generator, v: int, x: list[int]) -> bool:
    """Exactly whether X < e^{−v} (``v >= 1``), X known to lie in [num, num + 1) / 2^prec with
    ``x = [num, prec]``; more bits of X are drawn into ``x`` while the comparison is open, so
    that later comparisons on the same X see them."""
    while True:
        num, prec = x
        edge = exp_neg_floor(v, prec)
        if edge != num:  # edge > num: X < (num + 1)/2^prec <= e^{-v}; edge < num: X > e^{-v}
            return edge > num
        x[0] = (num << BITS) | int(_uniform(rng, 1)[0])
        x[1] = prec + BITS


def bernoulli_exp_whole(rng: np.random.Generator, whole: IntArray) -> BoolArray:
    """Exact Bernoulli(exp(−v)) for each whole ``v >= 0`` in ``whole``, one draw each."""
    r = _uniform(rng, whole.size)
    edge = THRESHOLDS[np.minimum(whole, THRESHOLDS.size - 1)]
    out: BoolArray = r < edge
    for i in (r == edge).nonzero()[0]:  # a tie: probability 2^-62 per draw
        out[i] = _below_exp(rng, int(whole[i]), [int(r[i]), BITS])
    return out


def _count_exact(rng: np.random.Generator, r: IntArray) -> IntArray:
    """The geometric count for the R that the bucket table leaves open (rare)."""
    ascending = _ASCENDING
    above = np.searchsorted(ascending, r, side="right")  # thresholds <= R
    count = (ascending.size - above).astype(np.int64)
    # a tie R = T_v (the largest threshold <= R equals R), or R = 0, which ties with every v
    # past the table: settled bit by bit
    tie = (r == 0) | (ascending.take(np.maximum(above - 1, 0)) == r)
    for i in tie.nonzero()[0]:
        count[i] = _count_from(rng, int(r[i]))
    return count


def _count_from(rng: np.random.Generator, r: int) -> int:
    """#{v >= 1 : X < e^{−v}} for X with first 62 bits ``r``, deciding each v exactly."""
    x = [r, BITS]  # one X for every v: bits drawn to settle one comparison serve the next
    v = 0
    while _below_exp(rng, v + 1, x):
        v += 1
    return v


def geometric_exp1(rng: np.random.Generator, size: int) -> IntArray:
    """``size`` i.i.d. counts V with P(V >= v) = exp(−v), v = 0, 1, 2, … (one draw each)."""
    # the top 62 bits of a raw 64-bit word are R; its top 16 bits pick the bucket
    raw = rng.bit_generator.random_raw(size)
    bucket = _BUCKETS[raw >> np.uint64(64 - 16)]
    open_ = (bucket == 255).nonzero()[0]
    out: IntArray = bucket.astype(np.int64)
    if open_.size:
        r = (raw.take(open_) >> np.uint64(64 - BITS)).astype(np.int64)
        out[open_] = _count_exact(rng, r)
    return out
