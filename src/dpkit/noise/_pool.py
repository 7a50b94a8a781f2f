"""A secure generator that keeps the exact samplers' spare samples for later single draws.

The exact samplers (Canonne, Kamath and Steinke 2020; :mod:`dpkit.noise._discrete`) work on whole
blocks of at least a thousand attempts, so that the time of a release does not track how many
attempts its own sample needed; a release of one number then keeps one sample and discards the
several hundred others the block produced. A service that answers many queries pays a block per
number. :class:`NoisePool` keeps the surplus instead: the first single draw at a given noise scale
samples a batch of independent exact draws, and the following draws at that scale are taken from
it in order, each **once** (a taken sample is erased from the pool), until it is used up.

Soundness: the batch consists of i.i.d. draws from the exact distribution, made by the same
sampler from the same secure stream; handing them out one per release gives every release its own
independent exact noise, exactly as drawing it on demand would (the values do not depend on
when they are used, nor on any data). What changes is *time*: a draw that refills the pool takes a
block's time, the others almost none; which draws refill depends only on the sequence of scales
requested (public) and on how many samples each batch's attempts accepted, which given that count
says nothing about the accepted values (rejection sampling from i.i.d. attempts). Spare noise is
held in memory until used, like the generator's key; a ``fork()`` child starts with an empty pool
(and a fresh key), so parent and child never release the same noise.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from dpkit.errors import PrivacyParameterError
from dpkit.random import SecureGenerator

__all__ = ["NoisePool"]

IntArray = npt.NDArray[np.int64]

_POOLS: weakref.WeakSet[NoisePool] = weakref.WeakSet()


class NoisePool(SecureGenerator):
    """A :class:`~dpkit.random.SecureGenerator` whose single exact draws are served from batches.

    Pass it as ``rng=`` wherever dpkit accepts a generator: ``discrete_laplace(scale, rng=pool)``
    and ``discrete_gaussian(sigma, rng=pool)`` without ``size`` take their sample from the pool
    of that scale (see the module docstring for why this is sound); everything else draws from
    the generator as usual. Threads may share it, as they may share a NumPy generator: each
    sample is handed out under a lock, so two threads never take the same one (one pool per
    thread still avoids waiting on that lock).

    Parameters
    ----------
    bit_generator : numpy.random.BitGenerator, optional
        ``None`` (default): AES-128 counter mode keyed from the operating system (secure). A bit
        generator given here makes a reproducible, **non-secure** pool (for tests).
    batch : int
        Samples drawn per refill (about what one block of the exact samplers yields).
    scales : int
        At most this many noise scales keep a pool (least recently used ones are dropped).

    Examples
    --------
    >>> from dpkit.noise import NoisePool, discrete_laplace
    >>> from dpkit.random import is_secure
    >>> pool = NoisePool()
    >>> is_secure(pool), isinstance(discrete_laplace(3, rng=pool), int)
    (True, True)
    """

    def __init__(
        self,
        bit_generator: np.random.BitGenerator | None = None,
        *,
        batch: int = 512,
        scales: int = 64,
    ) -> None:
        for name, value in (("batch", batch), ("scales", scales)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PrivacyParameterError(f"{name} must be a positive int.")
        super().__init__(bit_generator)
        self._lock = threading.Lock()
        self._batch = batch
        self._scales = scales
        self._stash: OrderedDict[tuple[str, int, int], tuple[IntArray, list[int]]] = OrderedDict()
        _POOLS.add(self)

    def take(self, key: tuple[str, int, int], sample: Callable[[int], IntArray]) -> int:
        """The next unused sample for ``key``; ``sample(n)`` draws ``n`` new ones when empty."""
        # Without the lock, two threads sharing a pool can read the same position before either
        # advances it (one sample released twice) or read a slot already erased (no noise).
        with self._lock:
            return self._take(key, sample)

    def _take(self, key: tuple[str, int, int], sample: Callable[[int], IntArray]) -> int:
        entry = self._stash.get(key)
        if entry is None or entry[1][0] >= entry[0].size:
            entry = (sample(self._batch), [0])
            self._stash[key] = entry
            while len(self._stash) > self._scales:
                self._stash.popitem(last=False)
        self._stash.move_to_end(key)
        values, position = entry
        i = position[0]
        out = int(values[i])
        values[i] = 0  # used noise is not kept
        position[0] = i + 1
        return out

    def clear(self) -> None:
        """Drop every spare sample."""
        with self._lock:
            self._stash.clear()


def _clear_after_fork() -> None:
    # The child must not release noise its parent may release too.
    for pool in list(_POOLS):
        # A lock held by another thread of the parent at fork() is never released in the child.
        pool._lock = threading.Lock()
        pool.clear()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_clear_after_fork)
