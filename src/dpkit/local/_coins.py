"""Exact coins for client randomizers: probabilities that are multiples of 2^-60.

Every probability a randomizer uses is a dyadic rational ``num / 2^60``, chosen (rounded in the
safe direction) so that the exact likelihood ratio of the protocol never exceeds ``e^ε``; a coin
is then an integer comparison of a uniform draw with ``num``, so the realised probability is
exactly the one the privacy proof and the unbiased estimator use (no float thresholds).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from randomgen import AESCounter

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


# packed_coins draws its bits a byte (eight lanes) at a time, as one pattern of eight coins
_LANES = 8
_SPACE = _LANES * BITS  # a pattern is chosen by a uniform number U in [0, 2^480)
_PREFIX = 16  # U's first 16 bits decide the pattern in all but ≤ 255 of 65,536 cells
_NEXT = 64  # and the next 64 bits in all but a 2^-64 fraction of those
_LOW_BITS = _SPACE - _PREFIX - _NEXT
_BLOCK = 1 << 16  # bytes per block: the temporaries stay in cache


# bit generators whose raw output is 64 uniform bits a word (exact types: a subclass may not be)
_RAW64 = frozenset({np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64,
                    AESCounter})  # fmt: skip


def _words(gen: np.random.Generator, n: int) -> npt.NDArray[np.uint64]:
    """``n`` uniform 64-bit words from any generator.

    ``bit_generator.random_raw`` is the fastest read, but its words hold 64 uniform bits only
    for some bit generators (MT19937's hold 32 in a uint64, the top half zero) and a caller may
    pass any ``numpy.random.Generator``: it is read only for the known 64-bit ones; any other
    gives its words through the full-range draw, which asks for 64 bits (two 32-bit outputs
    where that is the generator's word).
    """
    bg = gen.bit_generator
    if type(bg) in _RAW64:
        return np.asarray(bg.random_raw(n), dtype=np.uint64)
    return gen.integers(0, 1 << 64, size=n, dtype=np.uint64)


@dataclass(frozen=True)
class _PatternTable:
    """Where each byte pattern of eight Bernoulli(``num / 2^60``) coins lies in ``[0, 2^480)``.

    Pattern ``b`` (bit ``i`` is lane ``i``) has the exact probability ``num^w (2^60 − num)^(8−w)
    / 2^480`` with ``w`` its number of ones, and owns ``[C_b, C_{b+1})`` with ``C_b`` the sum of
    the probabilities (times ``2^480``) of the patterns below ``b``. A uniform ``U`` falls in
    pattern ``b``'s interval with exactly that probability.
    """

    bounds: tuple[int, ...]  # C_0 = 0, …, C_256 = 2^480
    cells: npt.NDArray[np.uint16]  # by U's 16-bit prefix: the pattern, or 256 + an ambiguous id
    base: npt.NDArray[np.int64]  # by ambiguous id: the patterns wholly below the cell's start
    inner: npt.NDArray[np.uint64]  # (slot, id): next 64 bits of a boundary inside the cell
    valid: npt.NDArray[np.bool_]  # (slot, id): whether that slot holds a boundary
    first: npt.NDArray[np.int64]  # by ambiguous id: the index of its first inner boundary


@functools.lru_cache(maxsize=64)
def _pattern_table(num: int) -> _PatternTable:
    rest = ONE - num
    probs = [num ** b.bit_count() * rest ** (_LANES - b.bit_count()) for b in range(256)]
    bounds = [0]
    for pr in probs:
        bounds.append(bounds[-1] + pr)
    assert bounds[-1] == 1 << _SPACE
    shift = _SPACE - _PREFIX
    # pattern at the start of each cell V: how many boundaries C_1..C_255 are ≤ V·2^464
    inside: dict[int, list[int]] = {}
    starts = []  # the first cell wholly at or above each boundary
    for j in range(1, 256):
        cell, low = bounds[j] >> shift, bounds[j] & ((1 << shift) - 1)
        if low:  # strictly inside cell `cell`: patterns there depend on later bits
            inside.setdefault(cell, []).append(j)
        starts.append(cell + 1 if low else cell)
    below = np.cumsum(np.bincount(starts, minlength=(1 << _PREFIX) + 1))[: 1 << _PREFIX]
    cells = below.astype(np.uint16)
    ids = sorted(inside)
    slots = max((len(v) for v in inside.values()), default=0)
    base = np.zeros(len(ids), dtype=np.int64)
    inner = np.zeros((slots, len(ids)), dtype=np.uint64)
    valid = np.zeros((slots, len(ids)), dtype=np.bool_)
    first = np.zeros(len(ids), dtype=np.int64)
    for a, cell in enumerate(ids):
        cells[cell] = 256 + a
        base[a] = below[cell]
        first[a] = inside[cell][0]
        for s, j in enumerate(inside[cell]):
            inner[s, a] = (bounds[j] >> _LOW_BITS) & ((1 << _NEXT) - 1)
            valid[s, a] = True
    return _PatternTable(tuple(bounds), cells, base, inner, valid, first)


def packed_coins(
    gen: np.random.Generator,
    num: int,
    words: int,
    out: npt.NDArray[np.uint64] | None = None,
) -> npt.NDArray[np.uint64]:
    """``64·words`` independent Bernoulli(``num / 2^60``) bits, packed in uint64 words, exactly.

    Each byte is one pattern of eight independent coins, drawn by inversion: a uniform number
    ``U`` in ``[0, 2^480)`` (480 fair bits) selects the pattern whose interval of exact length
    ``2^480 · P(pattern)`` holds it (:class:`_PatternTable`). ``U``'s bits are read only as far
    as needed: the first 16 decide the pattern unless a boundary between two patterns lies
    strictly inside their cell (at most 255 of the 65,536 cells); then the next 64 decide it
    unless they equal a boundary's; only then are the remaining bits read. So a byte costs about
    16 random bits and one table look-up, and its distribution is exactly the product of eight
    Bernoulli(``num / 2^60``). ``out`` (contiguous, ``words`` long), if given, receives the bits.
    """
    result = np.empty(words, dtype=np.uint64) if out is None else out
    if num <= 0 or num >= ONE:  # certain: no coin to draw
        result.fill(np.uint64(2**64 - 1) if num >= ONE else 0)
        return result
    table = _pattern_table(num)
    res = result.view(np.uint8)
    total = res.size
    idx = np.empty(min(total, _BLOCK), dtype=np.intp)
    for lo in range(0, total, _BLOCK):
        m = min(_BLOCK, total - lo)
        prefix = _words(gen, (m + 3) // 4).view(np.uint16)[:m]
        np.copyto(idx[:m], prefix)
        cell = table.cells.take(idx[:m])
        np.copyto(res[lo : lo + m], cell, casting="unsafe")  # the low byte: the pattern
        amb = np.flatnonzero(cell >= 256)
        if amb.size:
            res[lo + amb] = _resolve(gen, table, prefix[amb], cell[amb] - 256)
    return result


def _resolve(
    gen: np.random.Generator,
    table: _PatternTable,
    prefix: npt.NDArray[np.uint16],
    ids: npt.NDArray[np.uint16],
) -> npt.NDArray[np.uint8]:
    """Patterns for the bytes whose 16-bit prefix fell in an ambiguous cell (ids into table)."""
    a = ids.astype(np.intp)
    nxt = _words(gen, a.size)
    count = table.base[a].copy()
    tie = np.zeros(a.size, dtype=np.bool_)
    for s in range(table.inner.shape[0]):
        valid, bound = table.valid[s, a], table.inner[s, a]
        count += valid & (bound < nxt)
        tie |= valid & (bound == nxt)
    for i in np.flatnonzero(tie).tolist():  # probability below 2^-64 per byte: exact, slowly
        words = _words(gen, 7).tolist()
        low = int.from_bytes(b"".join(int(w).to_bytes(8, "little") for w in words), "little")
        low &= (1 << _LOW_BITS) - 1
        u = (int(prefix[i]) << (_SPACE - _PREFIX)) | (int(nxt[i]) << _LOW_BITS) | low
        j = int(table.first[a[i]])
        c = int(table.base[a[i]])
        while j < 256 and table.bounds[j] <= u:
            c, j = c + 1, j + 1
        count[i] = c
    return count.astype(np.uint8)
