"""Identity before transformation: a row's and a unit's identity are fixed when the Query is made.

A join with a public table that repeats a key makes copies of a private row; a column expression
(or a join output moved onto the unit's name) can overwrite the unit column. Neither may make one
unit count as several: copies stay one unit's rows and the contribution bounds count them, and
the unit is the one the table had when the query was made.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import DataError

COPIES = 1000  # the public table repeats the join key this many times


def _public(copies: int = COPIES) -> pl.DataFrame:
    return pl.DataFrame({"k": [0] * copies, "copy": list(range(copies)), "g": ["a"] * copies})


def _rows(users: list[int], txn0: int = 0) -> pl.DataFrame:
    n = len(users)
    return pl.DataFrame({"user": users, "txn": list(range(txn0, txn0 + n)), "k": [0] * n})


def _count(q: dpf.Query, **bounds: Any) -> int:
    bounds = {"max_groups": 1, "max_rows": 1} | bounds
    g = q.group_by("g", public_keys=["a"], **bounds).agg(dpf.count())
    totals = g.bounded_aggregates()
    assert isinstance(totals, pl.DataFrame)
    return int(totals["__rows"].sum())


def _moved(build: Any, base: pl.DataFrame, extra: pl.DataFrame, **bounds: Any) -> int:
    """How far one more unit (``extra``) moves the bounded count."""
    return _count(build(pl.concat([base, extra])), **bounds) - _count(build(base), **bounds)


# -- 1. fan-out joins ------------------------------------------------------------------------


def test_fanout_join_without_unit_is_refused_before_anything_runs() -> None:
    """Each row its own unit: a public table repeating a join key would make each copy a unit
    (one added row moved the count by 1000). Refused, from the public table alone."""
    acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-6))
    for private in (_rows([1, 2, 3]).drop("user"), _rows([]).drop("user")):
        with pytest.raises(DataError, match="repeats join key"):
            dpf.Query(private, privacy_unit=None).join(_public(), on="k")
    assert not acct.ledger


def test_fanout_refusal_reads_only_the_public_table() -> None:
    # the same outcome whatever the private table holds (even no row matching the key)
    for private in (_rows([1]).drop("user"), _rows([1]).drop("user").with_columns(k=pl.lit(5))):
        with pytest.raises(DataError):
            dpf.Query(private, privacy_unit=None).join(_public(2), on="k")
    # a unique-key public table is fine, and nulls in the public keys never match
    pub = pl.DataFrame({"k": [0, None, None], "g": ["a", "b", "c"]})
    q = dpf.Query(_rows([1, 2]).drop("user"), privacy_unit=None).join(pub, on="k")
    assert _count(q) == 2


def test_fanout_join_with_unit_counts_copies_as_one_units_rows() -> None:
    """With a declared unit, the m copies of one row are that unit's rows: L∞ = 1 keeps one."""

    def build(df: pl.DataFrame) -> dpf.Query:
        return dpf.Query(df, privacy_unit="user").join(_public(), on="k")

    assert _moved(build, _rows(list(range(20))), _rows([999])) == 1
    assert _moved(build, _rows(list(range(20))), _rows([999]), max_rows=3) == 3


def test_fanout_copies_cannot_become_units_through_a_join_output() -> None:
    """The join's per-copy column moved onto the unit's name: each copy would be a unit."""
    keys = [k for k in range(21) for _ in range(COPIES)]
    public = pl.DataFrame({"k": keys, "copy": range(len(keys)), "g": ["a"] * len(keys)})

    def build(df: pl.DataFrame) -> dpf.Query:
        q = dpf.Query(df, privacy_unit="user").join(public, on="k")
        return q.with_columns(user=pl.col("copy"))

    base = _rows(list(range(20))).with_columns(k=pl.col("user") + 1)
    assert _moved(build, base, _rows([999])) == 1


# -- 2. rebinding the privacy unit -----------------------------------------------------------


def _one_user_many_rows(rows: int = 500) -> tuple[pl.DataFrame, pl.DataFrame]:
    base = _rows(list(range(20)))
    return base, _rows([999] * rows, txn0=10_000)


def _public_one() -> pl.DataFrame:
    return pl.DataFrame({"k": [0], "g": ["a"], "public_id": [7]})


REBIND: list[tuple[str, Any]] = [
    ("keyword", lambda q: q.with_columns(user=pl.col("txn"))),
    ("alias", lambda q: q.with_columns(pl.col("txn").alias("user"))),
    ("struct field", lambda q: q.with_columns(pl.struct("txn").struct.field("txn").alias("user"))),
    (
        "join output",
        lambda q: q.join(
            pl.DataFrame({"txn": range(20_000), "uid": range(20_000)}), on="txn"
        ).with_columns(user=pl.col("uid")),
    ),
    (
        "join output named like the unit",
        lambda q: q.join(
            pl.DataFrame({"txn": range(20_000), "user": range(20_000)}), on="txn"
        ).with_columns(user=pl.col("user_right")),
    ),
    ("filter then rebind", lambda q: q.filter(pl.col("txn") >= 0).with_columns(user=pl.col("txn"))),
]


@pytest.mark.parametrize(("what", "step"), REBIND, ids=[r[0] for r in REBIND])
def test_rebinding_the_unit_column_does_not_rebind_the_unit(what: str, step: Any) -> None:
    """One user with 500 rows moved the count by 500 once its unit column was overwritten."""

    def build(df: pl.DataFrame) -> dpf.Query:
        q = step(dpf.Query(df, privacy_unit="user"))
        return q.join(_public_one(), on="k")

    base, extra = _one_user_many_rows()
    assert _moved(build, base, extra) == 1  # L∞ = L0 = 1: one row of the user's 500
    assert _moved(build, base, extra, max_rows=4) == 4


def test_rebinding_through_a_wildcard_is_refused() -> None:
    """Several columns in one ``pl.col`` cannot be shown row-wise without the table: refused."""
    q = dpf.Query(_rows([1]), privacy_unit="user")
    with pytest.raises(DataError, match="row-wise"):
        q.with_columns(pl.col("txn", "user").exclude("user").alias("user"))


def test_the_unit_column_may_be_rewritten_but_not_the_identity() -> None:
    q = dpf.Query(_rows([1, 1, 2]), privacy_unit="user")
    # the visible column is the user's to change; the bound is on the unit captured at first
    assert _count(q.with_columns(user=pl.lit(0)).join(_public_one(), on="k"), max_rows=5) == 3
    from dpkit.frame._table import RESERVED

    hidden = f"{RESERVED}unit"
    for step in (
        lambda q: q.with_columns(pl.lit(0).alias(hidden)),
        lambda q: q.with_columns(**{hidden: pl.col("txn")}),
        lambda q: q.with_columns(pl.all().cast(pl.Int64)),
        lambda q: q.join(pl.DataFrame({"k": [0], hidden: [1]}), on="k"),
        lambda q: q.join(pl.DataFrame({hidden: [0]}), on=hidden),
        # read: with each row its own unit the identity is a row number (not row-wise)
        lambda q: q.filter(pl.col(hidden) < 3),
        lambda q: q.with_columns(y=pl.col(hidden) % 2),
        lambda q: q.group_by(hidden, public_keys=[0], max_groups=1, max_rows=1),
        lambda q: q.agg(dpf.sum(hidden, bounds=(0, 9)), max_rows=1),
    ):
        with pytest.raises(DataError, match="reserved"):
            step(q)
    with pytest.raises(DataError, match="reserved"):
        dpf.Query(_rows([1]).with_columns(pl.lit(1).alias(hidden)), privacy_unit="user")


def test_missing_unit_column_is_refused_when_the_query_is_made() -> None:
    with pytest.raises(DataError, match="unknown"):
        dpf.Query(_rows([1]), privacy_unit="usr")
