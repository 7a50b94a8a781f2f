"""Large draws in fixed chunks, each from its own generator keyed by the caller's, on threads.

The exact samplers spend their time in NumPy calls on blocks of a few hundred thousand integers,
which release the GIL, so two or more cores can sample at once. What each core samples must not
depend on how many cores there are, or a seeded release would change with the machine: a draw of
``n`` samples is cut into chunks of :data:`CHUNK` samples (the cut depends on ``n`` only), and
chunk ``j`` draws from its own AES-128 counter-mode generator whose 128-bit key is the ``j``-th
pair of 64-bit words drawn from the caller's generator. The result is a fixed function of the
caller's stream, whatever the number of threads and whatever order the chunks run in.

Soundness: the chunks' keys are outputs of the caller's generator, so with a secure generator
(AES-128 keyed from the operating system) the chunks' streams are as unpredictable as the
caller's own (AES is a pseudorandom permutation; a fresh key drawn from its output gives an
independent-looking stream), and with a seeded one they are reproducible from the seed. Each
chunk's samples are i.i.d. draws of the exact sampler, so their concatenation is too. Nothing here
reads data: the chunking, the keys and the number of threads depend on ``n`` and the machine only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np
from randomgen import AESCounter

__all__ = ["CHUNK", "PARALLEL_FROM", "in_chunks"]

CHUNK = 1 << 17
"""Samples per chunk: one block of the samplers' 2^18 attempts usually fills it, and its
working set stays in the cache."""

PARALLEL_FROM = 1 << 19
"""Draws of fewer samples run on the caller's generator in the caller's thread (as before: small
seeded draws keep their stream); from this size on, chunks are spread over the worker threads."""


@lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    """Worker threads, started on first use and reused; they hold no data and no privacy state."""
    return ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="dpkit-noise")


if hasattr(os, "register_at_fork"):  # a forked child inherits the pool object but not its threads
    os.register_at_fork(after_in_child=_pool.cache_clear)


def in_chunks(
    n: int, rng: np.random.Generator, work: Callable[[int, int, np.random.Generator], None]
) -> None:
    """Call ``work(start, stop, generator)`` on every chunk of ``range(n)``, on the worker threads.

    ``work`` writes its chunk's results into the caller's buffers (disjoint slices, so the
    threads never touch the same memory). The caller's generator draws the chunks' keys and
    nothing else. Exceptions raised by any chunk propagate.
    """
    chunks = -(-n // CHUNK)
    words = rng.integers(0, 1 << 64, size=(chunks, 2), dtype=np.uint64)
    keys = [int(a) | int(b) << 64 for a, b in words.tolist()]
    # One generator per thread, re-keyed for each of its chunks: re-keying restarts the counter
    # and clears the buffered half-word, so it is the stream of a new AESCounter(key=...) (tested),
    # at 1/30 of its cost (the constructor also draws OS entropy for a seed sequence it ignores).
    local = threading.local()

    def run(j: int) -> None:
        start = j * CHUNK
        gen: np.random.Generator | None = getattr(local, "gen", None)
        if gen is None:
            gen = local.gen = np.random.Generator(AESCounter(key=keys[j]))
        else:
            gen.bit_generator.seed(key=keys[j])  # type: ignore[attr-defined]
        work(start, min(start + CHUNK, n), gen)

    for future in [_pool().submit(run, j) for j in range(chunks)]:
        future.result()
