"""A local randomizer's charge declares replacement of one user's value.

``randomize`` releases one report per user, so the number of users is released exactly: two
datasets differing by one added user give batches of different lengths, an event of probability
one under one and zero under the other, and no ε holds under add/remove. Its event declared no
relation, so an accountant summed it with add/remove releases (a count) into a total that held
under neither relation. It now declares ``Neighbouring.REPLACE``, and the mix is refused.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpkit as dp
import dpkit.stats as st
from dpkit.accounting import Accountant, Neighbouring, PureDP
from dpkit.errors import PrivacyParameterError
from dpkit.local import GRR, DuchiMean, VectorMean


def test_a_batch_of_reports_reveals_the_number_of_users() -> None:
    # the add/remove neighbours D and D ∪ {u}: the lengths differ whatever the coins
    d = [0, 1, 2, 1]
    grr = GRR(epsilon=1.0, k=3)
    assert len(grr.randomize(d, rng=dp.random.seeded(1))) == 4
    assert len(grr.randomize([*d, 2], rng=dp.random.seeded(1))) == 5


@pytest.mark.parametrize(
    "randomizer",
    [GRR(epsilon=1.0, k=3), DuchiMean(epsilon=1.0), VectorMean(epsilon=1.0, d=2)],
    ids=["oracle", "numeric", "vector"],
)
def test_local_reports_and_add_remove_releases_are_refused_in_one_accountant(
    randomizer: object,
) -> None:
    assert randomizer.event.neighbouring is Neighbouring.REPLACE  # type: ignore[attr-defined]
    acct = Accountant(PureDP(epsilon=3.0))
    st.count(np.ones(10), epsilon=0.5, accountant=acct, rng=dp.random.seeded(2))
    values = [[0.1, 0.2]] * 4 if isinstance(randomizer, VectorMean) else [0, 1, 1, 0]
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        randomizer.randomize(values, rng=dp.random.seeded(3), accountant=acct)  # type: ignore[attr-defined]
    assert len(acct.ledger) == 1
    # with replace-one releases (the number of users public) they compose
    other = Accountant(PureDP(epsilon=3.0))
    randomizer.randomize(values, rng=dp.random.seeded(4), accountant=other)  # type: ignore[attr-defined]
    st.sum(np.ones(10), bounds=(0.0, 1.0), epsilon=0.5, accountant=other,
           rng=dp.random.seeded(5), neighbouring=Neighbouring.REPLACE)  # fmt: skip
    assert len(other.ledger) == 2


def test_randomized_response_batches_declare_replacement_at_the_charge() -> None:
    from dpkit.mechanisms import RandomizedResponse

    rr = RandomizedResponse(epsilon=1.0)
    assert rr.randomize([True, False, True], rng=dp.random.seeded(1)).shape == (3,)
    acct = Accountant(PureDP(epsilon=3.0))
    st.count(np.ones(10), epsilon=0.5, accountant=acct, rng=dp.random.seeded(2))
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        rr.randomize([True, False, True], rng=dp.random.seeded(3), accountant=acct)
    assert len(acct.ledger) == 1
