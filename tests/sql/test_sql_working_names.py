"""A catalog column named like one of the bounding's working columns is refused before any charge.

Grouped by a column named ``__all`` (the constant key of a query without GROUP BY), the frame
plan was bounded as one without keys: ``max_groups`` was never applied, and the release then
failed after its charge, with the key column dropped.
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.sql as dps
from dpkit.accounting import Accountant, PureDP
from dpkit.errors import DataError

KEYS = [f"g{i}" for i in range(10)]


def test_group_by_a_column_named_like_the_constant_key_is_refused_before_the_charge() -> None:
    # one person with one row in each of 10 groups, max_groups = 1
    df = pl.DataFrame({"pid": [7] * 10, "__all": KEYS})
    cat = dps.Catalog(
        [
            dps.Table(
                "t",
                [dps.Column("pid", "int"), dps.Column("__all", "string", keys=KEYS)],
                privacy_unit="pid",
                max_groups=1,
                max_rows=1,
            )
        ]
    )
    acct = Accountant(PureDP(epsilon=1.0))
    with pytest.raises(DataError, match="working columns"):
        dps.query(
            "SELECT __all, COUNT(*) AS n FROM t GROUP BY __all", {"t": df}, catalog=cat,
            epsilon=1.0, accountant=acct, rng=1,
        )  # fmt: skip
    assert acct.spent.epsilon == 0.0
