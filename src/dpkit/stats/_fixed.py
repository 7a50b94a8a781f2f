"""Exact fixed-point sums: clamp, scale to a data-independent grid, round, add as integers.

A float sum of clamped values is not what the privacy analysis assumes: its rounding errors
depend on the order and the magnitudes of the other records, so one added record can move it by
more than the claimed sensitivity (Casacuberta, Shoemate, Vadhan and Wagaman 2022, "Widespread
underestimation of sensitivity in differentially private libraries"). dpkit maps each record to
an integer ``t = rint(f(clip(x)) · 2**k)`` by a fixed per-record function, with
``|t| ≤ 2**34 + 1``, and adds the integers exactly:

* a block of ``2**18`` such integers has ``|partial sum| < 2**53``, so NumPy's float64 sum of the
  block is exact whatever the order of additions (every partial sum is an integer below 2**53);
* block sums are added as Python integers, which cannot overflow.

The sum is therefore order-independent, and one record moves it by at most
``max(|t_lo|, |t_hi|)`` (add/remove) or ``t_hi − t_lo`` (replace), where ``t_lo``, ``t_hi`` are
the images of the bounds: every step of ``f`` is monotone, so clamped records map into
``[t_lo, t_hi]``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np

from dpkit.errors import DataError
from dpkit.stats._data import FloatArray

__all__ = ["BLOCK", "VALUE_BITS", "exact_int_sum", "fixed_sum", "power_exponent"]

VALUE_BITS = 34
"""Per-record fixed-point integers satisfy ``|t| ≤ 2**34 + 1``."""

BLOCK = 1 << 18
"""Records per block: ``2**18 · (2**34 + 1) < 2**53``, so a block's float64 sum of integers is exact
(and a block of 2 MiB is large enough that per-block overhead is small, small enough for cache)."""

_THREADS_FROM = 1 << 21  # two threads (NumPy releases the GIL) pay off above ~2M records


def power_exponent(bounds: tuple[float, float]) -> int:
    """The k with ``max(|L|, |U|) · 2**k ≤ 2**34``, as large as possible (a power of two, exact)."""
    top = max(abs(bounds[0]), abs(bounds[1]))
    return VALUE_BITS - math.frexp(top)[1]


def _clamp_two_passes(out: FloatArray, lo: float, hi: float) -> None:
    np.maximum(out, lo, out=out)
    np.minimum(out, hi, out=out)


def _clamp_one_pass(out: FloatArray, lo: float, hi: float) -> None:
    np.clip(out, lo, hi, out=out)


# In place on the block buffer, with whichever is faster: NumPy 2's clip is one vectorised pass,
# NumPy 1's is several times slower than a maximum and a minimum. The choice depends on the
# installed NumPy only, never on the data.
_clamp = _clamp_one_pass if int(np.__version__.split(".")[0]) >= 2 else _clamp_two_passes


def _not_finite(name: str) -> DataError:
    return DataError(
        f"{name} contains NaN or infinite values; remove or impute them before releasing."
    )


def _run_blocks(n: int, work: Callable[[int, int, FloatArray], int]) -> int:
    """Apply ``work(start, stop, buffer)`` to every block and add the integer results."""
    starts = range(0, n, BLOCK)

    def chunk(part: range) -> int:
        buf = np.empty(BLOCK)
        with np.errstate(over="ignore"):  # per thread: overflowed outliers are clamped
            return sum(work(s, min(s + BLOCK, n), buf) for s in part)

    if n < _THREADS_FROM:
        return chunk(starts)
    half = len(starts) // 2
    other = _helper().submit(chunk, starts[half:])  # NumPy releases the GIL: two cores at once
    mine = chunk(starts[:half])
    return mine + other.result()


@lru_cache(maxsize=1)
def _helper() -> ThreadPoolExecutor:
    """One worker thread, started on first use and reused (starting threads per call cost ~2 ms).

    It holds no data and no privacy state between calls: only an idle thread.
    """
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpkit-sum")


if hasattr(os, "register_at_fork"):  # a forked child inherits the pool but not its thread
    os.register_at_fork(after_in_child=_helper.cache_clear)


def fixed_sum(x: FloatArray, bounds: tuple[float, float], k: int, name: str = "x") -> int:
    """``Σ rint(clip(x, L, U) · 2**k)`` exactly, refusing NaN and infinities.

    ``k`` must satisfy ``max(|L|, |U|) · 2**k ≤ 2**34`` (see :func:`power_exponent`). Scaling by a
    power of two is exact, so the only rounding is the per-record ``rint``.
    """
    lo, hi = bounds
    scale = math.ldexp(1.0, k)
    # Clamping in scaled units is the same map: scaling by a power of two is exact and monotone
    # (and the images of the bounds are exact), so clip(x)·2**k == clip(x·2**k, L·2**k, U·2**k).
    lo_s, hi_s = math.ldexp(lo, k), math.ldexp(hi, k)

    def work(start: int, stop: int, buf: FloatArray) -> int:
        block = x[start:stop]
        out = buf[: stop - start]
        # Every block is clamped, whatever its values: a clamp skipped when all values are in
        # bounds would make the running time reveal whether an outlier is present (a timing
        # channel; Jin et al. 2022). The extremes serve only to refuse NaN and infinities (a
        # refusal the caller sees anyway); min and max take the same time whatever the values.
        bmin, bmax = float(block.min()), float(block.max())
        if not (math.isfinite(bmin) and math.isfinite(bmax)):
            raise _not_finite(name)
        np.multiply(block, scale, out=out)  # a huge outlier may overflow to ±inf: clamped next
        _clamp(out, lo_s, hi_s)
        np.rint(out, out=out)
        return int(out.sum())

    return _run_blocks(x.size, work)


def exact_int_sum(t: FloatArray) -> int:
    """Exact sum of float64 integers with ``|t| ≤ 2**34 + 1`` (each block's float sum is exact)."""
    n = t.size
    return sum(int(t[s : s + BLOCK].sum()) for s in range(0, n, BLOCK))


def check_finite(x: FloatArray, name: str = "x") -> None:
    """Refuse NaN and infinities (one pass)."""
    if not np.all(np.isfinite(x)):
        raise _not_finite(name)
