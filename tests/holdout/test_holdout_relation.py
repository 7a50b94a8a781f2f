"""Thresholdout's charge declares replacement of one holdout record.

Its sensitivity Δ = (high − low)/n_h takes the holdout's size as public (its docstring's
guarantee: replace one holdout record), so its ε is a function of n_h: two add/remove
neighbours of the holdout are charged different ε. The event declared no relation, so an
accountant summed it with add/remove releases into a total that held under neither.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpkit as dp
import dpkit.stats as st
from dpkit.accounting import Accountant, Neighbouring, PureDP
from dpkit.errors import PrivacyParameterError
from dpkit.holdout import Thresholdout

_KW = {"threshold": 0.1, "sigma": 0.05, "budget": 2, "rng": 0}


def test_thresholdout_is_replace_one_and_refused_beside_add_remove_releases() -> None:
    g = np.random.default_rng(0)
    train, holdout = g.random(100), g.random(100)
    # its price depends on the holdout's size: an add/remove neighbour is priced differently
    one_more = Thresholdout(train, np.append(holdout, 0.5), **_KW)  # type: ignore[arg-type]
    t = Thresholdout(train, holdout, **_KW)  # type: ignore[arg-type]
    assert t.event.epsilon != one_more.event.epsilon
    assert t.event.neighbouring is Neighbouring.REPLACE
    acct = Accountant(PureDP(epsilon=10.0))
    st.count(np.ones(10), epsilon=0.5, accountant=acct, rng=dp.random.seeded(1))
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        Thresholdout(train, holdout, accountant=acct, **_KW)  # type: ignore[arg-type]
    assert len(acct.ledger) == 1
    # beside replace-one releases it composes
    other = Accountant(PureDP(epsilon=10.0))
    Thresholdout(train, holdout, accountant=other, **_KW)  # type: ignore[arg-type]
    st.sum(np.ones(10), bounds=(0.0, 1.0), epsilon=0.5, accountant=other,
           rng=dp.random.seeded(2), neighbouring=Neighbouring.REPLACE)  # fmt: skip
    assert len(other.ledger) == 2
