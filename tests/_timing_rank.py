"""A rank test on running times: does a function take longer on one input than on another?

Constant-time properties (the clamp runs whatever the values; the grid rounding takes one path
for every magnitude) are checked statistically, never by a timed threshold: the two calls run in
turns, in the order ``a b b a a b …`` so that neither always follows the other, and the two
samples of times are compared with a two-sided Mann–Whitney U test. Interleaving makes the
shared machine's drifting load weigh on both alike; under the null hypothesis (same time
distribution) the p-value is uniform, so a test that asserts ``p > ALPHA`` fails by chance with
probability ALPHA, and a real difference of a few percent over ``pairs`` repetitions drives the
p-value far below it (``tests/stats/test_stats_timing.py`` has a control that shows this).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from scipy import stats

ALPHA = 1e-3
"""Chance of a false alarm per test when the two times have the same distribution."""


def time_pvalue(a: Callable[[], object], b: Callable[[], object], pairs: int = 40) -> float:
    """Two-sided Mann–Whitney p-value comparing the running times of ``a()`` and ``b()``."""
    a(), b()  # warm caches and lazily started threads for both
    times: tuple[list[int], list[int]] = ([], [])
    for i in range(pairs):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for which in order:
            f = a if which == 0 else b
            start = time.perf_counter_ns()
            f()
            times[which].append(time.perf_counter_ns() - start)
    return float(stats.mannwhitneyu(times[0], times[1], alternative="two-sided").pvalue)
