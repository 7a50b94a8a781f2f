"""Apple's count-mean sketch and Hadamard count-mean sketch (Apple Differential Privacy Team
2017, "Learning with Privacy at Scale")."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_epsilon
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local._coins import ONE, coins, exp_capped, log_up, require_bias
from dpkit.local._hadamard import fwht, parity
from dpkit.local._reports import Reports
from dpkit.mechanisms._base import FloatArray, IntArray
from dpkit.random import RNGLike, as_generator

__all__ = ["CountMeanSketch", "SketchEstimate", "sketch_hash"]


def sketch_hash(value: str, row: int, width: int) -> int:
    """Row ``row``'s hash of ``value``: ``int(SHA-256("row|value")[:8]) mod width`` (big-endian)."""
    return int.from_bytes(hashlib.sha256(f"{row}|{value}".encode()).digest()[:8], "big") % width


@dataclass(frozen=True)
class SketchEstimate:
    """Counts of the queried values, with their variances over the users' random choices."""

    values: tuple[str, ...]
    counts: FloatArray
    variance: FloatArray
    n: int


@dataclass(frozen=True, kw_only=True)
class CountMeanSketch:
    """Count-mean sketch (``hadamard=False``) or Hadamard count-mean sketch (``hadamard=True``).

    A user picks one of ``rows`` hash functions ``h_j`` (:func:`sketch_hash`) at random.

    * CMS: the one-hot vector of ``h_j(value)`` over ``width`` cells, in ±1, has each entry's
      sign flipped with probability ``1/(e^{ε/2} + 1)``; two values differ in two entries, so the
      report is ε-LDP. Report: ``[j, bit_0, …, bit_{width−1}]`` (bit 1 for +1).
    * HCMS: a random Hadamard coefficient ``l`` of that one-hot vector, ``H[l, h_j(value)] = ±1``,
      is flipped with probability ``1/(e^ε + 1)``: ε-LDP, one bit. ``width`` must be a power of
      two. Report: ``[j, l, bit]``.

    The server debiases each report, accumulates the sketch and estimates a value's count as
    ``(m/(m−1))·(mean over rows of M[j, h_j(value)] − n/m)`` (Apple 2017, Algorithms 1–4).
    Probabilities are multiples of 2^-60 with odds at most e^{ε/2} (CMS) or e^ε (HCMS).

    The estimate is unbiased on average over hash functions drawn at random, not for the fixed
    public hashes used here: given them, a value's estimate is off by
    ``(m/(m−1))·Σ_u n_u (ρ_u − 1/m)`` over the other values ``u`` (``ρ_u`` the share of rows
    where ``u`` collides with it), i.e. ``−(n − n_v)/(m − 1)`` for a value that collides with
    none, plus about ``n_u/rows`` for each row shared with a value ``u``. That offset is the
    same for every run, so :attr:`SketchEstimate.variance` (the users' rows and coins, with each
    user's collisions counted as independent events of probability ``1/m``) does not cover it:
    intervals built from it under-cover once ``n/m`` is comparable to its square root. Choose
    ``width`` well above ``n/√variance``; :meth:`moments` gives the exact mean and variance for
    a known population.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import CountMeanSketch
    >>> cms = CountMeanSketch(epsilon=4.0, rows=16, width=256)
    >>> words = ["ok"] * 6000 + ["lol"] * 3000 + ["brb"] * 1000
    >>> est = cms.estimate(cms.randomize(words, rng=0), ["ok", "lol", "brb", "zzz"])
    >>> bool(np.all(np.abs(est.counts - [6000, 3000, 1000, 0]) < 5 * np.sqrt(est.variance)))
    True
    """

    epsilon: float
    rows: int = 64
    width: int = 1024
    hadamard: bool = False
    _num: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        for name, lo, hi in (("rows", 1, 1 << 12), ("width", 2, 1 << 20)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise PrivacyParameterError(f"{name} must be an int in [{lo}, {hi}], got {v!r}.")
        if self.hadamard and self.width & (self.width - 1):
            raise PrivacyParameterError("the Hadamard sketch needs a power-of-two width.")
        # probability of keeping a sign; its odds are at most e^{ε/2} per entry (CMS) or e^ε
        per = eps if self.hadamard else eps / 2
        e = exp_capped(per)
        num = math.floor(Fraction(e / (e + 1.0)) * ONE * (1 - 2**-50))
        while log_up(Fraction(num, ONE - num)) > per:
            num -= max(1, num >> 48)
        require_bias(num, "the count-mean sketch")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "_num", num)

    @property
    def tag(self) -> str:
        kind = "HCMS" if self.hadamard else "CMS"
        return f"{kind}(rows={self.rows}, width={self.width}, keep={Fraction(self._num, ONE)})"

    @property
    def _c(self) -> float:
        keep = self._num / ONE
        return 1.0 / (2 * keep - 1)  # E[sign] = (2·keep − 1)·truth, so c debiases

    def _cells(self, values: Sequence[str], rows: IntArray) -> IntArray:
        cache: dict[tuple[int, str], int] = {}
        out = np.empty(len(values), dtype=np.int64)
        for i, (v, j) in enumerate(zip(values, rows.tolist(), strict=True)):
            key = (j, v)
            if key not in cache:
                cache[key] = sketch_hash(v, j, self.width)
            out[i] = cache[key]
        return out

    def randomize(self, values: object, *, rng: RNGLike = None) -> Reports:
        """One report per user (a string each)."""
        if values is None or isinstance(values, str):
            raise DataError("values must be a sequence of strings (one per user).")
        vals = list(values)  # type: ignore[call-overload]
        if not all(isinstance(v, str) for v in vals):
            raise DataError("sketch values must be strings.")
        gen = as_generator(rng)
        n = len(vals)
        j = gen.integers(0, self.rows, size=n, dtype=np.int64)
        cell = self._cells(vals, j)
        if self.hadamard:
            col = gen.integers(0, self.width, size=n, dtype=np.int64)
            sign_plus = parity(col & cell) == 0
            keep = coins(gen, self._num, n)
            bit = np.where(keep, sign_plus, ~sign_plus)
            return Reports(self.tag, np.column_stack([j, col, bit.astype(np.int64)]))
        onehot = np.zeros((n, self.width), dtype=np.bool_)
        onehot[np.arange(n), cell] = True
        keep = coins(gen, self._num, onehot.shape)
        bits = np.where(keep, onehot, ~onehot)
        return Reports(self.tag, np.column_stack([j, bits.astype(np.int64)]))

    def _sketch(self, raw: npt.NDArray[np.int64]) -> FloatArray:
        m, k, c = self.width, self.rows, self._c
        sketch = np.zeros((k, m))
        j = raw[:, 0]
        if self.hadamard:
            # a report (l, ±1) debiased to y = c·sign estimates e_h by y·H[:, l] (H e_h seen at
            # one random coefficient, scaled by m, transformed back by H/m); per row that is
            # k·c·H·D with D[l] the net sign count at coefficient l (exact in integers)
            col, sign = raw[:, 1], 2 * raw[:, 2] - 1
            net = np.zeros((k, m), dtype=np.int64)
            np.add.at(net, (j, col), sign)
            for r in range(k):
                sketch[r] = k * c * fwht(net[r])
            return sketch
        signs = 2.0 * raw[:, 1:] - 1.0
        np.add.at(sketch, j, k * (c / 2.0 * signs + 0.5))
        return sketch

    def estimate(self, reports: Reports | object, values: Sequence[str]) -> SketchEstimate:
        """Counts of ``values`` (chosen without looking at private data) from the reports."""
        if isinstance(reports, Reports):
            if reports.protocol != self.tag:
                raise DataError(
                    f"these reports were made by {reports.protocol!r}, not {self.tag!r}."
                )
            raw = np.asarray(reports.values)
        else:
            raw = np.asarray(reports) if reports is not None else np.zeros((0,))
        cols = 3 if self.hadamard else self.width + 1
        if raw.ndim != 2 or raw.shape[1] != cols or raw.dtype.kind not in "iu":
            raise DataError(f"{self.tag} reports are rows of {cols} ints.")
        n = raw.shape[0]
        if n == 0:
            raise DataError("no reports to estimate from; collect at least one report.")
        rest = raw[:, 1:] if not self.hadamard else raw[:, 2:]
        if raw[:, 0].min() < 0 or raw[:, 0].max() >= self.rows or rest.min() < 0 or rest.max() > 1:
            raise DataError("reports hold a row out of range or a bit other than 0/1.")
        if self.hadamard and (raw[:, 1].min() < 0 or raw[:, 1].max() >= self.width):
            raise DataError("HCMS reports hold a coefficient index out of range.")
        vals = list(values)
        if not vals or not all(isinstance(v, str) for v in vals):
            raise DataError("values must be a non-empty sequence of strings.")
        sketch = self._sketch(raw.astype(np.int64))
        m, k = self.width, self.rows
        cells = np.array([[sketch_hash(v, r, m) for r in range(k)] for v in vals])
        read = sketch[np.arange(k)[None, :], cells].mean(axis=1)
        counts = (m / (m - 1)) * (read - n / m)
        return SketchEstimate(tuple(vals), counts, self.variance(n, np.clip(counts, 0, n)), n)

    def moments(self, population: dict[str, int], value: str) -> tuple[float, float]:
        """Exact mean and variance of ``value``'s count estimate for these (fixed) hashes.

        ``population`` maps every value users hold to its count; the randomness is the users'
        rows and coins. Collisions in the fixed hashes make the mean differ from the count.
        """
        m, k, c = self.width, self.rows, self._c
        s = (m / (m - 1)) ** 2
        mine = np.array([sketch_hash(value, r, m) for r in range(k)])
        mean = var = 0.0
        for v, cnt in population.items():
            rho = float(np.mean([sketch_hash(v, r, m) for r in range(k)] == mine))
            second = c * c if self.hadamard else (c * c - 1) / 4 + rho
            ez = (m / (m - 1)) * (rho - 1 / m)
            mean += cnt * ez
            var += cnt * (s * (second - 2 * rho / m + 1 / m**2) - ez * ez)
        return mean, var

    def variance(self, n: int, true_counts: npt.ArrayLike) -> FloatArray:
        """Variance of a count estimate over the users' random rows and coins, when hashes
        collide at random (probability 1/width); :meth:`moments` is exact for the fixed hashes."""
        nv = np.asarray(true_counts, dtype=np.float64)
        m, c = self.width, self._c
        s = (m / (m - 1)) ** 2
        if self.hadamard:
            # a debiased cell value is ±c, with mean 1 (own value) or 1/m (any other value)
            own = s * (c * c - 2 / m + 1 / m**2) - 1
            other = s * (c * c - 1 / m**2)
        else:
            own = s * ((c * c + 3) / 4 - 2 / m + 1 / m**2) - 1
            other = s * ((c * c - 1) / 4 + (m - 1) / m**2)
        return np.asarray(nv * own + (n - nv) * other, dtype=np.float64)
