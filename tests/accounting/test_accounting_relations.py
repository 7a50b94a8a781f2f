"""Every basic event can state the neighbouring relation it holds under, and every composition
point checks it.

Before, only subsampled events declared a relation: a replace-one release (a statistic with
``neighbouring=REPLACE``, whose sensitivities are the replacement ones) was a plain event and
composed with add/remove releases in one accountant, or in the parts of a parallel
composition, into a total that holds under neither relation.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit as dp
import dpkit.frame as dpf
import dpkit.stats as st
from dpkit.accounting import (
    Accountant,
    ApproxDP,
    ComposedEvent,
    DiscreteLaplaceEvent,
    DisjointParts,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    PoissonSubsampledEvent,
    PureDP,
    PureDPEvent,
    ZCDPEvent,
    compose,
    epsilon_of,
)
from dpkit.errors import PrivacyParameterError

ADD, REP = Neighbouring.ADD_REMOVE, Neighbouring.REPLACE
X = np.linspace(0.0, 1.0, 200)


def test_basic_events_carry_a_validated_relation_that_does_not_change_their_cost() -> None:
    for make in (
        lambda r: GaussianEvent(sigma=2.0, neighbouring=r),
        lambda r: LaplaceEvent(scale=2.0, neighbouring=r),
        lambda r: DiscreteLaplaceEvent(scale=2.0, neighbouring=r),
        lambda r: ExponentialEvent(epsilon=0.5, neighbouring=r),
        lambda r: PureDPEvent(epsilon=0.5, neighbouring=r),
        lambda r: ZCDPEvent(rho=0.1, neighbouring=r),
    ):
        plain, rep = make(None), make(REP)
        assert rep.neighbouring is REP and plain.neighbouring is None
        assert plain != rep  # a relation is part of what the event is
        assert epsilon_of(plain, delta=1e-6) == epsilon_of(rep, delta=1e-6)
        with pytest.raises(PrivacyParameterError, match="neighbouring must be"):
            make("replace")
    assert repr(GaussianEvent(sigma=2.0)) == "GaussianEvent(sigma=2.0, sensitivity=1.0)"
    assert "neighbouring=Neighbouring.REPLACE" in repr(GaussianEvent(sigma=2.0, neighbouring=REP))


def test_plain_events_declaring_different_relations_are_refused_before_any_charge() -> None:
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-6))
    acct.charge(GaussianEvent(sigma=4.0, sensitivity=2.0, neighbouring=REP), label="replace")
    spent = acct.spent
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        acct.charge(LaplaceEvent(scale=10.0, neighbouring=ADD))
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        acct.can_afford(PoissonSubsampledEvent(GaussianEvent(sigma=4.0), sampling_rate=0.1))
    assert acct.spent == spent and len(acct.ledger) == 1
    acct.charge(LaplaceEvent(scale=10.0))  # undeclared: the caller's relation
    with pytest.raises(PrivacyParameterError):  # and inside one composition too
        compose(
            [GaussianEvent(sigma=4.0, neighbouring=REP), LaplaceEvent(scale=1.0, neighbouring=ADD)]
        )
    with pytest.raises(PrivacyParameterError):  # a subsampling bound fixes its inner relation
        PoissonSubsampledEvent(GaussianEvent(sigma=4.0, neighbouring=REP), sampling_rate=0.1)


def test_a_replace_one_statistic_and_an_add_remove_one_are_refused_in_one_accountant() -> None:
    acct = Accountant(PureDP(epsilon=5.0))
    st.sum(
        X,
        bounds=(0.0, 1.0),
        epsilon=0.5,
        accountant=acct,
        rng=dp.random.seeded(1),
        neighbouring=REP,
    )
    assert len(acct.ledger) == 1
    for release in (
        lambda: st.mean(
            X, bounds=(0.0, 1.0), epsilon=0.5, accountant=acct, rng=dp.random.seeded(2)
        ),
        lambda: st.count(X, epsilon=0.5, accountant=acct, rng=dp.random.seeded(3)),
        lambda: st.histogram(
            ["a", "b"], categories=["a", "b"], epsilon=0.5, accountant=acct, rng=dp.random.seeded(4)
        ),
        lambda: st.quantile(
            X, 0.5, bounds=(0.0, 1.0), epsilon=0.5, accountant=acct, rng=dp.random.seeded(5)
        ),
    ):
        with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
            release()
    assert len(acct.ledger) == 1 and acct.spent.epsilon <= 0.5
    # the same relation composes; and the statistics' events say which relation they are for
    r = st.mean(
        X,
        bounds=(0.0, 1.0),
        epsilon=0.5,
        accountant=acct,
        rng=dp.random.seeded(6),
        neighbouring=REP,
    )
    assert len(acct.ledger) == 2
    leaves = r.event.events if isinstance(r.event, ComposedEvent) else (r.event,)
    assert all(e.neighbouring is REP for e in leaves)


def test_relabelling_refuses_the_other_relation() -> None:
    from dpkit.accounting._relation import holding_under

    e = LaplaceEvent(scale=2.0, sensitivity=2.0, neighbouring=REP)
    assert holding_under(e, REP) is e
    with pytest.raises(PrivacyParameterError):
        holding_under(e, ADD)
    with pytest.raises(PrivacyParameterError):
        holding_under(PoissonSubsampledEvent(GaussianEvent(sigma=1.0), sampling_rate=0.5), REP)


class _Parts(DisjointParts):
    """Two parts whose accountants are handed back (to charge them directly)."""

    @property
    def keys(self) -> tuple[Hashable, ...]:
        return ("a", "b")

    def bind(self, key: Hashable, accountant: Accountant) -> Any:
        return accountant


DF = pl.DataFrame({"u": [1, 2, 3, 4], "k": ["a", "b", "a", "b"], "x": [0.1, 0.2, 0.3, 0.4]})


def test_parallel_parts_check_relations_with_the_parent() -> None:
    acct = Accountant(PureDP(epsilon=3.0))
    parts = acct.parallel(_Parts(), budget=PureDP(epsilon=1.0))
    assert acct.ledger[-1].event.neighbouring is ADD  # parallel composition is add/remove
    child = parts["a"]
    # a replace-one release inside a part: a replaced unit may move to another part
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        child.charge(LaplaceEvent(scale=2.0, sensitivity=2.0, neighbouring=REP))
    assert not child.ledger and child.spent.epsilon == 0
    child.charge(LaplaceEvent(scale=4.0, neighbouring=ADD))
    # a parent already holding replace-one charges refuses the parallel composition itself
    other = Accountant(PureDP(epsilon=3.0))
    other.charge(LaplaceEvent(scale=4.0, sensitivity=2.0, neighbouring=REP))
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        other.parallel(_Parts(), budget=PureDP(epsilon=1.0))
    assert len(other.ledger) == 1


def test_a_replace_one_table_is_refused_parallel_composition_before_its_charge() -> None:
    acct = Accountant(PureDP(epsilon=3.0))
    q = dpf.Query(DF, privacy_unit="u", neighbouring=REP)
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        acct.parallel(q.partition_by("k", keys=["a", "b"]), budget=PureDP(epsilon=1.0))
    assert not acct.ledger
    # an add/remove table's parts are paid once and release under the parent's relation
    q = dpf.Query(DF, privacy_unit="u")
    parts = acct.parallel(q.partition_by("k", keys=["a", "b"]), budget=PureDP(epsilon=1.0))
    parts["a"].agg(dpf.count(), max_rows=2).release(epsilon=0.5, rng=dp.random.seeded(1))
    assert len(acct.ledger) == 1


def test_split_children_share_the_parents_relation() -> None:
    acct = Accountant(PureDP(epsilon=2.0))
    acct.charge(LaplaceEvent(scale=4.0, neighbouring=ADD))
    a, b = acct.split(2)
    with pytest.raises(PrivacyParameterError):
        b.charge(LaplaceEvent(scale=4.0, sensitivity=2.0, neighbouring=REP))
    assert not b.ledger and not a.ledger
