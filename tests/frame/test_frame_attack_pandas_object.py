"""A pandas object column is read by its dtype, never by its values.

``pl.from_pandas`` infers an object column's type from its values: with one record holding a
string, a Decimal, a list or an int beyond 64 bits among numbers the conversion failed, so
``Query(df, ...)`` refused (before any charge) exactly when such a record was present — a free
membership oracle on that record. Every object column of the private table is now text (each
value's ``str``; None and NaN are missing), whatever it holds, so whether the query succeeds and
which error it raises are the same on both neighbours.
"""

from __future__ import annotations

import decimal
from typing import Any

import pandas as pd
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, PureDP


def _outcome(df: pd.DataFrame, agg: Any) -> str:
    acct = Accountant(PureDP(epsilon=10.0))
    try:
        q = dpf.Query(df, privacy_unit="user").group_by(
            "key", public_keys=["a", "b"], max_groups=1, max_rows=1
        )
        q.agg(agg).release(epsilon=1.0, accountant=acct)
    except Exception as exc:  # the type is the outcome; nothing may have been charged
        assert not acct.ledger
        return type(exc).__name__
    return "ok"


ODD: list[Any] = ["secret", decimal.Decimal("1.5"), [1], 2**70, 1.5, True, None]


@pytest.mark.parametrize("column", ["user", "key", "x"])
@pytest.mark.parametrize("odd", ODD, ids=[type(v).__name__ for v in ODD])
def test_one_odd_object_value_does_not_change_the_outcome(column: str, odd: Any) -> None:
    # a null unit included: the row is dropped, never refused (a null unit is no unit)
    base = pd.DataFrame({"user": [1, 2], "key": ["a", "b"], "x": [1.0, 2.0]})
    base[column] = base[column].astype(object)
    neighbour = pd.concat(
        [base, pd.DataFrame({"user": [3], "key": ["a"], "x": [1.0]})], ignore_index=True
    ).astype(base.dtypes.to_dict())  # the same schema as the base: only the record differs
    neighbour.at[2, column] = odd
    for agg in (dpf.count(), dpf.count_units(), dpf.sum("x", bounds=(0, 5))):
        assert _outcome(base, agg) == _outcome(neighbour, agg), (column, odd)


def test_an_object_column_is_text_and_values_are_never_echoed() -> None:
    df = pd.DataFrame(
        {"user": [1, 2], "key": ["a", "b"], "x": pd.Series([1.0, "v-9"], dtype=object)}
    )
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=["a", "b"], max_groups=1, max_rows=1
    )
    with pytest.raises(Exception, match="must be numeric") as info:
        q.agg(dpf.sum("x", bounds=(0, 5))).release(epsilon=1.0)
    assert "v-9" not in str(info.value)
