"""Generalized (k-ary) randomized response."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.local._coins import ONE, coins
from dpkit.local._oracle import FrequencyOracle, check_domain_values
from dpkit.mechanisms import RandomizedResponse
from dpkit.mechanisms._base import IntArray

__all__ = ["GRR"]

_USERS = 1 << 16  # users per block of the randomizer


@dataclass(frozen=True, kw_only=True)
class GRR(FrequencyOracle):
    """Generalized randomized response (k-RR, direct encoding): report a value in ``0..k−1``.

    The true value is reported with probability ``p = e^ε/(e^ε + k − 1)``, each other value
    with ``q = (1 − p)/(k − 1)``; ``p/q ≤ e^ε`` so each report is ε-LDP (Warner 1965 for
    ``k = 2``, Kamath 2020 "Randomized Response, Revisited"; Kairouz, Oh and Viswanath 2014 for
    ``k`` values; Wang et al. 2017 §4.1). It is calibrated by
    :class:`dpkit.mechanisms.RandomizedResponse`, whose truth probability is an exact multiple of
    2^-60, and samples the same distribution with exact coins. Its variance ``q(1−q)/(p−q)²``
    per user grows with ``k``: best when ``k < 3e^ε + 2`` (Wang et al. 2017, §5).

    Report format: one int in ``0..k−1`` per user (⌈log₂ k⌉ bits).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import GRR
    >>> grr = GRR(epsilon=2.0, k=4)
    >>> x = np.repeat([0, 1, 2, 3], [4000, 3000, 2000, 1000])
    >>> est = grr.estimate(grr.randomize(x, rng=0))
    >>> bool(np.all(np.abs(est.counts - [4000, 3000, 2000, 1000]) < 5 * np.sqrt(est.variance)))
    True
    """

    name: ClassVar[str] = "GRR"
    _rr: RandomizedResponse = field(init=False, repr=False)

    def _calibrate(self) -> tuple[Fraction, Fraction, Fraction]:
        rr = RandomizedResponse(epsilon=self.epsilon, categories=self.k)
        object.__setattr__(self, "_rr", rr)
        p = Fraction(rr._p_num, ONE)
        q = (1 - p) / (self.k - 1)
        return p, q, p / q

    @property
    def message_bits(self) -> int:
        return max(1, (self.k - 1).bit_length())

    def _randomize(self, x: IntArray, gen: np.random.Generator) -> IntArray:
        # the same draw as RandomizedResponse.randomize (truth with probability p_num/2^60,
        # otherwise a uniform other value), with the coin resolved from one random byte in
        # 255 of 256 cases (see dpkit.local._coins) to serve tens of millions of users. Blocks
        # of 2^16 users in the smallest integer type that holds a code keep the temporaries in
        # cache; every step is a whole-block pass, none per user.
        n, k = x.size, self.k
        small = np.uint16 if k <= 1 << 16 else np.int32
        out = np.empty(n, dtype=np.int64)
        for lo in range(0, n, _USERS):
            xs: npt.NDArray[np.integer[Any]] = x[lo : lo + _USERS].astype(small)
            m = xs.size
            truthful = coins(gen, self._rr._p_num, m)
            other: npt.NDArray[np.integer[Any]] = gen.integers(0, k - 1, size=m, dtype=small)
            other += other >= xs  # skip the true value: uniform over the k − 1 others
            out[lo : lo + m] = np.where(truthful, xs, other)
        return out

    def _validate(self, values: npt.NDArray[Any]) -> IntArray:
        if values.ndim != 1:
            raise DataError(f"GRR reports are one int per user (1-d), got shape {values.shape}.")
        return check_domain_values(values, self.k, "reports")

    def _support(self, values: npt.NDArray[Any]) -> IntArray:
        return np.bincount(values, minlength=self.k).astype(np.int64)
