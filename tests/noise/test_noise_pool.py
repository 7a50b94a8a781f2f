"""NoisePool shared between threads: every sample is handed out once, never an erased slot."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.noise import NoisePool, discrete_laplace


def test_threads_sharing_a_pool_never_take_the_same_sample() -> None:
    # Every sample of this batch is distinct and non-zero, so a sample taken twice shows as a
    # duplicate and an erased slot handed out shows as 0 (a release with no noise at all).
    # Without the pool's lock, a 1 µs switch interval gave tens of thousands of both here.
    pool = NoisePool(batch=1 << 17)
    key = ("laplace", 1, 1)

    def unique(n: int) -> np.ndarray:
        return np.arange(1, n + 1, dtype=np.int64)

    out: list[list[int]] = [[], []]

    def work(j: int) -> None:
        for _ in range(30_000):
            out[j].append(pool.take(key, unique))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(j,)) for j in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    taken = out[0] + out[1]
    assert 0 not in taken
    assert sorted(taken) == list(range(1, len(taken) + 1))  # each slot once, none skipped


@pytest.mark.parametrize("kw", [{"batch": 0}, {"scales": 0}, {"batch": True}, {"batch": 2.0}])
def test_a_pool_refuses_sizes_that_cannot_hold_a_sample(kw: dict[str, object]) -> None:
    # Before: batch=0 reached an IndexError and scales=0 a KeyError at the first draw.
    with pytest.raises(PrivacyParameterError):
        NoisePool(**kw)  # type: ignore[arg-type]


def test_a_pool_still_draws_after_validation() -> None:
    pool = NoisePool(batch=1, scales=1)
    assert isinstance(discrete_laplace(2, rng=pool), int)
    assert isinstance(discrete_laplace(3, rng=pool), int)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_child_forked_while_another_thread_holds_the_pool_can_draw() -> None:
    # The pool's lock, held by a thread that does not exist in the child, is replaced there
    # (with the spare samples dropped and the generator re-keyed); the child would hang otherwise.
    pool = NoisePool(batch=4)
    discrete_laplace(1000, rng=pool)
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with pool._lock:
            held.set()
            done.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(10)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(w, b"%d" % discrete_laplace(1000, rng=pool))
        os._exit(0)
    os.close(w)
    try:
        deadline = time.monotonic() + 20
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung on the pool's lock")
            time.sleep(0.01)
        assert os.read(r, 64).lstrip(b"-").isdigit()
    finally:
        os.close(r)
        done.set()
        t.join()
