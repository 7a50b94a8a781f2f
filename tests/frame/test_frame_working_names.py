"""Keys and aggregated columns named like the bounding's working columns are refused.

The bounding adds its own columns (the hashes, the per-unit figures, the constant key of a query
without GROUP BY, ...) beside the keys and values. A key named like one of them was overwritten
or taken for it: grouped by a column named ``__all``, a query was bounded as one without keys,
so its ``max_groups`` was never applied (a person counted in every group), and the split of
whole units wrote a key that no row had. Such names are refused from the schema, before any
charge.
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, PureDP
from dpkit.errors import DataError
from dpkit.frame._pipeline import WORKING

# one person with one row in each of 10 groups: max_groups = 1 lets one group count them
ONE_PERSON = pl.DataFrame({"user": [7] * 10, "k": [f"g{i}" for i in range(10)], "x": [1.0] * 10})


@pytest.mark.parametrize("l1", [None, 5])
def test_a_key_named_like_the_constant_key_is_refused_before_any_charge(l1: int | None) -> None:
    df = ONE_PERSON.rename({"k": "__all"})
    q = dpf.Query(df, privacy_unit="user")
    acct = Accountant(PureDP(epsilon=1.0))
    with pytest.raises(DataError, match="working columns"):
        gq = q.group_by(
            "__all", public_keys=[f"g{i}" for i in range(10)], max_rows=1, max_groups=1,
            max_rows_per_unit=l1,
        ).agg(dpf.count())  # fmt: skip
        gq.release(epsilon=1.0, accountant=acct, rng=1)
    assert acct.spent.epsilon == 0.0
    # the same table under a plain name: the person counts in one group only
    plain = dpf.Query(ONE_PERSON, privacy_unit="user")
    ok = plain.group_by("k", max_rows=1, max_groups=1, max_rows_per_unit=l1).agg(dpf.count())
    rows = ok.bounded_aggregates(seed=1)
    assert int(rows["__rows"].sum()) == 1


@pytest.mark.parametrize("name", [*sorted(WORKING), "__y0", "__y12"])
def test_every_working_name_is_refused_as_a_key_or_a_value(name: str) -> None:
    q = dpf.Query(ONE_PERSON.rename({"k": name, "x": f"{name}x"}), privacy_unit="user")
    with pytest.raises(DataError, match="working columns"):
        q.group_by(name, max_rows=1, max_groups=1).agg(dpf.count())
    q = dpf.Query(ONE_PERSON.rename({"x": name}), privacy_unit="user")
    with pytest.raises(DataError, match="working columns"):
        q.group_by("k", max_rows=1, max_groups=1).agg(dpf.sum(name, bounds=(0.0, 1.0)))
    with pytest.raises(DataError, match="working columns"):
        q.agg(dpf.mean(name, bounds=(0.0, 1.0)), max_rows=1)


def test_a_key_named_like_a_measure_column_is_refused() -> None:
    # a value's fixed-point column is named from the measure; a key of that name was overwritten
    s = dpf.sum("x", bounds=(0.0, 1.0))
    name = s.measures()[0].name
    q = dpf.Query(ONE_PERSON.rename({"k": name}), privacy_unit="user")
    with pytest.raises(DataError, match="working columns"):
        q.group_by(name, max_rows=1, max_groups=1).agg(s)
