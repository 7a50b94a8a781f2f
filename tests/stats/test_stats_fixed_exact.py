"""The fixed-point sum against exact rational arithmetic on generated adversarial inputs.

Whatever the bounds (from subnormal to near 2^951) and the records (signed zeros, subnormals,
ties halfway between two grid steps, values at and next to the bounds, ±inf, the largest
doubles), ``fixed_sum`` must equal ``Σ round(Fraction(clip(x)) · 2^k)`` (half to even) exactly,
with either clamp, in blocks of any size and on any number of threads, on the compiled one-pass
kernel and on the NumPy path; and a NaN of any sign and payload is refused wherever it lies.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dpkit.stats._fixed as fx
from dpkit.errors import DataError
from dpkit.stats._fixed import K_RANGE, fixed_sum, power_exponent

HUGE = float(np.finfo(np.float64).max)
CLAMPS = (fx._clamp_one_pass, fx._clamp_two_passes)
COMPILED = fx.kernel


@pytest.fixture(scope="module", params=["compiled", "numpy"], autouse=True)
def sum_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test of this file runs on the compiled one-pass kernel and on the NumPy path."""
    if request.param == "compiled" and COMPILED is None:
        pytest.skip("the compiled kernel was not built (no C compiler at install)")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fx, "kernel", COMPILED if request.param == "compiled" else None)
        yield str(request.param)


def exact(x: list[float], bounds: tuple[float, float], k: int) -> int:
    """Σ rint(clip(v)·2^k) in rational arithmetic (round() of a Fraction: half to even)."""
    lo, hi = bounds
    scale = Fraction(2) ** k
    return sum(round(Fraction(min(max(v, lo), hi)) * scale) for v in x)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[float], tuple[float, float], int]:
    e = draw(st.integers(-1040, 950))
    a, b = draw(st.floats(-1.0, 1.0)), draw(st.floats(-1.0, 1.0))
    lo, hi = sorted((math.ldexp(a, e), math.ldexp(b, e)))
    k = power_exponent((lo, hi))
    assume(K_RANGE[0] <= k <= K_RANGE[1])  # bounds below about 2**-1040 are out of range
    top = max(abs(lo), abs(hi))
    unit = math.ldexp(1.0, -k)  # one step of the grid
    specials = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, -1e-310, math.inf]
    specials += [-math.inf, HUGE, -HUGE, lo, hi, unit / 2, -unit / 2, 3 * unit / 2]
    specials += [math.nextafter(v, d) for v in (lo, hi) for d in (-math.inf, math.inf)]
    record = st.one_of(
        st.sampled_from(specials),
        st.integers(-(2**34), 2**34).map(lambda j: (j + 0.5) * unit),  # ties (when representable)
        st.floats(-2.0, 2.0).map(lambda f: f * top),  # around the bounds
        st.floats(allow_nan=False),  # anything else, infinities and subnormals included
    )
    return draw(st.lists(record, max_size=40)), (lo, hi), k


@settings(max_examples=300, deadline=None)
@given(cases())
def test_equals_the_rational_reference(case: tuple[list[float], tuple[float, float], int]) -> None:
    x, bounds, k = case
    assert K_RANGE[0] <= k <= K_RANGE[1]
    want = exact(x, bounds, k)
    arr = np.array(x, dtype=np.float64)
    with pytest.MonkeyPatch.context() as mp:
        for clamp in CLAMPS:
            mp.setattr(fx, "_clamp", clamp)
            assert fixed_sum(arr, bounds, k) == want
            assert fixed_sum(arr[::-1], bounds, k) == want  # a reversed, strided view


@settings(max_examples=60, deadline=None)
@given(cases(), st.integers(1, 7), st.integers(1, 4))
def test_blocks_and_threads_do_not_change_the_sum(
    case: tuple[list[float], tuple[float, float], int], block: int, threads: int
) -> None:
    x, bounds, k = case
    arr = np.array(x, dtype=np.float64)
    with pytest.MonkeyPatch.context() as mp:
        # tiny blocks shared out by the threads' queue: many blocks even on a few records
        mp.setattr(fx, "BLOCK", block)
        mp.setattr(fx, "_THREADS_FROM", 0)
        mp.setattr(fx, "_threads", lambda: threads)
        assert fixed_sum(arr, bounds, k) == exact(x, bounds, k)


@settings(max_examples=60, deadline=None)
@given(
    cases(),
    st.integers(0, 2**51 - 1),  # the payload (0 with the quiet bit clear would be an infinity)
    st.booleans(),
    st.integers(0, 10**6),
    st.integers(1, 4),
)
def test_a_nan_of_any_sign_and_payload_is_refused_anywhere(
    case: tuple[list[float], tuple[float, float], int],
    payload: int,
    negative: bool,
    where: int,
    threads: int,
) -> None:
    x, bounds, k = case
    arr = np.array([*x, 0.0], dtype=np.float64)
    # quiet (bit 51 set) or signalling (clear, payload nonzero) NaN, either sign
    pattern = (0xFFF0 if negative else 0x7FF0) << 48 | (payload or 1 << 51)
    arr.view(np.uint64)[where % arr.size] = pattern
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fx, "BLOCK", 3)
        mp.setattr(fx, "_THREADS_FROM", 0)
        mp.setattr(fx, "_threads", lambda: threads)
        for clamp in CLAMPS:
            mp.setattr(fx, "_clamp", clamp)
            with pytest.raises(DataError, match="missing value"):
                fixed_sum(arr, bounds, k)


class _StalledPool:
    """A pool whose helper takes a block and is never scheduled again (a loaded machine)."""

    def __init__(self) -> None:
        self.futures: list[Future[None]] = []
        self.timers: list[threading.Timer] = []

    def submit(self, fn: object, queue: fx._Blocks, *args: object) -> Future[None]:
        assert queue.take() is not None  # the helper's block: taken, never computed
        future: Future[None] = Future()
        # were the sum to wait for the helper, it would wait this long, then the test fails
        timer = threading.Timer(30.0, lambda: future.cancel() or future.set_result(None))
        timer.daemon = True
        timer.start()
        self.futures.append(future)
        self.timers.append(timer)
        return future


@pytest.mark.parametrize("nan_in_the_stalled_block", [False, True])
def test_a_stalled_helper_is_not_waited_for(nan_in_the_stalled_block: bool) -> None:
    x = np.random.default_rng(7).uniform(-2.0, 12.0, 101)
    if nan_in_the_stalled_block:
        x[0] = np.nan  # in the first block, which the helper takes
    bounds = (0.0, 10.0)
    k = power_exponent(bounds)
    pool = _StalledPool()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fx, "BLOCK", 8)
        mp.setattr(fx, "_THREADS_FROM", 0)
        mp.setattr(fx, "_threads", lambda: 2)
        mp.setattr(fx, "_helper", lambda: pool)
        if nan_in_the_stalled_block:
            with pytest.raises(DataError, match="missing value"):
                fixed_sum(x, bounds, k)
        else:
            assert fixed_sum(x, bounds, k) == exact(x.tolist(), bounds, k)
    for timer in pool.timers:
        timer.cancel()
    (future,) = pool.futures
    assert future.cancelled()  # returned without waiting: the stalled block was done again


def test_after_a_refusal_a_late_helper_finds_no_more_blocks() -> None:
    late: list[fx._Blocks] = []

    class Late:  # a helper that starts only after the call has ended
        def submit(self, fn: object, queue: fx._Blocks, *args: object) -> Future[None]:
            late.append(queue)
            return Future()

    x = np.zeros(50)
    x[3] = np.nan
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fx, "BLOCK", 4)
        mp.setattr(fx, "_THREADS_FROM", 0)
        mp.setattr(fx, "_threads", lambda: 2)
        mp.setattr(fx, "_helper", lambda: Late())
        with pytest.raises(DataError, match="missing value"):
            fixed_sum(x, (0.0, 1.0), power_exponent((0.0, 1.0)))
    (queue,) = late
    assert queue.take() is None  # the rest of the data is not read after the refusal
