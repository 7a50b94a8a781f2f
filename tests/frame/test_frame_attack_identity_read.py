"""With each row its own unit, no step can read the hidden identity (a row number).

With ``privacy_unit=None`` the identity is a row number (``with_row_index``). A check on the
names an expression spells refused ``pl.col("__dpkit_unit")``, but a regex, ``pl.nth(0)``,
``pl.first()`` or a dtype selector expanded to it without spelling it: ``filter(pl.nth(0) % 2 ==
0)`` kept the even-numbered rows, so removing the first row swapped every kept row for another
(a sum over the kept rows moved from 0 to 10 rows' worth: a deterministic distinguisher). Such
steps are now refused when they are added, from the expression alone (they cannot be shown
row-wise without the table: see ``check_rowwise``).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import polars.selectors as cs
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError

Step = Callable[[dpf.Query], dpf.Query]
N = 20

READS: dict[str, Step] = {
    "regex": lambda q: q.filter(pl.col("^__dpkit_.*$") % 2 == 0),
    "nth": lambda q: q.filter(pl.nth(0) % 2 == 0),
    "first": lambda q: q.filter(pl.first() % 2 == 0),
    "last": lambda q: q.filter(pl.last() % 2 == 0),
    "selector": lambda q: q.filter(pl.all_horizontal(cs.unsigned_integer() % 2 == 0)),
    "derived": lambda q: q.with_columns(y=pl.col("^__dpkit_unit$") % 2).filter(pl.col("y") == 0),
}


def _base() -> pl.DataFrame:
    return pl.DataFrame({"x": [float(i % 2) for i in range(N)]})  # 0, 1, 0, 1, ...


@pytest.mark.parametrize("name", sorted(READS))
def test_a_step_reading_the_identity_unnamed_is_refused(name: str) -> None:
    for df in (_base(), _base()[1:]):  # the same outcome on both neighbours, before any data
        with pytest.raises(DataError, match="row-wise"):
            READS[name](dpf.Query(df, privacy_unit=None))
