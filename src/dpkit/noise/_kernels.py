"""Vectorised exact kernels: Bernoulli(exp(-γ)) and the geometric count behind discrete Laplace.

Every accept/reject decision here compares a uniformly drawn integer with an integer threshold, so
the probabilities are exactly the rational numbers the algorithms of Canonne, Kamath and Steinke
(2020, "The Discrete Gaussian for Differential Privacy", Algorithms 1–3) call for. Work is done on
whole blocks with masks: each pass of a loop draws for every survivor at once, and the survivors
are compacted, so there is no Python loop per sample.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = [
    "BLOCK",
    "INT_LIMIT",
    "MIN_BLOCK",
    "bernoulli_exp1",
    "bernoulli_exp_fraction",
    "bernoulli_exp_parts",
    "bernoulli_exp_rational",
    "geometric_exp1",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

BLOCK = 1 << 18
"""Most attempts per block: enough to amortise NumPy's per-call cost, few enough for the cache."""

MIN_BLOCK = 1 << 10
"""Fewest attempts per block: even a single sample is drawn from a block this large, so the time a
release takes reflects the block, not how many attempts its own sample needed."""

INT_LIMIT = 1 << 62
"""Bounds of uniform integer draws stay below this, so int64 arithmetic never overflows."""

# Bernoulli(exp(-1)) in one draw. In Algorithm 1 of CKS with γ = 1 the loop counter K satisfies
# P(K > k) = 1/k!. With R uniform on [0, 16!), setting K > k  <=>  R < 16!/k!  reproduces those
# probabilities exactly for k <= 16, and R = 0 (probability 1/16!) means K > 16: those few draws
# continue the loop one step at a time from K = 17.
_F16 = math.factorial(16)
_THRESHOLDS = np.array([_F16 // math.factorial(k) for k in range(16, 0, -1)], dtype=np.int64)
# Fast path: the parity of K is constant on most ranges of R of width 2**29; a table gives it for
# those (value 0 or 1) and marks the few ranges holding a threshold (value 2), which go through
# the exact search. The table only speeds things up: every R gets the same answer either way.
_SHIFT = 29


def _below(rng: np.random.Generator, high: int | IntArray, size: int) -> IntArray:
    """Uniform integers in [0, high) (high scalar or per element, every high in [1, 2**62])."""
    return rng.integers(0, high, size=size, dtype=np.int64)


def _parity_table() -> npt.NDArray[np.int8]:
    buckets = (_F16 >> _SHIFT) + 1
    lo = np.arange(buckets, dtype=np.int64) << _SHIFT
    hi = np.minimum(lo + (1 << _SHIFT) - 1, _F16 - 1)
    k_lo = _THRESHOLDS.size - np.searchsorted(_THRESHOLDS, lo, side="right")
    k_hi = _THRESHOLDS.size - np.searchsorted(_THRESHOLDS, hi, side="right")
    table = np.where(k_lo == k_hi, (k_lo + 1) & 1, 2).astype(np.int8)
    table[0] = 2  # holds R = 0, the K > 16 tail
    return table


_PARITY = _parity_table()


def _exp1_exact(rng: np.random.Generator, r: IntArray) -> BoolArray:
    k = 1 + (_THRESHOLDS.size - np.searchsorted(_THRESHOLDS, r, side="right"))
    out = (k & 1).astype(bool)
    tail = np.flatnonzero(r == 0)
    if tail.size:
        out[tail] = _loop_from(rng, np.ones(tail.size, np.int64), 1, 17)
    return out


def bernoulli_exp1(rng: np.random.Generator, size: int) -> BoolArray:
    """Exact Bernoulli(exp(-1)) samples."""
    r = _below(rng, _F16, size)
    parity = _PARITY[r >> _SHIFT]
    out: BoolArray = parity == 1
    odd = np.flatnonzero(parity == 2)
    if odd.size:
        out[odd] = _exp1_exact(rng, r[odd])
    return out


def _loop_from(rng: np.random.Generator, num: IntArray, den: int | IntArray, k0: int) -> BoolArray:
    """Continue CKS Algorithm 1 for γ = num/den ∈ [0, 1] from counter K = k0.

    Returns the Bernoulli outcome (K odd when the loop stops). When ``den * K`` would reach
    :data:`INT_LIMIT` the draw of Bernoulli(num / (den K)) is split into a draw on [0, K) and one on
    [0, den), which is the same event.
    """
    per_element = np.ndim(den) > 0
    dens: int | IntArray = np.asarray(den, dtype=np.int64) if per_element else int(den)
    k = k0
    accept = _step(rng, num, dens, k)
    # K odd when the loop stops: stopping now (accept False) gives k's parity
    out = ~accept if k & 1 else np.zeros(num.size, dtype=bool)
    idx = np.flatnonzero(accept)
    num = num[idx]
    if per_element:
        dens = dens[idx]  # type: ignore[index]
    while idx.size:
        k += 1
        accept = _step(rng, num, dens, k)
        out[idx] = ~accept if k & 1 else False
        idx, num = idx[accept], num[accept]
        if per_element:
            dens = dens[accept]  # type: ignore[index]
    return out


def _step(rng: np.random.Generator, num: IntArray, dens: int | IntArray, k: int) -> BoolArray:
    """Bernoulli(num / (dens · k)), exactly."""
    if int(np.max(dens)) * k >= INT_LIMIT:
        split: BoolArray = (_below(rng, k, num.size) == 0) & (_below(rng, dens, num.size) < num)
        return split
    direct: BoolArray = _below(rng, dens * k, num.size) < num
    return direct


def bernoulli_exp_fraction(
    rng: np.random.Generator, num: IntArray, den: int | IntArray
) -> BoolArray:
    """Exact Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Algorithm 1, γ ∈ [0, 1]).

    The first two steps of the loop are fused into one draw on [0, 2 den²) when that bound is
    small enough: K >= 3 when R < num², K = 2 when num² <= R < 2·den·num, else K = 1.
    """
    n = num.size
    dmax = int(np.max(den)) if n else 0
    if n == 0 or 2 * dmax * dmax >= 1 << 56:
        return _loop_from(rng, num, den, 1)
    den_arr = np.asarray(den, dtype=np.int64)
    r = _below(rng, 2 * den_arr * den_arr, n)
    out: BoolArray = r >= 2 * den_arr * num  # K = 1: accept
    more = np.flatnonzero(r < num * num)  # K >= 3: keep looping
    if more.size:
        den_more = den_arr if den_arr.ndim == 0 else den_arr[more]
        out[more] = _loop_from(rng, num[more], den_more, 3)
    return out


def bernoulli_exp_rational(rng: np.random.Generator, num: IntArray, den: int) -> BoolArray:
    """Exact Bernoulli(exp(-num/den)) for any num >= 0 (CKS Algorithm 1, γ > 1 branch).

    exp(-γ) = exp(-1)^floor(γ) · exp(-(γ - floor γ)): all floor(γ) Bernoulli(exp(-1)) trials must
    succeed, then one Bernoulli(exp(-frac)) decides.
    """
    whole, frac = np.divmod(num, den)
    return bernoulli_exp_parts(rng, whole, frac, den)


def bernoulli_exp_parts(
    rng: np.random.Generator, whole: IntArray, frac: IntArray, den: int
) -> BoolArray:
    """Exact Bernoulli(exp(-(whole + frac/den))) for integers whole >= 0 and 0 <= frac < den."""
    alive = np.ones(whole.size, dtype=bool)
    todo = np.flatnonzero(whole > 0)
    remaining = whole[todo]
    while todo.size:
        ok = bernoulli_exp1(rng, todo.size)
        alive[todo[~ok]] = False
        remaining = remaining - 1
        keep = ok & (remaining > 0)
        todo, remaining = todo[keep], remaining[keep]
    live = np.flatnonzero(alive)
    alive[live] = bernoulli_exp_fraction(rng, frac[live], den)
    return alive


def geometric_exp1(rng: np.random.Generator, size: int) -> IntArray:
    """Number of successes of Bernoulli(exp(-1)) before the first failure: P(V >= v) = exp(-v)."""
    first = bernoulli_exp1(rng, size)
    v = first.astype(np.int64)
    idx = np.flatnonzero(first)
    while idx.size:
        idx = idx[bernoulli_exp1(rng, idx.size)]
        v[idx] += 1
    return v
