"""RAPPOR (Erlingsson, Pihur and Korolova 2014): Bloom filters, permanent and instantaneous
randomized response, and decoding over a candidate set."""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy.optimize import nnls
from scipy.special import ndtri

from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local._coins import ONE, coins, log_up
from dpkit.local._reports import Reports
from dpkit.mechanisms._base import FloatArray, IntArray
from dpkit.mechanisms._tails import check_alpha
from dpkit.random import RNGLike, as_generator

__all__ = ["Rappor", "RapporClient", "RapporEstimate"]


def _prob(value: object, name: str, *, up: bool, half: bool = False) -> int:
    """A probability in (0, 1) (halved if asked) as a multiple of 2^-60, rounded to the safe
    side."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Fraction):
        raise PrivacyParameterError(f"{name} must be a probability in (0, 1), got {value!r}.")
    x = Fraction(value) if isinstance(value, Fraction) else Fraction(float(value))
    if not 0 < x < 1:
        raise PrivacyParameterError(f"{name} must be in (0, 1), got {float(x)!r}.")
    scaled = x * ONE / (2 if half else 1)
    return int(math.ceil(scaled) if up else math.floor(scaled))


@dataclass(frozen=True)
class RapporEstimate:
    """Counts of each candidate decoded from RAPPOR reports.

    Attributes
    ----------
    candidates : tuple of str
    counts : numpy.ndarray
        Least-squares counts (unbiased when every value users hold is a candidate).
    std : numpy.ndarray
        Their standard errors (from the estimated bit-count variances).
    nonnegative : numpy.ndarray
        Non-negative least squares (NNLS) counts: post-processed, biased, no intervals.
    n : int
    """

    candidates: tuple[str, ...]
    counts: FloatArray
    std: FloatArray
    nonnegative: FloatArray
    n: int

    def ci(self, alpha: float = 0.05) -> FloatArray:
        """Half-widths of the normal-approximation ``1 − alpha`` intervals for ``counts``."""
        return np.asarray(float(ndtri(1 - check_alpha(alpha) / 2)) * self.std, dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class Rappor:
    """RAPPOR's public parameters, client randomisation and server decoding.

    A string value is hashed into a Bloom filter of ``m`` bits by ``h`` functions that depend on
    the user's cohort: bit ``int(SHA-256("cohort|i|value")[:8]) mod m`` for ``i < h`` (big-endian,
    UTF-8), so any client can compute them. The **permanent** randomized response replaces each
    bit by a fair coin with probability ``f`` and is memoized per value on the device; each
    **instantaneous** report then sets a bit with probability ``q`` if the memoized bit is 1 and
    ``p`` if it is 0 (Erlingsson, Pihur and Korolova 2014, §3). Probabilities are rounded to
    multiples of 2^-60 on the private side.

    Guarantees (two values differ in at most ``2h`` Bloom bits):

    * over any number of reports of one value (the memoized permanent response),
      ``ε∞ = 2h ln((1 − f/2)/(f/2))`` (their Thm 1);
    * one report, ``ε₁ = h ln(q*(1 − p*)/(p*(1 − q*)))`` with
      ``q* = f(p + q)/2 + (1 − f) q`` and ``p* = f(p + q)/2 + (1 − f) p`` (their Thm 2: of the
      ``2h`` bits that differ, ``h`` favour a set report and ``h`` a clear one).

    Report format: ``[cohort, bit_0, …, bit_{m−1}]`` (ints, bits 0/1) per report.

    Examples
    --------
    >>> from dpkit.local import Rappor
    >>> r = Rappor(m=32, h=2, f=0.5, p=0.5, q=0.75, cohorts=4)
    >>> round(r.epsilon_permanent, 3), round(r.epsilon_one_report, 4)  # the paper's 4.39, 1.0743
    (4.394, 1.0743)
    """

    m: int = 128
    h: int = 2
    f: float = 0.5
    p: float = 0.5
    q: float = 0.75
    cohorts: int = 32
    _f_half: int = field(init=False, repr=False)
    _p: int = field(init=False, repr=False)
    _q: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, lo, hi in (("m", 2, 1 << 16), ("h", 1, 64), ("cohorts", 1, 1 << 16)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise PrivacyParameterError(f"{name} must be an int in [{lo}, {hi}], got {v!r}.")
        f_half = _prob(self.f, "f", up=True, half=True)
        p, q = _prob(self.p, "p", up=True), _prob(self.q, "q", up=False)
        if not q > p:
            raise PrivacyParameterError(
                "RAPPOR needs q > p (a set bit must be more likely to stay set)."
            )
        object.__setattr__(self, "_f_half", f_half)
        object.__setattr__(self, "_p", p)
        object.__setattr__(self, "_q", q)

    # --- guarantees ------------------------------------------------------------------------
    def _star(self) -> tuple[Fraction, Fraction]:
        fh, p, q = (Fraction(v, ONE) for v in (self._f_half, self._p, self._q))
        f = 2 * fh
        return fh * (p + q) + (1 - f) * q, fh * (p + q) + (1 - f) * p

    @property
    def epsilon_permanent(self) -> float:
        """ε∞: the value's protection over every report ever sent (memoized response)."""
        fh = Fraction(self._f_half, ONE)
        if fh >= Fraction(1, 2):
            return 0.0
        return 2 * self.h * log_up((1 - fh) / fh)

    @property
    def epsilon_one_report(self) -> float:
        """ε₁: the protection of a single report."""
        qs, ps = self._star()
        return self.h * log_up(qs * (1 - ps) / (ps * (1 - qs)))

    @property
    def tag(self) -> str:
        return (
            f"RAPPOR(m={self.m}, h={self.h}, f/2={Fraction(self._f_half, ONE)}, "
            f"p={Fraction(self._p, ONE)}, q={Fraction(self._q, ONE)}, cohorts={self.cohorts}, "
            "hash=sha256)"
        )

    # --- hashing ---------------------------------------------------------------------------
    def bloom_bits(self, value: str, cohort: int) -> list[int]:
        """The Bloom filter positions of ``value`` in ``cohort`` (the specified hash)."""
        if not isinstance(value, str):
            raise DataError("RAPPOR values must be strings.")
        out = []
        for i in range(self.h):
            digest = hashlib.sha256(f"{cohort}|{i}|{value}".encode()).digest()
            out.append(int.from_bytes(digest[:8], "big") % self.m)
        return out

    def _bloom(self, values: Sequence[str], cohorts: IntArray) -> npt.NDArray[np.bool_]:
        bloom = np.zeros((len(values), self.m), dtype=np.bool_)
        cache: dict[tuple[int, str], list[int]] = {}
        for row, (v, c) in enumerate(zip(values, cohorts.tolist(), strict=True)):
            key = (c, v)
            if key not in cache:
                cache[key] = self.bloom_bits(v, c)
            bloom[row, cache[key]] = True
        return bloom

    def _permanent(
        self, bloom: npt.NDArray[np.bool_], gen: np.random.Generator
    ) -> npt.NDArray[np.bool_]:
        # with probability f/2 a 1, f/2 a 0, else the true bit
        u = gen.integers(0, ONE, size=bloom.shape, dtype=np.int64)
        return np.where(u < self._f_half, True, np.where(u < 2 * self._f_half, False, bloom))

    def _instant(
        self, perm: npt.NDArray[np.bool_], gen: np.random.Generator
    ) -> npt.NDArray[np.bool_]:
        one = coins(gen, self._q, perm.shape)
        zero = coins(gen, self._p, perm.shape)
        return np.where(perm, one, zero)

    def _check_values(self, values: object, cohorts: object) -> tuple[list[str], IntArray]:
        if values is None or isinstance(values, str):
            raise DataError("values must be a sequence of strings (one per user).")
        vals = list(values)  # type: ignore[call-overload]
        if not all(isinstance(v, str) for v in vals):
            raise DataError("RAPPOR values must be strings.")
        c = np.asarray(cohorts)
        if c.shape != (len(vals),) or c.dtype.kind not in "iu":
            raise DataError("cohorts must be one int per value.")
        if c.size and (c.min() < 0 or c.max() >= self.cohorts):
            raise DataError(f"cohorts must lie in 0..{self.cohorts - 1}.")
        return vals, c.astype(np.int64)

    def simulate(self, values: object, cohorts: object, *, rng: RNGLike = None) -> Reports:
        """One report per user (fresh permanent response each): a simulation of many clients.

        Each report is ε₁-LDP. Real clients use :class:`RapporClient`, which memoizes.
        """
        vals, c = self._check_values(values, cohorts)
        gen = as_generator(rng)
        bits = self._instant(self._permanent(self._bloom(vals, c), gen), gen)
        return Reports(self.tag, np.column_stack([c, bits.astype(np.int64)]))

    def client(self, cohort: int, *, rng: RNGLike = None) -> RapporClient:
        """A device's client: memoizes the permanent response of each value it reports."""
        if (
            isinstance(cohort, bool)
            or not isinstance(cohort, numbers.Integral)
            or not 0 <= cohort < self.cohorts
        ):
            raise DataError(f"cohort must be an int in 0..{self.cohorts - 1}.")
        return RapporClient(self, int(cohort), as_generator(rng))

    # --- decoding --------------------------------------------------------------------------
    def estimate(self, reports: Reports | object, candidates: Sequence[str]) -> RapporEstimate:
        """Counts of the ``candidates`` from the reports (least squares and NNLS).

        Per cohort the expected number of set bits is ``p* N + (q* − p*) B`` where ``B`` counts
        users whose Bloom filter has the bit; ``B̂`` is regressed on the candidates' Bloom
        filters (Erlingsson et al. 2014, §4). Values outside the candidate set bias the
        estimates; candidates must be chosen without looking at private data.
        """
        if isinstance(reports, Reports):
            if reports.protocol != self.tag:
                raise DataError(
                    f"these reports were made by {reports.protocol!r}, not {self.tag!r}."
                )
            raw = np.asarray(reports.values)
        else:
            raw = np.asarray(reports) if reports is not None else np.zeros((0,))
        if raw.ndim != 2 or raw.shape[1] != self.m + 1 or raw.dtype.kind not in "iu":
            raise DataError(f"RAPPOR reports are rows [cohort, {self.m} bits] of ints.")
        n = raw.shape[0]
        if n == 0:
            raise DataError("no reports to estimate from; collect at least one report.")
        coh, bits = raw[:, 0], raw[:, 1:]
        if coh.min() < 0 or coh.max() >= self.cohorts or bits.min() < 0 or bits.max() > 1:
            raise DataError("RAPPOR reports need cohorts in range and 0/1 bits.")
        cands = list(candidates)
        if not cands or not all(isinstance(v, str) for v in cands) or len(set(cands)) != len(cands):
            raise DataError("candidates must be distinct strings (at least one).")
        qs, ps = (float(x) for x in self._star())
        per = np.zeros((self.cohorts, self.m))
        sizes = np.bincount(coh, minlength=self.cohorts).astype(np.float64)
        np.add.at(per, coh, bits)
        b_hat = (per - ps * sizes[:, None]) / (qs - ps)
        rate = np.where(sizes[:, None] > 0, per / np.maximum(sizes[:, None], 1), 0.0)
        var = sizes[:, None] * rate * (1 - rate) / (qs - ps) ** 2
        design = np.zeros((self.cohorts, self.m, len(cands)))
        for c in range(self.cohorts):
            for j, v in enumerate(cands):
                design[c, self.bloom_bits(v, c), j] = 1.0
        # each cohort holds its share of each candidate: scale columns by the cohort's share
        design *= (sizes / n)[:, None, None]
        x = design.reshape(-1, len(cands))
        y = b_hat.reshape(-1)
        w = var.reshape(-1)
        counts, *_ = np.linalg.lstsq(x, y, rcond=None)
        pinv = np.linalg.pinv(x)
        std = np.sqrt(np.maximum((pinv * w) @ pinv.T, 0.0).diagonal())
        nonneg, _ = nnls(x, y)
        return RapporEstimate(
            tuple(cands),
            np.asarray(counts, dtype=np.float64),
            np.asarray(std, dtype=np.float64),
            np.asarray(nonneg, dtype=np.float64),
            int(n),
        )


@dataclass
class RapporClient:
    """One device: memoizes the permanent response of each value (ε∞ over time).

    Reports of the same value reuse its memoized permanent response, so however many reports it
    sends, that value is protected at ``epsilon_permanent``; each report alone at
    ``epsilon_one_report``.

    >>> from dpkit.local import Rappor
    >>> r = Rappor(m=16, h=2, cohorts=2)
    >>> dev = r.client(1, rng=0)
    >>> a = dev.report("news.example")
    >>> len(a), a[0]
    (17, 1)
    """

    rappor: Rappor
    cohort: int
    gen: np.random.Generator
    _memo: dict[str, npt.NDArray[np.bool_]] = field(default_factory=dict, repr=False)

    def report(self, value: str) -> list[int]:
        """One instantaneous report ``[cohort, bits…]`` of ``value``."""
        r = self.rappor
        if not isinstance(value, str):
            raise DataError("RAPPOR values must be strings.")
        if value not in self._memo:
            bloom = r._bloom([value], np.array([self.cohort]))
            self._memo[value] = r._permanent(bloom, self.gen)
        bits = r._instant(self._memo[value], self.gen)[0]
        return [self.cohort, *bits.astype(int).tolist()]
