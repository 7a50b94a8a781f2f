"""Subset selection (Wang et al. 2016; Ye and Barg 2018): report a set of d values."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.local._coins import ONE, coins, dyadic, exp_capped, log_up
from dpkit.local._oracle import FrequencyOracle
from dpkit.mechanisms._base import IntArray

__all__ = ["SubsetSelection"]

_BLOCK = 1 << 20  # sizes d evaluated at once in calibration


def _pq(k: int, d: int, p_in: float | Fraction) -> tuple[Any, Any]:
    q = (p_in * (d - 1) + (1 - p_in) * d) / (k - 1)
    return p_in, q


@dataclass(frozen=True, kw_only=True)
class SubsetSelection(FrequencyOracle):
    """Subset selection: report ``d`` distinct values, including the true one with high probability.

    With probability ``p = d e^ε/(d e^ε + k − d)`` the report is the true value plus ``d − 1``
    others drawn uniformly; otherwise ``d`` values drawn uniformly from the ``k − 1`` others.
    A ``d``-set containing ``x`` has probability ``p / C(k−1, d−1)``, one without it
    ``(1 − p)/C(k−1, d)``, a ratio of ``p(k − d)/((1 − p) d) ≤ e^ε``: ε-LDP (Wang, Wu, Hu,
    Jha et al. 2016, "Mutual information optimization for randomized response"; Ye and Barg
    2018, order-optimal). Another user's report contains ``v`` with probability
    ``q = (p(d − 1) + (1 − p) d)/(k − 1)``. ``d`` (≈ ``k/(e^ε + 1)``) is the size that
    minimises the exact variance; ``p`` is rounded down to a multiple of 2^-60 and the subsets
    come from exact uniform permutations.

    Report format: ``d`` distinct ints in ``0..k−1`` per user, in increasing order.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import SubsetSelection
    >>> ss = SubsetSelection(epsilon=0.5, k=20)
    >>> ss.d
    7
    >>> est = ss.estimate(ss.randomize(np.full(5000, 4), rng=0))
    >>> bool(abs(est.counts[4] - 5000) < 5 * np.sqrt(est.variance[4]))
    True
    """

    name: ClassVar[str] = "SS"
    d: int = field(init=False)

    def _calibrate(self) -> tuple[Fraction, Fraction, Fraction]:
        k, e = self.k, exp_capped(self.epsilon)
        # the exact variance of every size d, scanned in blocks so that k up to 2^30 needs
        # megabytes, not the tens of gigabytes of one array per quantity
        d, best, p_best = 1, math.inf, 0.0
        for lo in range(1, k, _BLOCK):
            ds = np.arange(lo, min(k, lo + _BLOCK), dtype=np.float64)
            p_in = ds * e / (ds * e + k - ds)
            p, q = _pq(k, ds, p_in)  # type: ignore[arg-type]
            with np.errstate(divide="ignore", invalid="ignore"):  # p = q at a tiny ε: refused
                var = q * (1 - q) / (p - q) ** 2
            i = int(np.argmin(var))
            if var[i] < best:  # strict: the first minimiser wins, as one argmin over all d
                d, best, p_best = lo + i, float(var[i]), float(p_in[i])
        if best == math.inf:
            p_best = float(d * e / (d * e + k - d))
        p_num = math.floor(Fraction(p_best) * ONE * (1 - 2**-50))
        while log_up(Fraction(p_num * (k - d), (ONE - p_num) * d)) > self.epsilon:
            p_num -= max(1, p_num >> 48)
        object.__setattr__(self, "d", d)
        pe, qe = _pq(k, d, dyadic(p_num))
        return pe, qe, Fraction(p_num * (k - d), (ONE - p_num) * d)

    def _params(self) -> str:
        return f"d={self.d}"

    @property
    def message_bits(self) -> int:
        return self.d * max(1, (self.k - 1).bit_length())

    def _randomize(self, x: IntArray, gen: np.random.Generator) -> IntArray:
        n, k, d = x.size, self.k, self.d
        out = np.empty((n, d), dtype=np.int64)
        rows = max(1, (1 << 20) // k)
        base = np.arange(k - 1, dtype=np.int64)
        for lo in range(0, n, rows):
            xs = x[lo : lo + rows, None]
            m = xs.shape[0]
            # first d entries of an exactly uniform permutation of the k − 1 other values
            others = gen.permuted(np.broadcast_to(base, (m, k - 1)), axis=1)[:, :d]
            chosen = others + (others >= xs)
            inside = coins(gen, int(self.p * ONE), m)
            chosen[inside, d - 1] = xs[inside, 0]
            out[lo : lo + m] = np.sort(chosen, axis=1)
        return out

    def _validate(self, values: npt.NDArray[Any]) -> IntArray:
        if values.ndim != 2 or values.shape[1] != self.d:
            raise DataError(
                f"SS reports are {self.d} ints per user (n, {self.d}), got shape {values.shape}."
            )
        v = values.astype(np.int64)
        if v.size and (v.min() < 0 or v.max() >= self.k or np.any(np.diff(v, axis=1) <= 0)):
            raise DataError(
                f"SS reports must hold distinct values in 0..{self.k - 1} in increasing order."
            )
        return v

    def _support(self, values: npt.NDArray[Any]) -> IntArray:
        return np.bincount(values.ravel(), minlength=self.k).astype(np.int64)
