"""Hadamard response (Acharya, Sun and Zhang 2019): one integer per user, decoded by a fast
Walsh–Hadamard transform."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.local._coins import ONE, coins, dyadic, exp_capped, log_up
from dpkit.local._oracle import FrequencyOracle, check_domain_values
from dpkit.mechanisms._base import IntArray

__all__ = ["HadamardResponse", "fwht", "parity"]


def parity(v: IntArray) -> IntArray:
    """Parity of the set bits of each non-negative int below 2^32 (0 or 1)."""
    w = v.astype(np.int64)
    for shift in (16, 8, 4, 2, 1):
        w = w ^ (w >> shift)
    return w & 1


def fwht(x: IntArray) -> IntArray:
    """Walsh–Hadamard transform ``H x`` of a length-2^m vector (Sylvester order), in integers.

    >>> fwht(np.array([1, 0, 0, 0])).tolist(), fwht(np.array([0, 1, 0, 0])).tolist()
    ([1, 1, 1, 1], [1, -1, 1, -1])
    """
    y = np.array(x, dtype=np.int64)
    size = y.size
    h = 1
    while h < size:
        blocks = y.reshape(-1, 2, h)
        a, b = blocks[:, 0, :].copy(), blocks[:, 1, :]
        blocks[:, 0, :] += b
        blocks[:, 1, :] = a - b
        h *= 2
    return y


@dataclass(frozen=True, kw_only=True)
class HadamardResponse(FrequencyOracle):
    """Hadamard response, high-privacy form (Acharya, Sun and Zhang 2019, §4).

    With ``K`` the power of two above ``k`` and ``H`` the ``K×K`` Sylvester–Hadamard matrix
    (``H[y, c] = (−1)^popcount(y & c)``), value ``x`` owns the ``K/2`` outputs
    ``C_x = {y : H[y, x + 1] = 1}``. The client reports a uniform element of ``C_x`` with
    probability ``p = e^ε/(e^ε + 1)``, else a uniform element of its complement: every output
    has probability ``2p/K`` or ``2(1−p)/K``, a ratio ``p/(1−p) ≤ e^ε`` (ε-LDP). Two such sets
    share exactly ``K/4`` outputs, so any other user supports ``v`` with ``q = 1/2``. The server
    decodes all ``k`` support counts with one ``K``-point transform of the report histogram.
    ``p`` is rounded down to a multiple of 2^-60.

    Report format: one int in ``0..K−1`` per user (``log₂ K`` bits).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import HadamardResponse
    >>> hr = HadamardResponse(epsilon=1.0, k=1000)
    >>> hr.K, hr.message_bits
    (1024, 10)
    >>> est = hr.estimate(hr.randomize(np.full(20_000, 3), rng=0))
    >>> bool(abs(est.counts[3] - 20_000) < 5 * np.sqrt(est.variance[3]))
    True
    """

    name: ClassVar[str] = "HR"
    K: int = field(init=False)

    def _calibrate(self) -> tuple[Fraction, Fraction, Fraction]:
        big = 1 << self.k.bit_length()  # > k, so columns 1..k exist
        object.__setattr__(self, "K", big)
        e = exp_capped(self.epsilon)
        p_num = math.floor(Fraction(e / (e + 1.0)) * ONE * (1 - 2**-50))
        while log_up(Fraction(p_num, ONE - p_num)) > self.epsilon:
            p_num -= max(1, p_num >> 48)
        p = dyadic(p_num)
        return p, Fraction(1, 2), p / (1 - p)

    def _params(self) -> str:
        return f"K={self.K}"

    @property
    def message_bits(self) -> int:
        return self.K.bit_length() - 1

    def _randomize(self, x: IntArray, gen: np.random.Generator) -> IntArray:
        n = x.size
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        inside = coins(gen, int(self.p * ONE), n)
        col = x + 1
        y = gen.integers(0, self.K, size=n, dtype=np.int64)
        # y ↦ y ^ lowbit(col) flips H[y, col], a bijection between C_x and its complement:
        # fixing a uniform y's side this way leaves it uniform on the chosen side
        wrong = (parity(y & col) == 1) == inside
        return np.where(wrong, y ^ (col & -col), y)

    def _validate(self, values: npt.NDArray[Any]) -> IntArray:
        if values.ndim != 1:
            raise DataError(f"HR reports are one int per user (1-d), got shape {values.shape}.")
        return check_domain_values(values, self.K, "reports")

    def _support(self, values: npt.NDArray[Any]) -> IntArray:
        n = values.shape[0]
        w = fwht(np.bincount(values, minlength=self.K).astype(np.int64))
        # #{y ∈ C_v} − #{y ∉ C_v} = (H hist)[v + 1]
        return np.asarray((n + w[1 : self.k + 1]) // 2, dtype=np.int64)
