"""accuracy(n) of the local model before any report: the coverage of many actual estimates.

alpha = 0.1; the share of estimates within ``accuracy`` of the truth must be within ±4 binomial
sd of 0.9 (a normal approximation to a sum of thousands of bounded terms: its error at these n is
far below the band). Oracles: 30 collections of 4000 reports over 64 values, all reports holding
value 0, so the 63 other values are rare (variance ``Var*``): 1890 estimates. Randomized
response: 400 surveys of 2000 answers at a true share of one half, where the worst-case variance
that ``accuracy`` uses is the actual one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.local import GRR, OUE
from dpkit.mechanisms import RandomizedResponse
from dpkit.random import seeded

ALPHA = 0.1


def _band(m: int) -> float:
    return 4 * math.sqrt(ALPHA * (1 - ALPHA) / m)


@pytest.mark.parametrize("oracle", [OUE(epsilon=1.0, k=64), GRR(epsilon=2.0, k=64)])
def test_oracle_accuracy_covers_rare_values(oracle) -> None:
    n, trials = 4000, 30
    h = oracle.accuracy(n, ALPHA)
    gen = seeded(8)
    hits = []
    for _ in range(trials):
        est = oracle.estimate(oracle.randomize(np.zeros(n, dtype=np.int64), rng=gen))
        hits.append(np.abs(est.counts[1:]) <= h)
    cov = float(np.mean(hits))
    assert abs(cov - (1 - ALPHA)) <= _band(trials * 63)


def test_randomized_response_accuracy_covers_at_one_half() -> None:
    rr = RandomizedResponse(epsilon=1.0)
    n, trials = 2000, 400
    h = rr.accuracy(n, ALPHA)
    gen = seeded(9)
    truth = np.arange(n) % 2 == 0
    hits = [abs(rr.estimate(rr.randomize(truth, rng=gen)).value - 0.5) <= h for _ in range(trials)]
    assert abs(float(np.mean(hits)) - (1 - ALPHA)) <= _band(trials)


def test_accuracy_needs_a_public_n() -> None:
    for bad in (0, -3, 2.5, True):
        with pytest.raises(PrivacyParameterError):
            OUE(epsilon=1.0, k=4).accuracy(bad)  # type: ignore[arg-type]
        with pytest.raises(PrivacyParameterError):
            RandomizedResponse(epsilon=1.0).accuracy(bad)  # type: ignore[arg-type]
