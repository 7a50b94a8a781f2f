"""The fixed-point summing kernel (one addition rounds, bit patterns summed modulo 2^64) against
straightforward references, on adversarial data and block boundaries, on every path: the compiled
one-pass kernel and NumPy's passes with either clamp."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest

import dpkit.stats._fixed as fx
from dpkit.errors import DataError
from dpkit.stats._fixed import BLOCK, K_RANGE, fixed_sum, power_exponent

TINY = 5e-324  # the smallest subnormal
HUGE = np.finfo(np.float64).max


COMPILED = fx.kernel


@pytest.fixture(params=["compiled", "one_pass", "two_passes"], autouse=True)
def sum_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # The compiled one-pass kernel where it was built, else NumPy: run every path whatever is
    # installed. Each NumPy major version uses one of the two clamps.
    if request.param == "compiled":
        if COMPILED is None:
            pytest.skip("the compiled kernel was not built (no C compiler at install)")
        monkeypatch.setattr(fx, "kernel", COMPILED)
    else:
        monkeypatch.setattr(fx, "kernel", None)
        monkeypatch.setattr(fx, "_clamp", getattr(fx, f"_clamp_{request.param}"))
    yield str(request.param)


def exact(x: np.ndarray, bounds: tuple[float, float], k: int) -> int:  # type: ignore[type-arg]
    """Σ rint(clip(x)·2^k) in rational arithmetic (Python's round() of a Fraction: half to even)."""
    lo, hi = bounds
    scale = Fraction(2) ** k
    return sum(round(Fraction(min(max(float(v), lo), hi)) * scale) for v in x)


def floats(x: np.ndarray, bounds: tuple[float, float], k: int) -> int:  # type: ignore[type-arg]
    """The float reference, vectorised (exact: scaling by 2^k is exact or rounds to |·| < 1/2)."""
    t = np.rint(np.ldexp(np.clip(x, bounds[0], bounds[1]), k))
    return int(t.astype(np.int64).sum())  # |Σ t| ≤ n·(2^34 + 1) < 2^63


def adversarial(bounds: tuple[float, float], k: int, g: np.random.Generator) -> np.ndarray:  # type: ignore[type-arg]
    lo, hi = bounds
    top = max(abs(lo), abs(hi))
    unit = math.ldexp(1.0, -k)  # one step of the grid
    ties = (g.integers(-(2**33), 2**33, 200) + 0.5) * unit  # exactly halfway between two steps
    specials = [0.0, -0.0, TINY, -TINY, 2.2250738585072014e-308, -1e-310, lo, hi]
    specials += [np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf), HUGE, -HUGE, 1e300, -1e300]
    specials += [unit / 2, -unit / 2, 3 * unit / 2, -3 * unit / 2, top * 1e10, -top * 1e10]
    spread = g.uniform(-1.5, 1.5, 300) * top * 10.0 ** g.integers(-20, 3, 300)
    x = np.concatenate([specials, ties, spread])
    return x[np.isfinite(x)]


BOUNDS = [
    (0.0, 1.0),
    (-3.0, 7.0),
    (-0.3, 0.7),
    (0.0, 100.0),
    (-(2.0**500), 2.0**499),
    (-(2.0**950), 3 * 2.0**948),  # near the top of K_RANGE
    (2.0**-1000, 2.0**-999),  # bounds near 2^-1000 (k = 1033)
    (-(2.0**-1030), 2.0**-1030),  # subnormal bounds
    (-1e-300, 0.0),
]


@pytest.mark.parametrize("bounds", BOUNDS)
def test_kernel_is_bit_identical_to_the_rational_reference(bounds: tuple[float, float]) -> None:
    k = power_exponent(bounds)
    assert K_RANGE[0] <= k <= K_RANGE[1]
    x = adversarial(bounds, k, np.random.default_rng(abs(k)))
    want = exact(x, bounds, k)
    assert fixed_sum(x, bounds, k) == want
    assert floats(x, bounds, k) == want  # the references agree with each other
    assert fixed_sum(x[::-1].copy(), bounds, k) == want
    assert fixed_sum(x[::3], bounds, k) == exact(x[::3], bounds, k)  # a strided view


@pytest.mark.parametrize(
    "n", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 7, fx._THREADS_FROM - 1, fx._THREADS_FROM]
)
def test_sizes_around_blocks_and_the_two_thread_threshold(n: int) -> None:
    g = np.random.default_rng(n)
    bounds = (-3.0, 7.0)
    k = power_exponent(bounds)
    x = g.uniform(-5, 9, n) * 10.0 ** g.integers(-3, 2, n)
    x[g.integers(0, max(n, 1), min(n, 50))] = 1e308  # huge outliers: clamped, never refused
    assert fixed_sum(x, bounds, k) == floats(x, bounds, k)


_WHERE = [0, BLOCK - 1, BLOCK, BLOCK + 3, fx._THREADS_FROM - 1, fx._THREADS_FROM + BLOCK + 5]


@pytest.mark.parametrize("bad", [np.nan, -np.nan])
@pytest.mark.parametrize("where", _WHERE)
def test_nan_is_refused_in_any_block_position(bad: float, where: int) -> None:
    # Sizes cover: the first block, the last record of a block, the first of the next, a shorter
    # last block (whose unused flags hold earlier blocks' values), and the helper thread's half.
    n = where + 6 if where < fx._THREADS_FROM else fx._THREADS_FROM + BLOCK + 6
    x = np.zeros(n)
    x[where] = bad
    with pytest.raises(DataError, match="missing value"):
        fixed_sum(x, (0.0, 1.0), power_exponent((0.0, 1.0)))


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
@pytest.mark.parametrize("where", _WHERE)
def test_infinities_are_clamped_in_any_block_position(bad: float, where: int) -> None:
    # ±inf is a value beyond a bound (not a missing one): clamped like 1e308, never refused
    n = where + 6 if where < fx._THREADS_FROM else fx._THREADS_FROM + BLOCK + 6
    x = np.zeros(n)
    x[where] = bad
    k = power_exponent((0.0, 1.0))
    assert fixed_sum(x, (0.0, 1.0), k) == (1 << k if bad > 0 else 0)


def test_finite_extremes_are_clamped_not_refused() -> None:
    for bounds in [(0.0, 1.0), (-(2.0**-1030), 2.0**-1030), (-(2.0**950), 2.0**950)]:
        k = power_exponent(bounds)
        x = np.array([HUGE, -HUGE, HUGE, TINY])
        assert fixed_sum(x, bounds, k) == exact(x, bounds, k)


def test_exponents_outside_the_range_are_rejected() -> None:
    x = np.ones(3)
    for k in (K_RANGE[0] - 1, K_RANGE[1] + 1):
        with pytest.raises(ValueError, match="needs k"):
            fixed_sum(x, (0.0, 1.0), k)
    # at both ends the constant 1.5·2^(52−k) is a normal double below 2^970
    for k in K_RANGE:
        c = math.ldexp(1.5, 52 - k)
        assert 2.2250738585072014e-308 <= c < 2.0**970
        assert fixed_sum(np.array([0.0]), (0.0, 1.0), k) == 0


@pytest.mark.parametrize("where", [3, fx._THREADS_FROM + BLOCK + 5])
def test_a_signalling_nan_is_refused_with_data_error_not_a_warning(where: int) -> None:
    # A signalling NaN (quiet bit clear) raises the invalid flag in x + C: NumPy then emitted a
    # RuntimeWarning, an exception under warnings-as-errors, in place of the DataError. The second
    # position lies in the helper thread's half (NumPy's error state is per thread).
    n = where + 6 if where < fx._THREADS_FROM else fx._THREADS_FROM + BLOCK + 6
    x = np.zeros(n)
    x.view(np.uint64)[where] = 0x7FF0_0000_0000_0001
    assert math.isnan(x[where])
    with pytest.raises(DataError, match="missing value"):
        fixed_sum(x, (0.0, 1.0), power_exponent((0.0, 1.0)))


def test_the_compiled_path_is_taken_for_contiguous_float64(sum_path: str) -> None:
    # The switch is real: with the kernel in use every block of a contiguous array goes through
    # it (and none of a strided view, which NumPy sums); with it off, none does.
    calls: list[tuple[int, int]] = []
    inner = COMPILED

    class Counting:
        @staticmethod
        def block_sum(x: object, start: int, stop: int, *rest: float) -> tuple[int, bool]:
            calls.append((start, stop))
            return inner.block_sum(x, start, stop, *rest)  # type: ignore[union-attr,no-any-return]

    x = np.random.default_rng(3).uniform(-1.0, 2.0, 2 * BLOCK + 5)
    k = power_exponent((0.0, 1.0))
    if sum_path == "compiled":
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fx, "kernel", Counting())
            assert fixed_sum(x, (0.0, 1.0), k) == floats(x, (0.0, 1.0), k)
            assert sorted(calls) == [(0, BLOCK), (BLOCK, 2 * BLOCK), (2 * BLOCK, 2 * BLOCK + 5)]
            calls.clear()
            assert fixed_sum(x[::2], (0.0, 1.0), k) == floats(x[::2], (0.0, 1.0), k)
            raw = np.zeros(8 * x.size + 1, dtype=np.uint8)
            unaligned = np.frombuffer(raw.data, dtype=np.float64, count=x.size, offset=1)
            assert not unaligned.flags.aligned
            assert fixed_sum(unaligned, (0.0, 1.0), k) == 0
            assert calls == []  # neither a strided view nor an unaligned array reaches the C code
    else:
        assert fx.kernel is None
        assert fixed_sum(x, (0.0, 1.0), k) == floats(x, (0.0, 1.0), k)


@pytest.mark.skipif(COMPILED is None, reason="the compiled kernel was not built")
def test_the_compiled_block_sum_refuses_a_bad_buffer_or_range() -> None:
    magic = math.ldexp(1.5, 52 - 34)
    base = int(np.array(magic).view(np.uint64))
    block_sum = COMPILED.block_sum  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="float64"):
        block_sum(np.zeros(4, dtype=np.float32), 0, 4, 0.0, 1.0, magic, base)
    with pytest.raises(IndexError, match="out of range"):
        block_sum(np.zeros(4), 2, 5, 0.0, 1.0, magic, base)
    with pytest.raises(IndexError, match="out of range"):
        block_sum(np.zeros(4), 3, 2, 0.0, 1.0, magic, base)
    assert block_sum(np.zeros(4), 1, 1, 0.0, 1.0, magic, base) == (0, False)  # an empty block


def test_bounds_must_be_finite_and_ordered() -> None:
    # A guard for callers (which validate bounds first): an infinite bound has no grid.
    x = np.ones(3)
    for bounds in [(0.0, math.inf), (-math.inf, 0.0), (1.0, 0.0), (math.nan, 1.0)]:
        with pytest.raises(ValueError, match="finite bounds"):
            fixed_sum(x, bounds, 0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", ">f8"])
def test_other_dtypes_are_summed_as_their_float64_values(dtype: str) -> None:
    # Records of another dtype are widened to float64 first (exact for the floats), so the
    # bounds are applied as given: NumPy clamped a float32 block in float32, where 0.1 rounds up,
    # so a record above the bound landed past it and was refused as if it were a NaN (a refusal
    # that depends on a record's value), and elsewhere its integer differed from the reference.
    bounds = (0.0, 0.1)
    k = power_exponent(bounds)
    x = np.array([1.0, 0.05, -2.0, 0.1, 7.0, 0.0, 0.03125, 3.0, 0.5], dtype=dtype)
    wide = x.astype(np.float64)
    assert fixed_sum(x, bounds, k) == exact(wide, bounds, k)
    assert fixed_sum(x[::2], bounds, k) == exact(wide[::2], bounds, k)
    y = np.array([1.0], dtype=dtype)  # above the upper bound: clamped, never refused
    assert fixed_sum(y, bounds, k) == round(math.ldexp(0.1, k))


def test_any_shape_is_summed_over_all_its_records() -> None:
    # The compiled kernel reads a C-contiguous buffer whole, so every path reads the records in
    # order, whatever the shape: NumPy sliced a 2-d array by rows (and failed on a 0-d one).
    x = np.array([0.5, -3.0, 0.25, 9.0, 0.125, 1e300])
    bounds = (0.0, 1.0)
    k = power_exponent(bounds)
    want = exact(x, bounds, k)
    for y in (x.reshape(3, 2), x.reshape(2, 3).T, x.reshape(3, 2)[:, ::-1]):
        assert fixed_sum(y, bounds, k) == want
    assert fixed_sum(np.array(0.5), bounds, k) == exact(np.array([0.5]), bounds, k)
