"""A Thresholdout exposes only DP outputs and public parameters, and cannot be copied or pickled.

It must keep the holdout to answer queries, and its state includes the current noisy threshold
T̂, whose value the sparse vector technique's guarantee assumes secret. A pickle of it (shipped
with a notebook's results, say) would hand over the holdout set and T̂; a copy would let an
analyst fork the mechanism and spend its budget twice (each copy thinks it has all of it).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from dpkit.holdout import Thresholdout

G = np.random.default_rng(5)
TRAIN, HOLDOUT = G.random(300), G.random(300)


def _fresh() -> Thresholdout:
    return Thresholdout(TRAIN, HOLDOUT, threshold=0.1, sigma=0.01, budget=3, rng=0)


@pytest.mark.parametrize("how", [pickle.dumps, copy.copy, copy.deepcopy])
def test_a_thresholdout_cannot_be_pickled_or_copied(how: object) -> None:
    t = _fresh()
    with pytest.raises(TypeError, match="holdout"):
        how(t)  # type: ignore[operator]


def test_only_dp_outputs_and_public_parameters_are_public() -> None:
    t = _fresh()
    t.query(lambda r: r > 0.5)
    public = {name for name in dir(t) if not name.startswith("_")}
    # event/epsilon: the price (public); budget: a parameter; remaining/queries: counts of the
    # analyst's own queries and of the over-threshold answers (which the answers themselves show)
    assert public == {"event", "epsilon", "budget", "remaining", "queries", "query", "query_many"}
