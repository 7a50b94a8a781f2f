"""Review of the core hardening (issue 13 part A): emptiness still refused in one container."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpkit.stats as st
from dpkit.accounting import Accountant, PureDP
from dpkit.errors import DataError

BINS_2D = [[0.0, 0.5, 1.0], [0.0, 1.0]]


@pytest.mark.parametrize("empty", [[], (), np.empty(0), np.empty((0, 2))])
def test_empty_multicolumn_histogram_is_answered_in_any_container(empty: Any) -> None:
    # A non-empty list of pairs is (n, 2), but an empty list is shape (0,) and was read as one
    # column, so the 2-d bins were refused: under add/remove the refusal told {} from {x}.
    acct = Accountant(PureDP(epsilon=1.0))
    r = st.histogram(empty, bins=BINS_2D, epsilon=1.0, accountant=acct, rng=0)
    assert r.value.shape == (2, 1)
    assert acct.spent.epsilon > 0  # answered (and paid for) like any other dataset
    one = st.histogram([[0.2, 0.3]], bins=BINS_2D, epsilon=1.0, rng=0)
    assert one.value.shape == r.value.shape


def test_ragged_bins_for_one_column_are_a_data_error() -> None:
    # np.ndim on ragged edges raised a bare ValueError
    with pytest.raises(DataError):
        st.histogram([0.5], bins=[[0.0, 1.0], [0.0, 0.5, 1.0]], epsilon=1.0, rng=0)
    r = st.histogram([[0.5, 0.5]], bins=[[0.0, 1.0], [0.0, 0.5, 1.0]], epsilon=1.0, rng=0)
    assert r.value.shape == (1, 2)


def test_empty_one_column_histogram_still_works() -> None:
    assert st.histogram([], bins=[0.0, 0.5, 1.0], epsilon=1.0, rng=0).value.shape == (2,)


@pytest.mark.parametrize("secret", ["salary=91234.5 (alice)", b"salary=91234.5 (alice)"])
def test_errors_do_not_give_the_length_of_a_text_record(secret: Any) -> None:
    # "got dtype <U22" told the length of the longest record
    with pytest.raises(DataError) as info:
        st.sum([secret], bounds=(0.0, 1.0), epsilon=1.0)
    assert "22" not in str(info.value)
