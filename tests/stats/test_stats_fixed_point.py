"""Exact fixed-point sums: order independence and the float-summation attack."""

from __future__ import annotations

import math

import numpy as np

from dpkit.stats._fixed import exact_int_sum, fixed_sum, power_exponent


def test_fixed_sum_is_exact_and_order_independent() -> None:
    g = np.random.default_rng(0)
    x = g.uniform(-3, 7, 200_003) * 10.0 ** g.integers(-6, 1, 200_003)
    k = power_exponent((-3.0, 7.0))
    total = fixed_sum(x, (-3.0, 7.0), k)
    # reference: Python integers, no floating-point accumulation at all
    ref = int(np.rint(np.clip(x, -3, 7) * 2.0**k).astype(np.int64).sum(dtype=object))
    assert total == ref
    for _ in range(3):
        assert fixed_sum(g.permutation(x), (-3.0, 7.0), k) == total
    assert fixed_sum(x[::-1].copy(), (-3.0, 7.0), k) == total


def test_fixed_sum_threads_match_single_block() -> None:
    x = np.random.default_rng(1).normal(0, 5, 2_500_000)  # above the two-thread threshold
    k = power_exponent((-10.0, 10.0))
    t = fixed_sum(x, (-10.0, 10.0), k)
    assert t == exact_int_sum(np.rint(np.clip(x, -10, 10) * 2.0**k))


def test_float_sum_attack_reproduced_and_blocked() -> None:
    """Casacuberta et al. (2022): a naive float sum moves by more than its claimed sensitivity.

    Bounds [0, 2^53] claim that removing one record changes the sum by at most 2^53. Next to a
    record of 2^53 every 1.5 rounds up to 2 in a sequential float sum, so removing that one
    record changes the naive sum by 2^53 + 0.5·k.
    """
    big = 2.0**53
    k_small = 1000
    with_big = [big] + [1.5] * k_small
    without = [1.5] * k_small
    sensitivity = big  # max(|L|, |U|) for bounds [0, 2^53]
    naive_change = math.fsum([sum(with_big), -sum(without)])  # sequential float sum
    assert naive_change > sensitivity + 400  # the attack works against the naive sum
    bounds = (0.0, big)
    k = power_exponent(bounds)
    change = fixed_sum(np.array(with_big), bounds, k) - fixed_sum(np.array(without), bounds, k)
    assert abs(change) <= int(np.rint(big * 2.0**k))  # dpkit: exactly within the sensitivity


def test_rounding_records_can_only_move_within_the_bound_images() -> None:
    bounds = (-0.3, 0.7)
    k = power_exponent(bounds)
    lo, hi = int(np.rint(-0.3 * 2.0**k)), int(np.rint(0.7 * 2.0**k))
    for v in (-1e9, -0.3, -0.29999999999, 0.0, 0.69999999999, 0.7, 5.0):
        t = fixed_sum(np.array([v]), bounds, k)
        assert lo <= t <= hi


def test_large_sums_work_in_a_forked_child() -> None:
    """A large sum reuses worker threads; a forked child (multiprocessing, pre-forking
    servers) inherits the pool but not the threads, so it must start fresh ones."""
    import multiprocessing
    import warnings

    import pytest

    import dpkit.stats as st

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    x = np.random.default_rng(0).uniform(0, 1, 3_000_000)
    st.sum(x, bounds=(0, 1), epsilon=1.0, rng=0)  # the parent's worker threads now exist
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads, Python ≥ 3.12
        ctx = multiprocessing.get_context("fork")
        child = ctx.Process(target=st.sum, args=(x,), kwargs={"bounds": (0, 1), "epsilon": 1.0})
        child.start()
        child.join(timeout=60)
    hung = child.is_alive()
    if hung:
        child.kill()
    assert not hung and child.exitcode == 0
