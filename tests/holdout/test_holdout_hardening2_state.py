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


def test_one_holdout_record_of_another_type_changes_only_its_own_value() -> None:
    # NumPy reads the list [1.0, ..., 1.0, "x"] as strings: one record made every other record
    # a string, the query failed on all of them, and all counted as the middle of the bounds
    # (the holdout mean moved by half the range, not by one record's Δ). Each record must be
    # read as it is: only "x" counts as the middle.
    holdout = [1.0] * 99 + ["x"]
    t = Thresholdout(np.zeros(100), holdout, threshold=0.01, sigma=1e-6, budget=1, rng=0)
    answer = t.query(lambda r: r + 0)  # over the threshold: the holdout mean, barely noised
    assert abs(answer - (99 + 0.5) / 100) < 1e-3


def test_ragged_holdout_records_are_read_one_by_one() -> None:
    # A record of another length is a record on which a query fails (the middle of the
    # bounds), not a refusal of the whole holdout.
    holdout = [[1.0, 1.0]] * 99 + [[1.0]]
    t = Thresholdout(np.zeros((100, 2)), holdout, threshold=0.01, sigma=1e-6, budget=1, rng=0)
    answer = t.query(lambda r: r[1])
    assert abs(answer - (99 + 0.5) / 100) < 1e-3
