"""Every client randomizer audited on two inputs; a deliberately broken one is caught."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytest

from dpkit.audit import InSet, Predicate, epsilon_lower_bound
from dpkit.local import GRR, OLH, OUE, SUE, HadamardResponse, SubsetSelection
from dpkit.local._coins import ONE
from dpkit.local._hadamard import parity
from dpkit.local._olh import universal_hash

TRIALS = 200_000


def _batched(oracle, view):
    def mech(x, n, rng):
        return view(oracle.randomize(np.full(n, x), rng=rng).values)

    return mech


def _ue_bits(values):
    return np.unpackbits(values[:, :1], axis=1)[:, :2]


def _regions(oracle):
    """The likelihood-ratio-optimal test of x=0 against x=1 for each protocol, fixed a priori."""
    if isinstance(oracle, GRR):
        return (lambda v: v), InSet((1,))
    if isinstance(oracle, OUE | SUE):
        return _ue_bits, Predicate(lambda b: (b[:, 1] == 1) & (b[:, 0] == 0), name="b1 & !b0")
    if isinstance(oracle, OLH):
        g = oracle.g

        def olh_view(v):
            h0 = universal_hash(v[:, 0], v[:, 1], 0, g)
            h1 = universal_hash(v[:, 0], v[:, 1], 1, g)
            return np.stack([(h1 == v[:, 2]) & (h0 != v[:, 2])], axis=1).astype(np.int8)

        return olh_view, Predicate(lambda s: s[:, 0] == 1, name="supports 1 only")
    if isinstance(oracle, HadamardResponse):

        def hr_view(v):
            in1 = parity(v & 2) == 0
            in0 = parity(v & 1) == 0
            return np.stack([in1 & ~in0], axis=1).astype(np.int8)

        return hr_view, Predicate(lambda s: s[:, 0] == 1, name="in C_1 not C_0")
    assert isinstance(oracle, SubsetSelection)

    def ss_view(v):
        return np.stack([(v == 1).any(axis=1) & ~(v == 0).any(axis=1)], axis=1).astype(np.int8)

    return ss_view, Predicate(lambda s: s[:, 0] == 1, name="1 in S, 0 not")


@pytest.mark.parametrize(
    ("oracle", "floor"),
    [
        # power floors: with the likelihood-ratio-optimal region each bound reaches ≈ 0.98 ε₀
        # at 200,000 trials (measured); ≥ 0.9 ε₀ shows the audit could see a violation
        (GRR(epsilon=1.0, k=4), 0.9),
        (OUE(epsilon=1.0, k=16), 0.9),
        (SUE(epsilon=1.0, k=16), 0.9),
        (OLH(epsilon=1.0, k=16), 0.9),
        (HadamardResponse(epsilon=1.0, k=16), 0.9),
        (SubsetSelection(epsilon=1.0, k=16), 0.9),
    ],
    ids=lambda o: getattr(o, "name", str(o)),
)
def test_randomizer_audit(oracle, floor):
    view, region = _regions(oracle)
    r = epsilon_lower_bound(_batched(oracle, view), 0, 1, trials=TRIALS, rng=2024, region=region)
    assert r.epsilon <= oracle.epsilon
    assert r.epsilon >= floor * oracle.epsilon, r


@dataclass(frozen=True, kw_only=True)
class _LeakyOUE(OUE):
    """Broken on purpose: the own bit is kept with probability 3/4, not 1/2 (claims ε, gives
    ln(3 e^ε) ≈ ε + 1.1)."""

    name: ClassVar[str] = "LeakyOUE"

    def _calibrate(self):
        _p, q, ratio = super()._calibrate()
        return Fraction(3, 4), q, ratio


def test_broken_randomizer_is_caught():
    broken = _LeakyOUE(epsilon=1.0, k=16)
    assert broken.p == Fraction(3, 4) and int(broken.p * ONE) == 3 * ONE // 4
    view, region = _regions(OUE(epsilon=1.0, k=16))
    r = epsilon_lower_bound(_batched(broken, view), 0, 1, trials=TRIALS, rng=7, region=region)
    assert r.epsilon > broken.epsilon, r
    assert r.epsilon > 1.6  # true ε = ln 3 + 1 ≈ 2.1


def test_grr_audit_with_selected_region():
    # no region given: the auditor chooses one from half of the runs, and still stays ≤ ε
    grr = GRR(epsilon=2.0, k=3)
    r = epsilon_lower_bound(_batched(grr, lambda v: v), 0, 1, trials=100_000, rng=3)
    assert 0.8 * 2.0 <= r.epsilon <= 2.0
    assert math.isfinite(r.epsilon)
