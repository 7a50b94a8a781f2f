"""Heavy hitters over huge domains: the prefix extending method (PEM; Wang, Li and Jha 2019)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from dpkit._checks import check_epsilon
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local._coins import ONE, exp_capped
from dpkit.local._olh import MAX_G, PRIME
from dpkit.local._oracle import pure_variance
from dpkit.local._reports import Reports
from dpkit.mechanisms import RandomizedResponse
from dpkit.mechanisms._base import FloatArray, IntArray
from dpkit.random import RNGLike, as_generator

__all__ = ["HeavyHitters", "PrefixExtension"]

_HALF = 30  # a prefix of ≤ 60 bits is hashed as two 30-bit limbs


def _hash(a1: IntArray, a2: IntArray, b: IntArray, x: IntArray, g: int) -> IntArray:
    # multilinear universal hash ((a1·x_hi + a2·x_lo + b) mod (2^31 − 1)) mod g: every term
    # is below 2^61, so the sum fits in int64
    hi, lo = x >> _HALF, x & ((1 << _HALF) - 1)
    return np.asarray(((a1 * hi + a2 * lo + b) % PRIME) % g, dtype=np.int64)


@dataclass(frozen=True)
class HeavyHitters:
    """Items found by :meth:`PrefixExtension.identify`, most frequent first.

    Attributes
    ----------
    items : list of str
    counts : numpy.ndarray
        Estimated counts in the whole population (unbiased given the item was reached).
    std : float
        Standard deviation of each count estimate at the last level (the same for all items,
        up to their own share of the group).
    """

    items: list[str]
    counts: FloatArray
    std: float


@dataclass(frozen=True, kw_only=True)
class PrefixExtension:
    """PEM: find the most frequent strings without a candidate list (Wang, Li, Jha 2019, §IV).

    Strings are encoded as ``length`` bytes (UTF-8, zero-padded; ``8·length ≤ 60`` bits). Users
    fall at random into one group per level; a user of level ``i`` reports the first
    ``γ + iη`` bits of their string (``γ = ⌈log₂ top⌉`` first, ``η = step`` more per level,
    the full string last) through optimized local hashing with the multilinear universal hash
    ``((a₁·x_hi + a₂·x_lo + b) mod (2^31 − 1)) mod g`` on the prefix's two 30-bit halves (per
    user ``a₁, a₂, b``, sent in the report). Each user reports once, so each is ε-LDP. The server
    keeps the ``top`` prefixes with the largest estimated counts at each level and extends each
    by ``step`` bits.

    Error bound: a level's count estimate of a rare prefix has standard deviation
    ``σ = G·√((n/G) q(1−q))/(p − q)`` with ``G`` levels (≈ ``2G·√(n/G)·e^{ε/2}/(e^ε − 1)``);
    a frequent one's is larger, up to ``σ_max = G·√((n/G)·max(p(1−p), q(1−q)))/(p − q)``
    (its holders add ``p(1−p)`` each instead of ``q(1−q)``). An item whose count exceeds that
    of the ``top``-th largest prefix at each level by more than ``2 z σ_max``,
    ``z = Φ⁻¹(1 − β/(2·top·2^step·G))``, survives every level with probability at least
    ``1 − β`` in the normal approximation (a union bound over the candidates compared);
    :meth:`threshold` returns ``z σ_max``.

    Report format: ``[level, a1, a2, b, y]`` ints per user.

    Examples
    --------
    >>> from dpkit.local import PrefixExtension
    >>> pem = PrefixExtension(epsilon=4.0, length=3, top=4, step=4)
    >>> words = ["cat"] * 30_000 + ["dog"] * 20_000 + ["emu"] * 10_000 + ["yak"] * 100
    >>> found = pem.identify(pem.randomize(words, rng=0))
    >>> found.items[:3]
    ['cat', 'dog', 'emu']
    """

    epsilon: float
    length: int = 4
    top: int = 16
    step: int = 4
    g: int = field(init=False)
    _rr: RandomizedResponse = field(init=False, repr=False)
    _p: Fraction = field(init=False, repr=False)
    _q: Fraction = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        for name, lo, hi in (("length", 1, 7), ("top", 1, 4096), ("step", 1, 12)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise PrivacyParameterError(f"{name} must be an int in [{lo}, {hi}], got {v!r}.")
        if 8 * self.length > 60:  # pragma: no cover - length ≤ 7 keeps 56 bits
            raise PrivacyParameterError("strings longer than 7 bytes are not supported.")
        # capped as OLH's: int64 hashing and any g keep the report ε-LDP
        g = min(MAX_G, max(2, round(exp_capped(eps) + 1.0)))
        rr = RandomizedResponse(epsilon=eps, categories=g)
        p = Fraction(rr._p_num, ONE)
        qg = (1 - p) / (g - 1)
        quot, rem = divmod(PRIME, g)
        # (h(x), h(x')) is uniform on pairs for distinct prefixes: same class w.p. Σ c_r²/P²
        coll = Fraction(rem * (quot + 1) ** 2 + (g - rem) * quot**2, PRIME * PRIME)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "g", g)
        object.__setattr__(self, "_rr", rr)
        object.__setattr__(self, "_p", p)
        object.__setattr__(self, "_q", coll * p + (1 - coll) * qg)

    @property
    def bits(self) -> list[int]:
        """Prefix length (bits) reported at each level."""
        total = 8 * self.length
        first = min(total, max(1, math.ceil(math.log2(self.top))))
        out = list(range(first, total, self.step))
        return [*out, total]

    @property
    def tag(self) -> str:
        return (
            f"PEM(length={self.length}, top={self.top}, step={self.step}, g={self.g}, p={self._p})"
        )

    def encode(self, value: str) -> int:
        """The ``8·length``-bit integer of a string (UTF-8, zero-padded).

        A longer string is cut to its first ``length`` bytes (the declared domain), never
        refused: a refusal of a batch would reveal that one user's string is long."""
        raw = value.encode()[: self.length]
        return int.from_bytes(raw.ljust(self.length, b"\0"), "big")

    def decode(self, code: int) -> str:
        """Inverse of :meth:`encode` (trailing zero bytes dropped)."""
        return code.to_bytes(self.length, "big").rstrip(b"\0").decode(errors="replace")

    def randomize(self, values: object, *, rng: RNGLike = None) -> Reports:
        """One report per user (their level drawn uniformly)."""
        if values is None or isinstance(values, str):
            raise DataError("values must be a sequence of strings (one per user).")
        vals = list(values)  # type: ignore[call-overload]
        if not all(isinstance(v, str) for v in vals):
            raise DataError("heavy-hitter values must be strings.")
        codes = np.array([self.encode(v) for v in vals], dtype=np.int64)
        gen = as_generator(rng)
        n, levels = codes.size, len(self.bits)
        level = gen.integers(0, levels, size=n, dtype=np.int64)
        shift = 8 * self.length - np.asarray(self.bits, dtype=np.int64)[level]
        prefix = codes >> shift
        a1 = gen.integers(0, PRIME, size=n, dtype=np.int64)
        a2 = gen.integers(0, PRIME, size=n, dtype=np.int64)
        b = gen.integers(0, PRIME, size=n, dtype=np.int64)
        h = _hash(a1, a2, b, prefix, self.g)
        y = self._rr.randomize(h, rng=gen) if n else np.zeros(0, dtype=np.int64)
        return Reports(self.tag, np.column_stack([level, a1, a2, b, y]).astype(np.int64))

    def _check(self, reports: Reports | object) -> npt.NDArray[np.int64]:
        if isinstance(reports, Reports):
            if reports.protocol != self.tag:
                raise DataError(
                    f"these reports were made by {reports.protocol!r}, not {self.tag!r}."
                )
            raw = np.asarray(reports.values)
        else:
            raw = np.asarray(reports) if reports is not None else np.zeros((0,))
        if raw.ndim != 2 or raw.shape[1] != 5 or raw.dtype.kind not in "iu":
            raise DataError("PEM reports are rows [level, a1, a2, b, y] of ints.")
        if raw.shape[0] == 0:
            raise DataError("no reports to estimate from; collect at least one report.")
        lv, coef, y = raw[:, 0], raw[:, 1:4], raw[:, 4]
        if lv.min() < 0 or lv.max() >= len(self.bits) or coef.min() < 0 or coef.max() >= PRIME:
            raise DataError("PEM reports hold a level or hash coefficient out of range.")
        if y.min() < 0 or y.max() >= self.g:
            raise DataError(f"PEM reports need 0 <= y < g={self.g}.")
        return raw.astype(np.int64)

    def sigma(self, n: int) -> float:
        """Standard deviation of a population count estimate at one level (rare items)."""
        groups = len(self.bits)
        return float(
            groups * math.sqrt(float(pure_variance(n // groups or 1, 0, self._p, self._q)))
        )

    def threshold(self, n: int, beta: float = 0.05) -> float:
        """``z σ_max`` of the error bound (see the class docstring)."""
        if not 0 < beta < 1:
            raise PrivacyParameterError(f"beta must be in (0, 1), got {beta!r}.")
        compared = self.top * 2**self.step * len(self.bits)
        groups = len(self.bits)
        size = n // groups or 1
        # the worst case over the item's own count: every user of the group holding it
        worst = max(
            float(pure_variance(size, 0, self._p, self._q)),
            float(pure_variance(size, size, self._p, self._q)),
        )
        return float(ndtri(1 - beta / (2 * compared))) * groups * math.sqrt(worst)

    def identify(self, reports: Reports | object) -> HeavyHitters:
        """Run the prefix extension over the reports; the ``top`` most frequent items."""
        raw = self._check(reports)
        n = raw.shape[0]
        p, q = float(self._p), float(self._q)
        candidates = np.arange(1 << self.bits[0], dtype=np.int64)
        counts = np.zeros(0)
        std = 0.0
        for i in range(len(self.bits)):
            if i:
                ext = self.bits[i] - self.bits[i - 1]
                candidates = (candidates[:, None] << ext | np.arange(1 << ext)[None, :]).ravel()
            grp = raw[raw[:, 0] == i]
            m = grp.shape[0]
            support = np.zeros(candidates.size, dtype=np.int64)
            for lo in range(0, m, 4096):
                r = grp[lo : lo + 4096]
                h = _hash(r[:, 1:2], r[:, 2:3], r[:, 3:4], candidates[None, :], self.g)
                support += np.count_nonzero(h == r[:, 4:5], axis=0)
            scale = n / m if m else 0.0
            counts = scale * (support - m * q) / (p - q)
            std = scale * math.sqrt(float(pure_variance(max(m, 1), 0, p, q)))
            keep = np.argsort(-counts, kind="stable")[: self.top]
            candidates, counts = candidates[keep], counts[keep]
        items = [self.decode(int(c)) for c in candidates]
        return HeavyHitters(items, np.asarray(counts, dtype=np.float64), float(std))
