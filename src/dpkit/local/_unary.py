"""Unary encoding: optimized (OUE) and symmetric (SUE, basic RAPPOR) bit vectors."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.local._coins import ONE, coins, dyadic, exp_capped, log_up, packed_coins
from dpkit.local._oracle import FrequencyOracle
from dpkit.mechanisms._base import IntArray

__all__ = ["OUE", "SUE", "UnaryEncoding"]

_USERS = 255 * 16  # reports per block of the column sums: the temporaries stay in cache
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_ONE, _TWO, _FOUR = np.uint64(1), np.uint64(2), np.uint64(4)


@dataclass(frozen=True, kw_only=True)
class UnaryEncoding(FrequencyOracle):
    """Unary encoding: the value is one-hot encoded and every bit is flipped independently.

    The user's own bit is 1 with probability ``p``, every other bit with ``q``; two values
    differ in two bits, so the worst likelihood ratio is ``p(1−q)/((1−p)q) ≤ e^ε``
    (Wang et al. 2017, §4.2).

    Report format: ``⌈k/8⌉`` bytes per user, the bits of value ``v`` at byte ``v // 8``, bit
    ``7 − v % 8`` (most significant first, as :func:`numpy.packbits`), padding bits zero. A
    ``(n, k)`` array of 0/1 is also accepted by :meth:`reports`.
    """

    name: ClassVar[str] = "UE"

    def _nums(self) -> tuple[int, int]:
        raise NotImplementedError  # pragma: no cover

    def _calibrate(self) -> tuple[Fraction, Fraction, Fraction]:
        p_num, q_num = self._nums()
        p, q = dyadic(p_num), dyadic(q_num)
        return p, q, p * (1 - q) / ((1 - p) * q)

    @property
    def message_bits(self) -> int:
        return self.k

    def _randomize(self, x: IntArray, gen: np.random.Generator) -> npt.NDArray[np.uint8]:
        k, n = self.k, x.size
        nbytes = (k + 7) // 8
        p_num, q_num = int(self.p * ONE), int(self.q * ONE)
        # every bit Bernoulli(q): the bits are i.i.d., so they are drawn as one run of words and
        # cut into reports (no per-user alignment)
        words = packed_coins(gen, q_num, (n * nbytes + 7) // 8)
        out = words.view(np.uint8)[: n * nbytes].reshape(n, nbytes)
        # then each user's own bit (byte x//8, bit 7 − x%8) is redrawn with probability p
        flat = out.reshape(-1)
        pos = np.arange(n, dtype=np.int64) * nbytes + (x >> 3)
        mask = np.right_shift(np.uint8(0x80), (x & 7).astype(np.uint8))
        own = coins(gen, p_num, n)
        byte = flat[pos]
        flat[pos] = np.where(own, byte | mask, byte & ~mask)
        pad = 8 * nbytes - k
        if pad:
            out[:, -1] &= np.uint8((0xFF << pad) & 0xFF)
        return out

    def _validate(self, values: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
        k, nbytes = self.k, (self.k + 7) // 8
        if values.ndim != 2:
            raise DataError(f"{self.name} reports are bit vectors (2-d), got shape {values.shape}.")
        if values.shape[1] == k and values.shape[1] != nbytes:
            if values.size and (values.min() < 0 or values.max() > 1):
                raise DataError(f"{self.name} reports given as (n, k) arrays must hold 0/1 bits.")
            return np.packbits(values.astype(np.uint8), axis=1)
        if values.shape[1] != nbytes:
            raise DataError(
                f"{self.name} reports must have {nbytes} bytes (k={k} bits) per user, got "
                f"{values.shape[1]}."
            )
        if values.dtype != np.uint8:
            if values.size and (values.min() < 0 or values.max() > 255):
                raise DataError(f"{self.name} packed reports must be bytes (0..255).")
            values = values.astype(np.uint8)
        packed = values
        pad = 8 * nbytes - k
        if pad and np.any(packed[:, -1] & np.uint8((1 << pad) - 1)):
            raise DataError(f"{self.name} reports have padding bits set; wrong k or bit order?")
        return packed

    def _support(self, values: npt.NDArray[Any]) -> IntArray:
        n, nbytes = values.shape
        wpu = (nbytes + 7) // 8
        # column sums of the bits by SWAR: sums in ever wider lanes of the uint64 words, none of
        # which can carry into its neighbour (3 users fill a 2-bit lane to at most 3, 5 of those
        # a 4-bit lane to 15, 17 of those a byte to 255), so 255 users cost about ten word
        # operations each instead of a pass per bit
        per_bit = np.zeros((8, 8 * wpu), dtype=np.int64)  # [bit s from the lsb, byte]
        aligned = nbytes == 8 * wpu
        for lo in range(0, n, _USERS):
            chunk = values[lo : lo + _USERS]
            m = chunk.shape[0]
            g = -(-m // 255)
            if aligned and m == g * 255 and chunk.flags.c_contiguous:
                block = chunk
            else:  # pad with zero bits to whole words and whole groups of 255 users
                block = np.zeros((g * 255, 8 * wpu), dtype=np.uint8)
                block[:m, :nbytes] = chunk
            w = block.view(np.uint64).reshape(g, 17, 5, 3, wpu)
            for s0, two in ((0, (w & _M1).sum(axis=3)), (1, ((w >> _ONE) & _M1).sum(axis=3))):
                for s1, four in (
                    (0, (two & _M2).sum(axis=2)),
                    (2, ((two >> _TWO) & _M2).sum(axis=2)),
                ):
                    for s2, eight in (
                        (0, (four & _M4).sum(axis=1)),
                        (4, ((four >> _FOUR) & _M4).sum(axis=1)),
                    ):
                        lanes = eight.view(np.uint8).reshape(g, 8 * wpu)
                        per_bit[s0 + s1 + s2] += lanes.sum(axis=0, dtype=np.int64)
        # byte j, bit s (from the least significant) holds value 8j + 7 − s
        counts = per_bit[::-1].T.reshape(-1)
        return np.asarray(counts[: self.k], dtype=np.int64)


@dataclass(frozen=True, kw_only=True)
class OUE(UnaryEncoding):
    """Optimized unary encoding: ``p = 1/2``, ``q = 1/(e^ε + 1)`` (Wang et al. 2017, §4.3).

    Its variance ``4e^ε/(e^ε − 1)²`` per user does not depend on ``k``; ``q`` is rounded up to
    a multiple of 2^-60, which only lowers the likelihood ratio ``(1 − q)/q`` below ``e^ε``.
    Report format: see :class:`UnaryEncoding`.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import OUE
    >>> oue = OUE(epsilon=1.0, k=100)
    >>> r = oue.randomize(np.arange(100).repeat(50), rng=1)
    >>> r.values.shape  # 13 bytes per user
    (5000, 13)
    >>> est = oue.estimate(r)
    >>> bool(abs(est.counts.sum() - 5000) < 6 * np.sqrt(est.variance.sum()))
    True
    """

    name: ClassVar[str] = "OUE"

    def _nums(self) -> tuple[int, int]:
        q_num = math.ceil(Fraction(1.0 / (exp_capped(self.epsilon) + 1.0)) * ONE * (1 + 2**-50))
        while log_up(Fraction(ONE - q_num, q_num)) > self.epsilon:
            q_num += max(1, q_num >> 48)
        return ONE // 2, q_num


@dataclass(frozen=True, kw_only=True)
class SUE(UnaryEncoding):
    """Symmetric unary encoding (basic one-time RAPPOR): ``p = e^{ε/2}/(e^{ε/2} + 1)``, ``q = 1−p``.

    Wang et al. 2017, §4.2 (Erlingsson, Pihur and Korolova 2014 without the Bloom filter).
    Report format: see :class:`UnaryEncoding`.

    Examples
    --------
    >>> from dpkit.local import SUE
    >>> float(SUE(epsilon=2.0, k=8).p + SUE(epsilon=2.0, k=8).q)
    1.0
    """

    name: ClassVar[str] = "SUE"

    def _nums(self) -> tuple[int, int]:
        h = exp_capped(self.epsilon / 2)
        p_num = math.floor(Fraction(h / (h + 1.0)) * ONE * (1 - 2**-50))
        while log_up(Fraction(p_num, ONE - p_num) ** 2) > self.epsilon:
            p_num -= max(1, p_num >> 48)
        return p_num, ONE - p_num
