"""Exact draws for the KS sampler: big-integer uniforms and Bernoulli(e^{−y}/A).

Every probability the KS exponential mechanism (Wasserman & Zhou 2010) needs is either a ratio of
integers (counts of lattice paths) or ``e^{−y}/A`` with y ≥ 0 rational and A a dyadic rational.
The first is drawn by rejection on uniform random bits; the second by comparing a uniform
variate, generated bit by bit, with rigorous dyadic enclosures of ``e^{−y}`` refined until the
comparison is decided (the lazy-comparison method of von Neumann; Karney 2016, "Sampling exactly
from the normal distribution", §2). Nothing is rounded: the success probability is exactly the
stated one, whatever the floating-point behaviour of the machine.

Dyadic numbers are pairs ``(m, e)`` meaning ``m · 2^e`` with m a non-negative Python int.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["Dyadic", "bernoulli_exp_over", "exp_neg_bounds", "uniform_below"]

Dyadic = tuple[int, int]


def _words(gen: np.random.Generator, count: int) -> int:
    """``32·count`` uniform random bits as one int."""
    out = 0
    for w in gen.integers(0, 1 << 32, size=count, dtype=np.uint64):
        out = (out << 32) | int(w)
    return out


def uniform_below(gen: np.random.Generator, n: int) -> int:
    """A uniform integer in [0, n), exactly (rejection on ``bit_length(n − 1)`` random bits)."""
    if n <= 1:
        return 0
    bits = (n - 1).bit_length()
    words = (bits + 31) // 32
    extra = 32 * words - bits
    while True:
        r = _words(gen, words) >> extra
        if r < n:
            return r


def _round(m: int, e: int, prec: int, up: bool) -> Dyadic:
    """``m·2^e`` rounded down (or up) to a mantissa of at most ``prec`` bits."""
    shift = m.bit_length() - prec
    if shift <= 0:
        return m, e
    q = m >> shift
    if up and (q << shift) != m:
        q += 1
    return q, e + shift


def _taylor_exp_neg(a: int, q: int) -> tuple[int, int]:
    """Integers lo ≤ e^{−x}·2^q ≤ hi for x = a/2^q in [0, 1].

    The alternating series Σ (−x)^i/i! has terms of decreasing size, so a partial sum is within
    the next term; each term is bounded below and above by floor/ceil chains in units of 2^-q.
    """
    one = 1 << q
    lo = hi = one
    t_lo = t_hi = one  # bounds on x^i/i! · 2^q
    i = 0
    while True:
        i += 1
        t_lo = (t_lo * a) // (i << q)
        t_hi = -((-t_hi * a) // (i << q))
        if t_hi <= 1:
            # remaining tail is at most the next term, itself at most t_hi ≤ 1 unit
            return lo - 2, hi + 2
        if i % 2:
            lo -= t_hi
            hi -= t_lo
        else:
            lo += t_lo
            hi += t_hi


def _mul(x: Dyadic, y: Dyadic, prec: int, up: bool) -> Dyadic:
    return _round(x[0] * y[0], x[1] + y[1], prec, up)


def _power(x: Dyadic, j: int, prec: int, up: bool) -> Dyadic:
    out: Dyadic = (1, 0)
    base = x
    while j:
        if j & 1:
            out = _mul(out, base, prec, up)
        j >>= 1
        if j:
            base = _mul(base, base, prec, up)
    return out


def exp_neg_bounds(y: Fraction, prec: int) -> tuple[Dyadic, Dyadic]:
    """Dyadic ``lo ≤ e^{−y} ≤ hi`` for rational y ≥ 0, about ``prec`` bits apart (relative).

    ``e^{−y} = (e^{−1})^j · e^{−r}`` with j = ⌊y⌋ and r = y − j; each factor is enclosed by
    Taylor bounds on a fixed point fine enough that j multiplications keep ``prec`` bits.
    """
    j = y.numerator // y.denominator
    r = y - j
    q = prec + j.bit_length() + 16
    # r enclosed by two dyadics of q bits; e^{−x} is decreasing in x
    r_lo = (r.numerator << q) // r.denominator
    r_hi = -((-r.numerator << q) // r.denominator)
    lo_r, _ = _taylor_exp_neg(r_hi, q)
    _, hi_r = _taylor_exp_neg(r_lo, q)
    e_lo, e_hi = _taylor_exp_neg(1 << q, q)
    lo = _mul(_power((e_lo, -q), j, q, False), (max(lo_r, 0), -q), q, False)
    hi = _mul(_power((e_hi, -q), j, q, True), (hi_r, -q), q, True)
    return lo, hi


def _compare(x: Dyadic, y: Dyadic) -> int:
    """Sign of ``x − y`` for two dyadics."""
    (mx, ex), (my, ey) = x, y
    if ex >= ey:
        a, b = mx << (ex - ey), my
    else:
        a, b = mx, my << (ey - ex)
    return (a > b) - (a < b)


def bernoulli_exp_over(gen: np.random.Generator, y: Fraction, a: Dyadic) -> bool:
    """True with probability exactly ``e^{−y} / a`` (the caller guarantees it is at most 1).

    A uniform V ∈ [0, 1) is generated 32 bits at a time; V < e^{−y}/a is decided as soon as the
    interval of V known so far lies on one side of the current enclosure of e^{−y}/a. The
    enclosure tightens with the precision, so the loop ends with probability one (after about
    one round: the undecided band has width about 2^-prec).
    """
    am, ae = a
    prec = 64
    v, vbits = 0, 0
    while True:
        lo, hi = exp_neg_bounds(y, prec)
        while vbits < prec + 16:
            v = (v << 32) | _words(gen, 1)
            vbits += 32
        # V ∈ [v, v + 1) · 2^-vbits, so V·a ∈ [v·am, (v + 1)·am] · 2^(ae − vbits)
        if _compare(((v + 1) * am, ae - vbits), lo) <= 0:
            return True
        if _compare((v * am, ae - vbits), hi) >= 0:
            return False
        prec *= 2
