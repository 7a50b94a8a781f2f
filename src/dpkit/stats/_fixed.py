"""Exact fixed-point sums: clamp, scale to a data-independent grid, round, add as integers.

A float sum of clamped values is not what the privacy analysis assumes: its rounding errors
depend on the order and the magnitudes of the other records, so one added record can move it by
more than the claimed sensitivity (Casacuberta, Shoemate, Vadhan and Wagaman 2022, "Widespread
underestimation of sensitivity in differentially private libraries"). dpkit maps each record to
an integer ``t = rint(f(clip(x)) · 2**k)`` by a fixed per-record function, with
``|t| ≤ 2**34 + 1``, and adds the integers exactly:

* per block, :func:`fixed_sum` clamps, rounds with one addition of a constant and adds the bit
  patterns as unsigned 64-bit integers, modulo ``2**64``; the block's sum of integers is below
  ``2**63`` in magnitude, so it is recovered exactly (the proof is in its docstring). A small C
  extension (``_fixedsum.c``) does a block's work in one pass over the records; where it could not
  be built, NumPy does the same operations in four passes, with the same result;
* :func:`exact_int_sum` (records already rounded) adds blocks of ``2**18`` integers in float64:
  every partial sum is an integer below ``2**53``, so the sum is exact in any order;
* block sums are added as Python integers, which cannot overflow.

The sum is therefore order-independent, and one record moves it by at most
``max(|t_lo|, |t_hi|)`` (add/remove) or ``t_hi − t_lo`` (replace), where ``t_lo``, ``t_hi`` are
the images of the bounds: every step of ``f`` is monotone, so clamped records map into
``[t_lo, t_hi]``.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Protocol

import numpy as np

from dpkit._missing import missing_error
from dpkit.errors import DataError
from dpkit.stats._data import FloatArray


class _Kernel(Protocol):
    def block_sum(
        self, x: object, start: int, stop: int, lo: float, hi: float, magic: float, base: int, /
    ) -> tuple[int, bool]: ...


# `kernel`: the compiled one-pass block sum (_fixedsum.c), or None for the NumPy path (the same
# integers, in four passes). Read on every call of fixed_sum, so that setting it to None forces
# the NumPy path: the tests run both. It is absent where the install found no C compiler.
try:
    from dpkit.stats import _fixedsum as _compiled

    kernel: _Kernel | None = _compiled
except ImportError:  # pragma: no cover - an install that could not build it
    kernel = None

__all__ = ["BLOCK", "K_RANGE", "VALUE_BITS", "exact_int_sum", "fixed_sum", "power_exponent"]

VALUE_BITS = 34
"""Per-record fixed-point integers satisfy ``|t| ≤ 2**34 + 1``."""

BLOCK = 1 << 18
"""Records per block: ``2**18 · (2**34 + 1) < 2**53``, so a block's float64 sum of integers is exact
(:func:`exact_int_sum`). :func:`fixed_sum`'s modular sums would allow far larger blocks; 2 MiB
measured fastest (per-call overhead against cache traffic; 2**15 to 2**17 took 3–17% longer)."""

_THREADS_FROM = 1 << 21  # several threads (NumPy releases the GIL) pay off above ~2M records
_MAX_THREADS = 4  # the sum reads memory at a few GB/s per thread: past 4, bandwidth binds


def _threads() -> int:
    """Threads for a large sum: the CPUs this process may run on, at most :data:`_MAX_THREADS`.

    The total is a sum of exact integers, the same for any number of threads.
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # platforms without CPU affinity (macOS, Windows)
        usable = os.cpu_count() or 1
    return max(1, min(usable, _MAX_THREADS))


def power_exponent(bounds: tuple[float, float]) -> int:
    """The k with ``max(|L|, |U|) · 2**k ≤ 2**34``, as large as possible (a power of two, exact)."""
    top = max(abs(bounds[0]), abs(bounds[1]))
    return VALUE_BITS - math.frexp(top)[1]


K_RANGE = (-917, 1074)
"""The exponents :func:`fixed_sum` accepts: those for which ``C = 1.5 · 2**(52 − k)`` is a normal
double below ``2**970`` (half a unit in the last place of the largest double, so that ``x + C`` of
a finite ``x`` is finite). Every pair of bounds with ``2**-1040 < max(|L|, |U|) < 2**951`` maps
into it, well beyond the ``(2**-500, 2**500)`` the statistics accept."""


def _clamp_two_passes(x: FloatArray, lo: float, hi: float, out: FloatArray) -> None:
    np.maximum(x, lo, out=out)
    np.minimum(out, hi, out=out)


def _clamp_one_pass(x: FloatArray, lo: float, hi: float, out: FloatArray) -> None:
    np.clip(x, lo, hi, out=out)


# Whichever is faster: NumPy 2's clip is one vectorised pass, NumPy 1's is several times slower
# than a maximum and a minimum. The choice depends on the installed NumPy only, never on the data.
_clamp = _clamp_one_pass if int(np.__version__.split(".")[0]) >= 2 else _clamp_two_passes

_WORD = 1 << 64


def _not_finite(name: str) -> DataError:
    return missing_error(name)


Work = Callable[[int, int, FloatArray], int]


def _run_blocks(n: int, work: Work) -> int:
    """Apply ``work(start, stop, values)`` to every block and add the integer results.

    ``values`` (float64) is a buffer owned by the calling thread, of at least ``stop − start``
    entries.
    """
    size = min(n, BLOCK)  # no larger than needed (small sums)
    threads = _threads() if n >= _THREADS_FROM else 1
    if threads == 1:
        return _blocks(iter(range(0, n, BLOCK)), n, size, work)
    # Every thread takes the next block from one shared queue, so a core slowed by other load
    # does fewer blocks instead of keeping the others waiting; the total is a sum of exact
    # integers, the same whichever thread adds which block.
    queue = _Blocks(n)
    pool = _helper()
    others = [pool.submit(_share, queue, size, work) for _ in range(threads - 1)]
    values = np.empty(size)
    try:
        with np.errstate(invalid="ignore"):  # per thread: see _blocks
            _share_into(queue, values, work)  # NumPy releases the GIL in every pass
            # Every block is handed out. One still running on a helper (which other load may
            # have descheduled in the middle of it) is done again here rather than waited for:
            # the same integer either way, and the small last blocks make doing it again cheap.
            # A NaN in a block a helper took is refused here too (its own refusal is dropped).
            for span in queue.taken():
                if span not in queue.results:
                    queue.results.setdefault(span, work(span[0], span[1], values))
    finally:
        queue.close()  # after a refusal, the helpers stop at their current block
        for other in others:
            other.cancel()  # a helper not yet started (a loaded machine) need not start
    return sum(queue.results[span] for span in queue.taken())


class _Blocks:
    """The blocks ``(start, stop)`` of ``n`` records, handed out once each to whichever thread
    asks (under a lock), and the integer of each block once some thread has computed it.

    Blocks of :data:`BLOCK` records, except the last ``4 · BLOCK`` records, cut into blocks of
    ``BLOCK / 4``: the blocks in flight when the queue runs out are then small, so that doing one
    again costs little (:func:`_run_blocks`).
    """

    def __init__(self, n: int) -> None:
        tail = max(0, n - 4 * BLOCK)
        piece = max(1, BLOCK >> 2)
        head = ((s, min(s + BLOCK, tail)) for s in range(0, tail, BLOCK))
        last = ((s, min(s + piece, n)) for s in range(tail, n, piece))
        self._spans: Iterator[tuple[int, int]] = itertools.chain(head, last)
        self._taken: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self.results: dict[tuple[int, int], int] = {}  # setdefault: atomic under the GIL

    def take(self) -> tuple[int, int] | None:
        with self._lock:
            span = next(self._spans, None)
            if span is not None:
                self._taken.append(span)
            return span

    def close(self) -> None:
        with self._lock:
            self._spans = iter(())

    def taken(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._taken)


def _share(queue: _Blocks, size: int, work: Work) -> None:
    """A helper thread's part: blocks from the queue until it is empty."""
    values = np.empty(size)
    with np.errstate(invalid="ignore"):  # per thread: see _blocks
        _share_into(queue, values, work)


def _share_into(queue: _Blocks, values: FloatArray, work: Work) -> None:
    while (span := queue.take()) is not None:
        queue.results.setdefault(span, work(span[0], span[1], values))


def _blocks(starts: Iterator[int], n: int, size: int, work: Work) -> int:
    values = np.empty(size)
    # Per thread (NumPy's error state is not inherited): a signalling NaN raises the invalid
    # flag in the addition, a RuntimeWarning (an exception under warnings-as-errors) instead of
    # the DataError that the finiteness check gives every NaN.
    with np.errstate(invalid="ignore"):
        return sum(work(s, min(s + BLOCK, n), values) for s in starts)


@lru_cache(maxsize=1)
def _helper() -> ThreadPoolExecutor:
    """Worker threads, started on first use and reused (starting threads per call cost ~2 ms).

    They hold no data and no privacy state between calls: only idle threads.
    """
    return ThreadPoolExecutor(max_workers=_MAX_THREADS - 1, thread_name_prefix="dpkit-sum")


if hasattr(os, "register_at_fork"):  # a forked child inherits the pool but not its threads
    os.register_at_fork(after_in_child=_helper.cache_clear)


def fixed_sum(x: FloatArray, bounds: tuple[float, float], k: int, name: str = "x") -> int:
    """``Σ rint(clip(x, L, U) · 2**k)`` exactly (``rint``: to nearest, ties to even), refusing
    NaN (a missing value: see :mod:`dpkit._missing`; ``missing="drop"`` removes them first).

    ``k`` must satisfy ``max(|L|, |U|) · 2**k ≤ 2**34`` (see :func:`power_exponent`) and lie in
    :data:`K_RANGE`. With ``C = 1.5 · 2**(52 − k)``, per block and whatever the values:

    1. ``v = clip(x, L, U)``: a record below ``L`` (above ``U``), ``±inf`` included, becomes the
       bound; a NaN stays NaN (``clip``, ``maximum`` and ``minimum`` propagate it);
    2. ``z = v + C``: one addition scales and rounds. ``C`` is a normal double whose binade
       ``[2**(52−k), 2**(53−k))`` has spacing exactly ``2**-k``. For ``v`` in ``[L, U]``,
       ``|v · 2**k| ≤ 2**34 < 2**51`` keeps the exact sum inside that binade, so IEEE
       round-to-nearest-even gives ``z = C + t · 2**-k`` with ``t`` the integer nearest
       ``v · 2**k``, ties to the even one (``C · 2**k = 3 · 2**51`` is even, so ``z`` is an even
       multiple of ``2**-k`` exactly when ``t`` is even): ``t = rint(v · 2**k)``, with no product
       ever formed, and ``C + L``, ``C + U`` are finite (``C < 2**970``, see :data:`K_RANGE`).
       Rounding is monotone, so clamping first gives the same ``z`` as rounding first and
       clamping to the rounded bounds ``Z_L = L + C``, ``Z_U = U + C``: every record lands in
       ``[Z_L, Z_U]``, and ``z`` is NaN exactly when ``x`` is;
    3. a NaN is refused (a missing value has no place in the bounds): every other record's
       ``z`` is at most ``Z_U``, and the maximum of a block is NaN when the block holds a NaN
       (NumPy's ``max`` propagates it), so ``max(z) ≤ Z_U`` fails exactly when the block holds
       a NaN;
    4. inside one binade the bit pattern of a double grows by one per spacing step, so the bits
       of ``z`` read as an unsigned 64-bit integer are ``bits(C) + t``. Their sum over a block
       of ``m`` records, modulo ``2**64`` (unsigned NumPy sums wrap, which is defined), is
       ``m · bits(C) + Σ t (mod 2**64)``; as ``|Σ t| ≤ m (2**34 + 1) < 2**63``, ``Σ t`` is the
       residue of ``sum − m · bits(C)`` taken in ``[−2**63, 2**63)``: exact, whatever the order
       of the additions.

    The compiled kernel (``kernel``, from ``_fixedsum.c``) does steps 1–4 in one pass over
    each block of a contiguous float64 array, with the same float operations in the same order
    (the clamp keeps a NaN, as NumPy's does), the same modular sum of bit patterns and the same
    residue, so it returns the same integer; its NaN test reads the exponent field of each ``z``
    (all ones exactly when ``z`` is NaN, as ``z`` is otherwise finite), accumulated with integer
    operations: no branch on a value. It releases the GIL, so threads share the blocks as below.

    Otherwise (no compiler at install, or a strided or unaligned view): four NumPy passes per
    block (five on NumPy 1, whose clamp is a maximum and a minimum), in this order because
    the first one reads the records from memory and a clamp's comparisons hide behind that wait
    better than an addition's; the others run on the block in the cache.
    The clamp runs whatever the values (a clamp skipped when every value is in bounds made the
    running time reveal whether an outlier is present; Jin et al. 2022), and so does every other
    pass; a NaN is refused after its block (a refusal the caller sees anyway).
    """
    if not K_RANGE[0] <= k <= K_RANGE[1]:
        raise ValueError(f"fixed_sum needs k in {K_RANGE}, got {k}.")
    lo, hi = bounds
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):  # callers validate; a guard
        raise ValueError("fixed_sum needs finite bounds with lower <= upper.")
    # Records of another dtype (float32, integers, a byte-swapped float64) are widened to native
    # float64 first: NumPy would clamp a float32 block in float32, with the bounds rounded to
    # float32 (0.1 rounds up), so a record above a bound could land past it. A float64 array is
    # not copied; the callers' arrays (as_vector) always are float64. Flattened so that both
    # paths read every record (the kernel reads a contiguous buffer whole; NumPy slices axis 0).
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    magic = math.ldexp(1.5, 52 - k)
    base = int(np.array(magic).view(np.uint64))
    # After the clamp and the addition every record's z lies in [lo + C, hi + C] (rounded as the
    # records are), and a NaN stays NaN. One max over the block finds any NaN (it propagates, and
    # NaN <= top is false): a read-only pass, cheaper than writing a flag per record and reading
    # the flags back, and about a tenth faster on doubles than on their unsigned bit patterns.
    top = hi + magic
    # The kernel reads the records in place; it needs them contiguous and aligned (properties of
    # the array's layout, never of its values). It computes each block's integer exactly as
    # `work` below does.
    compiled = kernel
    if compiled is not None and x.flags.c_contiguous and x.flags.aligned:
        block_sum = compiled.block_sum

        def one_pass(start: int, stop: int, values: FloatArray) -> int:
            total, nan = block_sum(x, start, stop, lo, hi, magic, base)
            if nan:
                raise _not_finite(name)
            return int(total)

        return _run_blocks(x.size, one_pass)

    def work(start: int, stop: int, values: FloatArray) -> int:
        m = stop - start
        z = values[:m]
        _clamp(x[start:stop], lo, hi, z)  # NaN stays NaN; ±inf becomes a bound like 1e308
        np.add(z, magic, out=z)
        total = int(z.view(np.uint64).sum())
        if not float(z.max()) <= top:
            raise _not_finite(name)
        residue = (total - m * base) % _WORD
        return residue - _WORD if residue >= _WORD >> 1 else residue

    return _run_blocks(x.size, work)


def exact_int_sum(t: FloatArray) -> int:
    """Exact sum of float64 integers with ``|t| ≤ 2**34 + 1`` (each block's float sum is exact)."""
    n = t.size
    return sum(int(t[s : s + BLOCK].sum()) for s in range(0, n, BLOCK))


def check_finite(x: FloatArray, name: str = "x") -> None:
    """Refuse NaN (one pass); ``±inf`` is left to the clamp, like any value beyond a bound."""
    if np.isnan(x).any():
        raise _not_finite(name)
