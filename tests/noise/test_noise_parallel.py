"""Large draws in keyed chunks on threads: the same values whatever the threads, constant time."""

from __future__ import annotations

import numpy as np
import pytest
from randomgen import AESCounter

from dpkit.noise import discrete_gaussian, discrete_laplace, laplace
from dpkit.noise._discrete import sampler
from dpkit.noise._parallel import CHUNK, PARALLEL_FROM
from dpkit.random import seeded_generator
from tests._timing_rank import ALPHA, time_pvalue

N = PARALLEL_FROM + CHUNK // 3  # several chunks and a short last one


def _serial(kind: str, num: int, den: int, n: int, seed: int) -> np.ndarray:
    """The chunked draw recomputed in one thread, chunk after chunk, from the documented keys."""
    rng = seeded_generator(seed)
    chunks = -(-n // CHUNK)
    words = rng.integers(0, 1 << 64, size=(chunks, 2), dtype=np.uint64)
    sample = sampler(kind, num, den)
    parts = []
    for j, (lo, hi) in enumerate(words.tolist()):
        gen = np.random.Generator(AESCounter(key=int(lo) | int(hi) << 64))
        parts.append(sample(min(CHUNK, n - j * CHUNK), gen))
    return np.concatenate(parts)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_threads_do_not_change_the_values(kind: str) -> None:
    draw = discrete_laplace if kind == "laplace" else discrete_gaussian
    got = draw(7, size=N, rng=11)
    assert np.array_equal(got, _serial(kind, 7, 1, N, 11))
    assert not np.array_equal(got, draw(7, size=N, rng=12))


def test_float_safe_laplace_is_the_grid_sum_of_the_chunked_draw() -> None:
    x = np.linspace(-3.0, 3.0, N)
    got = laplace(x, 1.0, rng=5)
    noise = _serial("laplace", 1 << 40, 1, N, 5)  # scale 1 on the default 2^-40 grid
    assert np.array_equal(got, np.rint(x * 2.0**40) / 2.0**40 + noise * 2.0**-40)


def test_float_safe_laplace_time_does_not_depend_on_a_record() -> None:
    # Neighbours that differ in one value, far beyond the grid's exact range: a path chosen from
    # max|x| (the pre-hardening rounding) would change the time of the whole release.
    x = np.zeros(1 << 18)
    y = x.copy()
    y[-1] = 1e300
    rng = np.random.Generator(AESCounter(key=3))
    p = time_pvalue(lambda: laplace(x, 1.0, rng=rng), lambda: laplace(y, 1.0, rng=rng), 30)
    assert p > ALPHA, p
