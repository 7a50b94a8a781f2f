"""A step that reads the hidden identity through a selector sees nothing position-dependent.

With ``privacy_unit=None`` the identity was a row number (``with_row_index``). A check on the
names an expression spells refused ``pl.col("__dpkit_unit")``, but a regex, ``pl.nth(0)``,
``pl.first()`` or a dtype selector expand to it without spelling it: ``filter(pl.nth(0) % 2 ==
0)`` kept the even-numbered rows, so removing the first row swapped every kept row for another
(a sum over the kept rows moved from 0 to 10 rows' worth: a deterministic distinguisher). The
identity with each row its own unit is now a function of the row's own content and its
occurrence among identical rows: whatever a step reads, removing one row changes one row.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import polars.selectors as cs
import pytest

import dpkit.frame as dpf

Step = Callable[[dpf.Query], dpf.Query]
N = 20


def _sum(df: pl.DataFrame, step: Step) -> int:
    q = step(dpf.Query(df, privacy_unit=None))
    out = q.agg(dpf.sum("x", bounds=(0, 1))).bounded_aggregates(seed=1)
    # the fixed-point sum: a row holding 1 adds exactly 2^k (the clip at the bound), 0 adds 0
    return int(out.drop("__all", "__rows", "__units", "__weight").row(0)[0])


READS: dict[str, Step] = {
    "regex": lambda q: q.filter(pl.col("^__dpkit_.*$") % 2 == 0),
    "nth": lambda q: q.filter(pl.nth(0) % 2 == 0),
    "first": lambda q: q.filter(pl.first() % 2 == 0),
    "selector": lambda q: q.filter(pl.all_horizontal(cs.unsigned_integer() % 2 == 0)),
    "derived": lambda q: q.with_columns(y=pl.col("^__dpkit_unit$") % 2).filter(pl.col("y") == 0),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_reading_the_identity_moves_one_row(name: str) -> None:
    step = READS[name]
    base = pl.DataFrame({"x": [float(i % 2) for i in range(N)]})  # 0, 1, 0, 1, ...
    neighbour = base[1:]  # the first row removed: every later row number shifts by one
    one = _sum(pl.DataFrame({"x": [1.0]}), lambda q: q)  # one row's worth, 2^k
    assert one > 0
    moved = abs(_sum(base, step) - _sum(neighbour, step))
    assert moved <= one, f"{name}: removing one row moved the sum by {moved / one:g} rows"


def test_reading_the_identity_does_not_depend_on_row_order() -> None:
    base = pl.DataFrame({"x": [float(i % 2) for i in range(N)]})
    step = READS["nth"]
    assert _sum(base, step) == _sum(base.reverse(), step)
