"""With each row its own unit, the hidden identity is no row number (a position).

With ``privacy_unit=None`` the identity was a row number (``with_row_index``). A check on the
names an expression spells refused ``pl.col("__dpkit_unit")``, but a regex, ``pl.nth(0)``,
``pl.first()`` or a dtype selector expanded to it without spelling it: ``filter(pl.nth(0) % 2 ==
0)`` kept the even-numbered rows, so removing the first row swapped every kept row for another
(a sum over the kept rows moved from 0 to 10 rows' worth: a deterministic distinguisher). Such
steps are now refused (they cannot be shown row-wise), and the identity itself is a function of
the row's own content and its occurrence among identical rows: removing one row removes one
identity and leaves every other row's as it was, whatever the data order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import polars as pl
import polars.selectors as cs
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError
from dpkit.frame._table import UNIT_ID

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


def _identities(df: pl.DataFrame) -> Counter[int]:
    table = dpf.Query(df, privacy_unit=None)._table.data.collect()
    return Counter(table[UNIT_ID].to_list())


def test_removing_one_row_removes_one_identity() -> None:
    base = _base()
    for i in (0, 1, N // 2, N - 1):
        neighbour = pl.concat([base[:i], base[i + 1 :]])
        diff = _identities(base) - _identities(neighbour)
        assert sum(diff.values()) == 1 and not (_identities(neighbour) - _identities(base))


def test_the_identity_does_not_depend_on_row_order() -> None:
    base = _base().with_columns(s=pl.Series([str(i % 3) for i in range(N)]))
    assert _identities(base) == _identities(base.reverse())
    assert len(_identities(base)) == N  # identical rows still get distinct identities
