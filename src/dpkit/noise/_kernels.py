"""Vectorised exact kernels: Bernoulli(exp(-γ)) and the geometric count behind discrete Laplace.

Every accept/reject decision here compares a uniformly drawn integer with an integer threshold, so
the probabilities are exactly the rational numbers the algorithms of Canonne, Kamath and Steinke
(2020, "The Discrete Gaussian for Differential Privacy", Algorithms 1–3) call for. Work is done on
whole blocks with masks: each pass of a loop draws for every survivor at once, and the survivors
are compacted, so there is no Python loop per sample. Whole exponents (exp(-1)^k, and the
geometric count of exp(-1) that Algorithm 2 needs) are decided by inversion against exact
thresholds in :mod:`dpkit.noise._exp_inverse`, one draw each.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpkit.noise._exp_inverse import bernoulli_exp_whole, geometric_exp1

__all__ = [
    "BLOCK",
    "INT_LIMIT",
    "MIN_BLOCK",
    "below",
    "bernoulli_exp_fraction",
    "bernoulli_exp_parts",
    "bernoulli_exp_rational",
    "geometric_exp1",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

BLOCK = 1 << 16
"""Most attempts per block: enough to amortise NumPy's per-call cost, few enough for the cache."""

MIN_BLOCK = 1 << 10
"""Fewest attempts per block: even a single sample is drawn from a block this large, so the time a
release takes reflects the block, not how many attempts its own sample needed."""

INT_LIMIT = 1 << 62
"""Bounds of uniform integer draws stay below this, so int64 arithmetic never overflows."""


def below(rng: np.random.Generator, high: int | IntArray, size: int) -> IntArray:
    """Uniform integers in [0, high) (high scalar or per element, every high in [1, 2**62])."""
    return rng.integers(0, high, size=size, dtype=np.int64)


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
    # survivors are compacted by index (np.take): half the cost of a boolean-mask selection
    idx = accept.nonzero()[0]
    num = num.take(idx)
    if per_element:
        dens = dens.take(idx)  # type: ignore[union-attr]
    while idx.size:
        k += 1
        accept = _step(rng, num, dens, k)
        out[idx] = ~accept if k & 1 else False
        keep = accept.nonzero()[0]
        idx, num = idx.take(keep), num.take(keep)
        if per_element:
            dens = dens.take(keep)  # type: ignore[union-attr]
    return out


def _step(rng: np.random.Generator, num: IntArray, dens: int | IntArray, k: int) -> BoolArray:
    """Bernoulli(num / (dens · k)), exactly."""
    top = dens if isinstance(dens, int) else int(np.max(dens))
    if top * k >= INT_LIMIT:
        split: BoolArray = (below(rng, k, num.size) == 0) & (below(rng, dens, num.size) < num)
        return split
    direct: BoolArray = below(rng, dens * k, num.size) < num
    return direct


def bernoulli_exp_fraction(
    rng: np.random.Generator, num: IntArray, den: int | IntArray
) -> BoolArray:
    """Exact Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Algorithm 1, γ ∈ [0, 1]).

    The first two steps of the loop, Bernoulli(γ) and Bernoulli(γ/2), are decided for every
    element at once, without compacting the survivors in between: K = 1 (accept) when the first
    fails, K = 2 (reject) when the first succeeds and the second fails, and only the K >= 3 part
    (probability γ²/2, a sixth of the elements on average) goes on looping. When ``2·den²`` is small
    enough the two steps take one draw on [0, 2 den²): K >= 3 when R < num², K = 2 when
    num² <= R < 2·den·num, else K = 1. Otherwise (large ``den``, such as the 2^40 of the float-safe
    grid) they take one draw on [0, den) and one on [0, 2 den), both for every element: two cheap
    draws cost less than a compaction pass.
    """
    n = num.size
    dmax = int(np.max(den)) if n else 0
    if n == 0 or 2 * dmax > INT_LIMIT:
        return _loop_from(rng, num, den, 1)
    # a scalar bound stays a Python int: NumPy's bounded draw broadcasts an array bound slowly
    d: int | IntArray = int(den) if np.ndim(den) == 0 else np.asarray(den, dtype=np.int64)
    if 2 * dmax * dmax < 1 << 56:
        r = below(rng, 2 * d * d, n)
        out: BoolArray = r >= 2 * d * num  # K = 1: accept
        more = (r < num * num).nonzero()[0]  # K >= 3: keep looping
    else:
        out = below(rng, d, n) >= num  # step 1 fails: K = 1, accept
        second = below(rng, 2 * d, n) < num  # step 2 succeeds
        more = (second > out).nonzero()[0]  # step 1 and step 2 succeed: K >= 3, keep looping
    if more.size:
        d_more = d if isinstance(d, int) else d.take(more)
        out[more] = _loop_from(rng, num.take(more), d_more, 3)
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
    """Exact Bernoulli(exp(-(whole + frac/den))) for integers whole >= 0 and 0 <= frac < den.

    exp(-(w + f)) = exp(-w) · exp(-f): the event is the conjunction of two independent events,
    Bernoulli(exp(-frac/den)) (drawn for every element) and, where whole > 0, Bernoulli(exp(-whole))
    (one draw compared with floor(2^62 e^-whole): :mod:`dpkit.noise._exp_inverse`).
    """
    out = bernoulli_exp_fraction(rng, frac, den)
    todo = whole.nonzero()[0]
    if todo.size:
        out[todo] &= bernoulli_exp_whole(rng, whole.take(todo))
    return out
