"""A discrete event with a huge integer sensitivity is never enumerated atom by atom.

The PLD accountant listed every integer between the two distributions' supports: a discrete
Gaussian or Laplace event with sensitivity 2³³ asked NumPy for a 64 GiB array (``MemoryError``;
on a machine that overcommits memory, a process killed by the kernel). The curator service
reached it from one request (a mean with ε = 2⁵³ and δ > 0, priced in a pricing thread). An
event with more atoms than a single event's loss grid may hold is not representable by the PLD
method: it falls back to the other methods like any other unsupported event.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from dpkit.accounting import DiscreteGaussianEvent, DiscreteLaplaceEvent, epsilon_of
from dpkit.accounting._pld_pairs import Unsupported, event_pmfs

HUGE = 2**33


@pytest.fixture
def little_memory() -> Iterator[None]:
    """At most 4 GiB more address space: an enumeration of 2³³ atoms fails at once instead of
    swapping (and the tests stay honest on a machine that overcommits)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    used = 0
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + 4 * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard < 0 else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize(
    "event",
    [
        DiscreteGaussianEvent(sigma=1.0, sensitivity=HUGE),
        DiscreteLaplaceEvent(scale=1.0, sensitivity=HUGE),
    ],
    ids=["discrete-gaussian", "discrete-laplace"],
)
def test_huge_sensitivity_is_unsupported_not_enumerated(event: object, little_memory: None) -> None:
    with pytest.raises(Unsupported):
        event_pmfs(event, 1e-4)  # type: ignore[arg-type]


def test_auto_composition_of_a_huge_discrete_laplace_answers(little_memory: None) -> None:
    # pure ε-DP: ε = Δ / b, whatever the method that gives it
    eps = epsilon_of(DiscreteLaplaceEvent(scale=1.0, sensitivity=HUGE), delta=1e-6)
    assert eps == pytest.approx(float(HUGE), rel=1e-9)
