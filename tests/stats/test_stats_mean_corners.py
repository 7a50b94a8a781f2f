"""The mean's interval from the box's corners is the interval of the full search (PartsBox)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dpkit.stats as st
from dpkit.stats._release import PartsBox


def _both(rel: st.Release, alpha: float, sampling: bool) -> tuple[object, object]:
    box = rel.errors
    assert isinstance(box, PartsBox) and box.corners
    searched = dataclasses.replace(box, corners=False)
    fast = rel.ci(alpha, include_sampling=sampling)
    slow = searched.interval(rel.value, alpha, sampling, "box")
    return fast, slow


@pytest.mark.parametrize("n", [0, 1, 3, 30, 10_000])
def test_corners_give_the_searched_interval(n: int) -> None:
    gen = np.random.default_rng(n)
    for trial in range(25):
        lo = float(gen.uniform(-50, 10))
        hi = lo + float(gen.choice([1e-3, 1.0, 40.0, 1e4]))
        x = gen.uniform(lo - 5, hi + 5, n)
        eps = float(gen.choice([1e-3, 0.05, 1.0, 20.0]))
        delta = float(gen.choice([0.0, 1e-6]))
        rel = st.mean(x, bounds=(lo, hi), epsilon=eps, delta=delta, rng=1000 * n + trial)
        for alpha in (0.05, 0.5):
            for sampling in (False, True):
                fast, slow = _both(rel, alpha, sampling)
                assert fast == slow, (trial, alpha, sampling)


def test_the_corners_are_only_used_where_declared() -> None:
    # Variance is not monotone in its parts: it keeps the search.
    r = st.var(np.linspace(0, 1, 100), bounds=(0, 1), epsilon=1.0, rng=0)
    assert isinstance(r.errors, PartsBox) and not r.errors.corners
