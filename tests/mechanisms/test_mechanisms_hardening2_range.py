"""The integer mechanisms clamp an answer to their representable range instead of refusing it.

Answers ``2^62 − 1`` and ``2^62`` are neighbours at sensitivity 1; refusing the second (an
overflow guard on the value) made the outcome depend on the answer. Each answer is clamped to
``[−(2^62 − 1), 2^62 − 1]``, a 1-Lipschitz map per coordinate, so neighbouring answers stay
within the sensitivity and the guarantee holds: with one seed, an answer beyond the range gives
exactly the release of the range's end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import DataError
from dpkit.mechanisms import DiscreteGaussian, DiscreteLaplace, Geometric
from dpkit.random import seeded

TOP = 2**62 - 1
MECHS: dict[str, Callable[..., Any]] = {
    "Geometric": lambda **k: Geometric(epsilon=1.0, **k),
    "DiscreteLaplace": lambda **k: DiscreteLaplace(epsilon=1.0, **k),
    "DiscreteGaussian": lambda **k: DiscreteGaussian(epsilon=1.0, delta=1e-6, **k),
}


def _release(name: str, value: Any, **kw: Any) -> tuple[Any, Accountant]:
    acct = Accountant(ApproxDP(epsilon=100.0, delta=1e-3))
    out = MECHS[name](**kw).release(value, accountant=acct, rng=seeded(8))
    return out, acct


@pytest.mark.parametrize("name", sorted(MECHS))
@pytest.mark.parametrize(
    ("far", "end"),
    [(2**62, TOP), (10**30, TOP), (-(2**62), -TOP), (-(10**30), -TOP), (1e300, TOP),
     (np.int64(2**63 - 1), TOP), (np.uint64(2**64 - 1), TOP), (float(2**62), TOP)],
)  # fmt: skip
def test_an_answer_beyond_the_range_is_clamped(name: str, far: Any, end: int) -> None:
    got, acct = _release(name, far)
    want, _ = _release(name, end)
    assert got == want
    assert len(acct.ledger) == 1


@pytest.mark.parametrize("name", sorted(MECHS))
def test_arrays_are_clamped_entry_by_entry(name: str) -> None:
    far = [2**62, -(10**40), 5]
    got, _ = _release(name, far, shape=3)
    want, _ = _release(name, [TOP, -TOP, 5], shape=3)
    np.testing.assert_array_equal(got, want)
    arr, _ = _release(name, np.array([2**63 - 1, 0, -(2**63)], dtype=np.int64), shape=3)
    np.testing.assert_array_equal(arr, _release(name, [TOP, 0, -TOP], shape=3)[0])
    big = np.array([2**64 - 1, 3, 2**63], dtype=np.uint64)
    np.testing.assert_array_equal(
        _release(name, big, shape=3)[0], _release(name, [TOP, 3, TOP], shape=3)[0]
    )


@pytest.mark.parametrize("name", sorted(MECHS))
def test_nan_is_still_refused_before_the_charge(name: str) -> None:
    acct = Accountant(ApproxDP(epsilon=100.0, delta=1e-3))
    with pytest.raises(DataError):
        MECHS[name]().release(float("nan"), accountant=acct, rng=seeded(8))
    assert not acct.ledger


@pytest.mark.parametrize("sens", [1.0, 0.25, 1e-300])
@pytest.mark.parametrize("far", [1e300, -1e308, 1.7e308])
def test_permute_and_flip_clamps_scores_to_its_range(sens: float, far: float) -> None:
    # A refusal of a score "too large relative to the sensitivity" depended on the score; the
    # scores are clamped to the documented range ±limit instead (1-Lipschitz per score).
    from dpkit.mechanisms import PermuteAndFlip

    pf = PermuteAndFlip(epsilon=1.0, sensitivity=sens)
    limit = pf.score_limit
    assert math.isfinite(limit) and limit > 0
    acct = Accountant(ApproxDP(epsilon=100.0, delta=1e-3))
    got = pf.select(["a", "b", "c"], [3.0, far, 2.0], accountant=acct, rng=seeded(8))
    end = math.copysign(limit, far)
    assert got == pf.select(["a", "b", "c"], [3.0, end, 2.0], rng=seeded(8))
    assert len(acct.ledger) == 1
    np.testing.assert_array_equal(
        pf.probabilities([3.0, far, 2.0]), pf.probabilities([3.0, end, 2.0])
    )


@pytest.mark.parametrize("name", ["Exponential", "ReportNoisyMax"])
@pytest.mark.parametrize("far", [1e308, -1e308, 1e306])
def test_gumbel_selection_clamps_scores_whose_scaled_value_overflows(name: str, far: float) -> None:
    # ε/(2Δ) · 1e308 overflowed and the selection was refused: a refusal on a score's value.
    # Scores are clamped to ±score_limit(scale) instead (1-Lipschitz and monotone per score).
    import dpkit.mechanisms as dpm
    from dpkit.mechanisms._selection import score_limit

    mech = getattr(dpm, name)(epsilon=10.0, sensitivity=0.1)
    limit = score_limit(mech.scale)
    end = math.copysign(limit, far) if abs(far) > limit else far
    acct = Accountant(ApproxDP(epsilon=100.0, delta=1e-3))
    got = mech.select(["a", "b", "c"], [3.0, far, 2.0], accountant=acct, rng=seeded(8))
    assert got == mech.select(["a", "b", "c"], [3.0, end, 2.0], rng=seeded(8))
    assert len(acct.ledger) == 1
