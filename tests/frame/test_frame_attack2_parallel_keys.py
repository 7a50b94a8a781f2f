"""Partition keys that the partition column cannot hold were charged for, then every part failed.

``partition_by("region", keys=[1, 2])`` on a text column was accepted, ``Accountant.parallel``
charged the budget, and each part's release then failed (Polars cannot compare text with an
integer): a budget paid for nothing, against "validate before charge". The keys are now
compared with the column on an empty frame of its type (the schema only, never the data)
when the parts are made.
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import dpkit as dp
import dpkit.frame as dpf
from dpkit.errors import DataError


@pytest.mark.parametrize(
    ("values", "keys"),
    [(["n", "s"], [1, 2]), ([1, 2], ["n", "s"]), ([dt.date(2020, 1, 1)] * 2, ["2020-01-01"])],
)
def test_keys_of_another_type_are_refused_before_the_charge(
    values: list[object], keys: list[object]
) -> None:
    df = pl.DataFrame({"u": [1, 2], "region": values})
    acct = dp.Accountant(dp.PureDP(epsilon=1.0))
    with pytest.raises(DataError, match="keys"):
        acct.parallel(
            dpf.Query(df, privacy_unit="u").partition_by("region", keys=keys),
            budget=dp.PureDP(epsilon=0.5),
        )
    assert not acct.ledger
