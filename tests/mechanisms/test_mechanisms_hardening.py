"""Regressions for the mechanisms (issue 13): constant-work permute-and-flip, feasibility checked
before charging, exact integers above 2^53, error messages that never quote data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dpkit.mechanisms._permute_and_flip as pf_module
from dpkit.accounting import Accountant, PureDP
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.mechanisms import (
    DiscreteGaussian,
    Exponential,
    Gaussian,
    Geometric,
    Laplace,
    PermuteAndFlip,
    SparseVector,
)
from dpkit.noise import laplace
from tests._structure import lines_run

# --- 2b. permute-and-flip does the same work whatever is rejected -------------------------------

NEIGHBOURS = [
    [5.0, 3.0, 1.0, 0.0],
    [5.0, 5.0, 1.0, 0.0],  # an exactly tied best candidate (never rejected, used to be free)
    [5.0, 3.0, 1.0, 1.0],
    [4.0, 3.0, 1.0, 9.0],  # the best candidate moves: a different set is rejected
]


@pytest.mark.parametrize("seed", range(6))
def test_permute_and_flip_consumes_the_same_randomness(seed: int) -> None:
    # The words drawn are the work done: stopping at the first heads drew a number of coins that
    # depended on the rejected candidates. The same seed must leave the same generator state.
    pf = PermuteAndFlip(epsilon=1.0)
    states = []
    for scores in NEIGHBOURS:
        gen = np.random.default_rng(seed)
        pf.select_index(scores, rng=gen)
        states.append(gen.bit_generator.state["state"]["state"])
    assert len(set(states)) == 1


def test_permute_and_flip_runs_the_same_lines() -> None:
    pf = PermuteAndFlip(epsilon=1.0)
    runs = [
        lines_run(lambda s=s: pf.select_index(s, rng=7), pf_module.__file__) for s in NEIGHBOURS
    ]
    assert runs[0] and all(r == runs[0] for r in runs)


# --- 6. feasibility before charging -------------------------------------------------------------


def test_laplace_grid_follows_the_sensitivity_at_small_epsilon() -> None:
    # ε = 1e-13: the grid was 2^3 = 8Δ, so the noise was calibrated to 9Δ
    lap = Laplace(epsilon=1e-13, sensitivity=1.0)
    assert lap.event.sensitivity <= 1.0 + 2.0**-6
    assert lap.scale <= 1e13 * (1 + 2.0**-6)
    acct = Accountant(PureDP(epsilon=1.0))
    assert np.isfinite(lap.release(1.0, rng=0, accountant=acct))
    for eps in (0.5, 1.0, 3.0):  # the allowance stays ~2^-40 of Δ for ordinary ε
        assert Laplace(epsilon=eps).event.sensitivity <= 1.0 + 2.0**-39


CONSTRUCTORS: dict[str, Callable[[], Any]] = {
    "laplace_tiny_eps": lambda: Laplace(epsilon=2.0**-53),
    "laplace_tiny_eps_vector": lambda: Laplace(epsilon=2.0**-44, shape=8),
    "sparse_vector_tiny_eps": lambda: SparseVector(epsilon=2.0**-53, threshold=1.0),
    "gaussian_huge_sensitivity": lambda: Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1e300),
}


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_infeasible_mechanisms_are_refused_at_construction(name: str) -> None:
    # They used to be built, then charge at release and raise.
    with pytest.raises(PrivacyParameterError):
        CONSTRUCTORS[name]()


def test_select_interval_clamps_overflowing_scores_instead_of_refusing() -> None:
    # scale ε/2Δ = 2: finite scores of 1e308 overflowed and the release was refused, on the
    # scores' values (from the data). Each score is clamped to ±score_limit instead, a
    # 1-Lipschitz, monotone map: the release equals the one on the clamped scores.
    from dpkit.mechanisms._selection import score_limit

    acct = Accountant(PureDP(epsilon=10.0))
    em = Exponential(epsilon=4.0)
    limit = score_limit(em.scale)
    got = em.select_interval(
        np.arange(10.0),
        lambda less, greater: -(greater - less) * 1e307,
        (0, 10),
        accountant=acct,
        rng=3,
    )
    want = em.select_interval(
        np.arange(10.0),
        lambda less, greater: np.maximum(-(greater - less) * 1e307, -limit),
        (0, 10),
        rng=3,
    )
    assert got == want
    assert acct.spent.epsilon == 4.0


@pytest.mark.parametrize("bounds", [(5e-324, 1e-323), (0.0, 1e-310), (-1e-320, 1e-320)])
def test_select_interval_accepts_subnormal_bounds(bounds: tuple[float, float]) -> None:
    # OverflowError from scaling by 2**-grid > 2**1023
    em = Exponential(epsilon=1.0)
    y = em.select_interval([0.0, 1e-323], lambda less, greater: -abs(greater - less), bounds, rng=0)
    assert bounds[0] <= y <= bounds[1]


# --- 9. integers above 2^53 stay exact ---------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Geometric(epsilon=1.0, shape=2),
        lambda: DiscreteGaussian(epsilon=1.0, delta=1e-6, shape=2),
    ],
)
def test_object_integers_above_2_53_are_exact(make: Callable[[], Any]) -> None:
    mech = make()
    base = 2**60 + 128
    a = mech.release(np.array([base, base], dtype=object), rng=5)
    b = mech.release(np.array([base + 1, base], dtype=object), rng=5)
    assert int(b[0]) - int(a[0]) == 1  # was 0 or 256: both went through float64
    assert int(b[1]) == int(a[1])


def test_object_integers_beyond_the_limit_are_clamped() -> None:
    # clamped to 2^62 - 1 (the end of the representable range), never refused on the value
    mech = Geometric(epsilon=1.0, shape=1)
    got = mech.release(np.array([2**63], dtype=object), rng=4)
    assert got.tolist() == mech.release(np.array([2**62 - 1], dtype=object), rng=4).tolist()


# --- 11. messages never quote data --------------------------------------------------------------

SECRET = "salary=91234.5 (alice)"


@pytest.mark.parametrize(
    "call",
    [
        lambda: Laplace(epsilon=1.0).release(SECRET),
        lambda: Gaussian(epsilon=1.0, delta=1e-6).release(SECRET),
        lambda: Geometric(epsilon=1.0, shape=1).release(np.array([SECRET], dtype=object)),
        lambda: Geometric(epsilon=1.0).release(SECRET),
        lambda: laplace([1.0, SECRET], 1.0),
        lambda: Exponential(epsilon=1.0).select_interval(
            [SECRET], lambda less, greater: -abs(greater - less), (0.0, 1.0)
        ),
        lambda: Exponential(epsilon=1.0).select_interval([0.5], [SECRET, 1.0], (0.0, 1.0)),
    ],
)
def test_errors_do_not_echo_data(call: Callable[[], Any]) -> None:
    with pytest.raises(DPKitError) as info:
        call()
    assert "alice" not in str(info.value) and "91234" not in str(info.value)
