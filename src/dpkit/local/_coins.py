"""Exact coins for client randomizers: probabilities that are multiples of 2^-60.

Every probability a randomizer uses is a dyadic rational ``num / 2^60``, chosen (rounded in the
safe direction) so that the exact likelihood ratio of the protocol never exceeds ``e^ε``; a coin
is then an integer comparison of a uniform draw with ``num``, so the realised probability is
exactly the one the privacy proof and the unbiased estimator use (no float thresholds).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit.errors import PrivacyParameterError

__all__ = ["BITS", "ONE", "coins", "dyadic", "exp_capped", "log_up", "packed_coins", "require_bias"]

BITS = 60
ONE = 1 << BITS
_LOW = 52  # the low 52 bits are drawn only on a tie in the top byte
_LOW_MASK = (1 << _LOW) - 1


def dyadic(num: int) -> Fraction:
    """The exact probability ``num / 2^60``."""
    return Fraction(num, ONE)


def exp_capped(x: float) -> float:
    """``e^x`` for calibration, with ``x`` capped at 64 so that no ε overflows a float.

    Two multiples of 2^-60 in (0, 1) never have a ratio above 2^60 < e^42, so coins calibrated
    at ``min(ε, 64)`` are as good as any for a larger ε; every calibration still checks its exact
    ratio against the caller's ε with :func:`log_up`.
    """
    return math.exp(min(x, 64.0))


def require_bias(num: int, what: str) -> None:
    """Refuse a "keep" probability ``num / 2^60`` that is not above 1/2.

    For ε below about 2e-15, ``e^ε/(e^ε + 1)`` rounds to 1/2 in floating point and the safe-side
    rounding then lands *below* 1/2: the coin would favour the wrong answer, its reverse odds
    ``(1 − p)/p`` would exceed ``e^ε``, and the debiasing constant would change sign.
    """
    if 2 * num <= ONE:
        raise PrivacyParameterError(
            f"epsilon is too small for {what} to carry information with coins that are "
            "multiples of 2^-60; use epsilon >= 1e-12."
        )


def log_up(ratio: Fraction) -> float:
    """An upper bound on ``ln(ratio)`` for a rational ``ratio ≥ 1``.

    ``(a − b)/b`` is correctly rounded (integer true division) and ``log1p`` loses at most an ulp
    or two, so a relative margin of 2^-49 keeps the result above the true logarithm.
    """
    a, b = ratio.numerator, ratio.denominator
    value = math.log1p((a - b) / b)
    return math.nextafter(value * (1.0 + 2.0**-49), math.inf)


def coins(
    gen: np.random.Generator, num: int, shape: int | tuple[int, ...]
) -> npt.NDArray[np.bool_]:
    """Independent Bernoulli(``num / 2^60``) coins, exactly.

    A uniform 60-bit ``V = U·2^52 + W`` is below ``num`` iff its top byte ``U`` is below that of
    ``num``, or equal to it with ``W`` below the low bits. ``W`` is drawn only on a tie
    (probability 1/256), so a coin costs about one random byte and stays exact.
    """
    size = int(np.prod(shape))
    top, low = num >> _LOW, num & _LOW_MASK
    u = np.frombuffer(gen.bytes(size), dtype=np.uint8).reshape(shape)
    if top >= 256:  # num == 2^60: certain
        return np.ones(shape, dtype=np.bool_)
    out = u < top
    tie = np.flatnonzero(u.ravel() == top)
    if tie.size:
        w = gen.integers(0, 1 << _LOW, size=tie.size, dtype=np.int64)
        out.ravel()[tie] = w < low
    return out


def packed_coins(gen: np.random.Generator, num: int, words: int) -> npt.NDArray[np.uint64]:
    """``64·words`` independent Bernoulli(``num / 2^60``) bits, packed in uint64 words, exactly.

    Each bit compares its own uniform 60-bit number ``U`` with ``num`` most significant digit
    first, 64 lanes per word at once: at the first digit where they differ, ``U < num`` iff
    ``num`` has the 1. Lanes still tied after 60 digits have ``U = num`` (not below). A lane is
    decided after two digits on average, so words leave the loop quickly and a bit costs about
    a tenth of a 64-bit draw.
    """
    result = np.zeros(words, dtype=np.uint64)
    undecided = np.full(words, np.uint64(2**64 - 1), dtype=np.uint64)
    active: npt.NDArray[np.intp] | None = None  # None: every word (before compaction pays)
    raw = gen.bit_generator.random_raw
    for j in range(1, BITS + 1):
        digit = (num >> (BITS - j)) & 1
        if active is None:
            r = np.asarray(raw(words), dtype=np.uint64)
            np.invert(r, out=r)
            if digit:  # lanes with a 0 here are decided "below"; the rest stay tied
                np.bitwise_and(r, undecided, out=r)
                result |= r
                undecided ^= r
            else:  # lanes with a 1 here are decided "not below"
                undecided &= r
            if j >= 8:  # about a fifth of the words still have a tied lane
                active = np.flatnonzero(undecided)
        else:
            if active.size == 0:
                break
            r = np.asarray(raw(active.size), dtype=np.uint64)
            u = undecided[active]
            if digit:
                result[active] |= u & ~r
                u &= r
            else:
                u &= ~r
            undecided[active] = u
            active = active[u != 0]
    return result
