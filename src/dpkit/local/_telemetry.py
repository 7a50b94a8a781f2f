"""Microsoft's telemetry protocols (Ding, Kulkarni and Yekhanin 2017): 1BitMean and dBitFlip,
with memoization for counters collected repeatedly."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_epsilon
from dpkit._codes import category_codes, clamped
from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local._coins import ONE, coins, exp_capped, log_up, require_bias
from dpkit.local._numeric import DuchiMean, MeanEstimate
from dpkit.local._reports import Reports
from dpkit.mechanisms._base import FloatArray, IntArray
from dpkit.random import RNGLike, as_generator

__all__ = ["DBitEstimate", "DBitFlip", "MemoizedOneBitClient", "OneBitMean"]


def _check_counters(values: object, m: float, missing: object = "raise") -> FloatArray:
    """Counters clamped to the declared ``[0, m]`` (±inf too): the report of a counter beyond
    ``m`` is the report of ``m``, so the ε-LDP bound holds; never refused on a value. A missing
    one (NaN, None) follows ``missing=``."""
    x = clamped(values, 0.0, float(m), missing)
    if x.ndim != 1:
        raise DataError("values must be a 1-d array of numbers in [0, m].")
    return x


@dataclass(frozen=True, kw_only=True)
class OneBitMean:
    """1BitMean: each user sends one bit about a counter ``x ∈ [0, m]`` (Ding et al. 2017, §2.1).

    The bit is 1 with probability ``1/(e^ε + 1) + (x/m)(e^ε − 1)/(e^ε + 1)`` (rounded to a
    multiple of 2^-60 inside the range whose odds ratio is at most e^ε): ε-LDP per report. It is
    Duchi et al.'s mechanism on ``2x/m − 1``. The server's mean
    ``(m/n) Σ (b (e^ε + 1) − 1)/(e^ε − 1)`` is unbiased with variance
    ``m² (e^ε+1)²/(e^ε−1)² · Σ P_i(1 − P_i) / n²`` (at most ``m² (e^ε+1)²/(4 n (e^ε−1)²)``).
    Collected once per period without memoization, the cost adds up: ``T`` periods cost ``T ε``;
    see :class:`MemoizedOneBitClient`.

    Report format: one bit (0/1) per user, as :class:`Reports` tagged with ``m`` and the exact
    bias, so bits made for another ε or ``m`` are refused.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import OneBitMean
    >>> ob = OneBitMean(epsilon=1.0, m=24.0)   # hours of use per day
    >>> x = np.random.default_rng(0).uniform(0, 24, 50_000)
    >>> est = ob.estimate_mean(ob.randomize(x, rng=1))
    >>> bool(abs(est.value - x.mean()) < 4 * np.sqrt(est.variance))
    True
    """

    epsilon: float
    m: float
    _duchi: DuchiMean = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        m = self.m
        if isinstance(m, bool) or not isinstance(m, numbers.Real) or not 0 < float(m) < math.inf:
            raise PrivacyParameterError(
                f"m (the counters' public upper bound) must be > 0, got {m!r}."
            )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "m", float(m))
        object.__setattr__(self, "_duchi", DuchiMean(epsilon=eps))

    @property
    def tag(self) -> str:
        """The protocol and its public parameters, carried by each :class:`Reports`."""
        return f"1BitMean(m={self.m!r}, p_max={Fraction(self._duchi._num, ONE)})"

    def randomize(
        self, values: object, *, rng: RNGLike = None, missing: Missing = MISSING_DEFAULT
    ) -> Reports:
        """One bit per user. A counter beyond ``[0, m]`` is clamped to it; a missing one (NaN,
        None) is refused; ``missing="drop"`` is refused too (a user left out would be told apart
        by the missing report)."""
        x = _check_counters(values, self.m, missing)
        out = self._duchi._randomize(2.0 * x / self.m - 1.0, as_generator(rng))
        return Reports(self.tag, (out > 0).astype(np.int64))

    def estimate_mean(self, bits: Reports | object) -> MeanEstimate:
        """Unbiased mean counter from the bits (this protocol's :class:`Reports`, or raw bits)."""
        if isinstance(bits, Reports):
            if bits.protocol != self.tag:
                raise DataError(f"these reports were made by {bits.protocol!r}, not {self.tag!r}.")
            bits = bits.values
        b = np.asarray(bits) if bits is not None else np.zeros((0, 0))
        if b.ndim != 1 or b.dtype.kind not in "biu" or (b.size and (b.min() < 0 or b.max() > 1)):
            raise DataError("1BitMean reports are one 0/1 bit per user.")
        if b.size == 0:
            raise DataError("no reports to estimate from; collect at least one report.")
        c = self._duchi.C
        # report ±C ↦ counter scale: x = m (y + 1)/2 with y = ±C
        y = np.where(b == 1, c, -c)
        inner = self._duchi.estimate_mean(y)
        half = self.m / 2.0
        return MeanEstimate(
            half * (inner.value + 1.0),
            half * half * inner.variance,
            half * half * inner.variance_bound,
            inner.n,
        )


@dataclass
class MemoizedOneBitClient:
    """A device's 1BitMean client for a counter reported every period (Ding et al. 2017, §3).

    Setup (once per device): a uniform offset ``α ∈ [0, 1)`` and, for every level
    ``l = 0, …, s`` of the grid ``l·m/s``, one memoized 1BitMean bit of the value ``l·m/s``.
    Each period the counter is rounded to a neighbouring level by α-point rounding (up iff its
    fractional position exceeds α; unbiased over α) and the memoized bit of that level is
    sent.

    Guarantee (Ding et al. 2017, §3): while a user's rounded level stays the same, every report
    they ever send is the same ε-LDP bit, so any number of periods costs ε in total: two users
    whose levels are constant are ε-indistinguishable however long they report. **A change of
    level is not protected at all**: the memoized bits are fixed once, so a user whose level
    never changes sends identical bits forever, and two different bits prove that the level
    changed (a likelihood ratio of infinity, not ``ε`` per level visited). Ding et al. add
    output perturbation for that; this client does not. Identical bits also make a constant
    user's reports linkable across periods.
    """

    mechanism: OneBitMean
    levels: int
    gen: np.random.Generator
    _alpha: float = field(init=False)
    _bits: IntArray = field(init=False, repr=False)

    def __init__(self, mechanism: OneBitMean, *, levels: int = 1, rng: RNGLike = None) -> None:
        if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= 1 << 16:
            raise PrivacyParameterError(f"levels must be an int in [1, 65536], got {levels!r}.")
        self.mechanism, self.levels, self.gen = mechanism, levels, as_generator(rng)
        self._alpha = float(self.gen.random())
        grid = np.arange(levels + 1) * (mechanism.m / levels)
        self._bits = mechanism.randomize(np.minimum(grid, mechanism.m), rng=self.gen).values

    def level(self, value: float) -> int:
        """The level a counter value is rounded to (α-point rounding)."""
        x = _check_counters([value], self.mechanism.m)[0]
        pos = x * self.levels / self.mechanism.m
        base = math.floor(pos)
        return int(min(self.levels, base + (1 if pos - base > self._alpha else 0)))

    def report(self, value: float) -> int:
        """This period's bit for ``value``."""
        return int(self._bits[self.level(value)])


@dataclass(frozen=True, kw_only=True)
class DBitFlip:
    """dBitFlip: histograms over ``k`` buckets, ``d`` bits per user (Ding et al. 2017, §2.2).

    Each user draws ``d`` distinct buckets once (and keeps them: the memoized part) and, for
    each, sends a bit that is 1 with probability ``e^{ε/2}/(e^{ε/2} + 1)`` if their value is in
    that bucket and ``1/(e^{ε/2} + 1)`` otherwise (rounded to multiples of 2^-60 with odds ratio
    at most e^{ε/2}). A change of value changes at most two of the biases, so each report is
    ε-LDP. The count of bucket ``v`` is estimated by
    ``(k/d) Σ_{users who drew v} (b − q)/(p − q)``, unbiased over the random buckets, with
    variance ``(k/d)·[n_v p(1−p) + (n − n_v) q(1−q)]/(p − q)² + (k/d − 1)·n_v``.

    Report format: ``[j_1, …, j_d, b_1, …, b_d]`` ints per user (buckets increasing), as
    :class:`Reports` tagged with ``k``, ``d`` and the exact bias.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import DBitFlip
    >>> db = DBitFlip(epsilon=2.0, k=16, d=4)
    >>> x = np.random.default_rng(0).integers(0, 16, 40_000)
    >>> est = db.estimate(db.randomize(x, rng=1))
    >>> truth = np.bincount(x, minlength=16)
    >>> bool(np.all(np.abs(est.counts - truth) < 5 * np.sqrt(est.variance)))
    True
    """

    epsilon: float
    k: int
    d: int
    _p: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        for name, hi in (("k", 1 << 20), ("d", self.k if isinstance(self.k, int) else 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
                raise PrivacyParameterError(f"{name} must be an int in [1, {hi}], got {v!r}.")
        if self.k < 2:
            raise PrivacyParameterError("k must be at least 2.")
        e = exp_capped(eps / 2)
        num = math.floor(Fraction(e / (e + 1.0)) * ONE * (1 - 2**-50))
        while 2 * log_up(Fraction(num, ONE - num)) > eps:
            num -= max(1, num >> 48)
        require_bias(num, "dBitFlip")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "_p", num)

    @property
    def p(self) -> float:
        return self._p / ONE

    @property
    def q(self) -> float:
        return (ONE - self._p) / ONE

    @property
    def tag(self) -> str:
        """The protocol and its public parameters, carried by each :class:`Reports`."""
        return f"dBitFlip(k={self.k}, d={self.d}, p={Fraction(self._p, ONE)})"

    def randomize(
        self, values: object, *, rng: RNGLike = None, missing: Missing = MISSING_DEFAULT
    ) -> Reports:
        """One report per user (buckets drawn afresh: a simulation of first reports).

        A value outside ``0..k−1`` is reported as ``k − 1`` (as by every frequency oracle,
        :meth:`dpkit.local.FrequencyOracle.randomize`); a missing one is refused.
        """
        x = category_codes(values, self.k, missing)
        gen = as_generator(rng)
        n = x.size
        buckets = np.sort(
            gen.permuted(np.broadcast_to(np.arange(self.k), (n, self.k)), axis=1)[:, : self.d],
            axis=1,
        )
        hit = buckets == x[:, None]
        bits = np.where(hit, coins(gen, self._p, hit.shape), coins(gen, ONE - self._p, hit.shape))
        return Reports(self.tag, np.column_stack([buckets, bits.astype(np.int64)]).astype(np.int64))

    def variance(self, n: int, true_counts: npt.ArrayLike) -> FloatArray:
        """Exact variance of each bucket's count estimate."""
        nv = np.asarray(true_counts, dtype=np.float64)
        p, q, r = self.p, self.q, self.k / self.d
        return np.asarray(
            r * (nv * p * (1 - p) + (n - nv) * q * (1 - q)) / (p - q) ** 2 + (r - 1) * nv,
            dtype=np.float64,
        )

    def estimate(self, reports: Reports | object) -> DBitEstimate:
        """Unbiased bucket counts with their (plug-in) variances."""
        if isinstance(reports, Reports):
            if reports.protocol != self.tag:
                raise DataError(
                    f"these reports were made by {reports.protocol!r}, not {self.tag!r}."
                )
            reports = reports.values
        raw = np.asarray(reports) if reports is not None else np.zeros((0,))
        if raw.ndim != 2 or raw.shape[1] != 2 * self.d or raw.dtype.kind not in "iu":
            raise DataError(f"dBitFlip reports are rows of {self.d} buckets and {self.d} bits.")
        n = raw.shape[0]
        if n == 0:
            raise DataError("no reports to estimate from; collect at least one report.")
        b, bits = raw[:, : self.d], raw[:, self.d :]
        if (
            b.min() < 0
            or b.max() >= self.k
            or np.any(np.diff(b, axis=1) <= 0)
            or bits.min() < 0
            or bits.max() > 1
        ):
            raise DataError("dBitFlip reports need distinct increasing buckets and 0/1 bits.")
        ones = np.bincount(b[bits == 1], minlength=self.k).astype(np.float64)
        drawn = np.bincount(b.ravel(), minlength=self.k).astype(np.float64)
        p, q = self.p, self.q
        counts = (self.k / self.d) * (ones - q * drawn) / (p - q)
        var = self.variance(n, np.clip(counts, 0, n))
        return DBitEstimate(counts, var, n)


@dataclass(frozen=True)
class DBitEstimate:
    """Bucket counts from dBitFlip reports and their plug-in variances."""

    counts: FloatArray
    variance: FloatArray
    n: int
