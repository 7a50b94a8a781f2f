"""Attacks on dpkit's row hash: a 128-bit integer column (a unit id, a key or a value).

The specification encodes an integer "modulo 2**64"; the code cast every integer column to
Int64 strictly, so an ``Int128``/``UInt128`` column holding one value beyond ``2**63`` made the
release fail with Polars' own error, which quotes the value: whether a release succeeds depended
on (and its message echoed) one private record.
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, PureDP
from dpkit.frame._rowhash import row_hash

KEY = (0x0706050403020100, 0x0F0E0D0C0B0A0908)


@pytest.mark.parametrize("dtype", [pl.Int128, pl.UInt128])
def test_wide_integers_hash_whatever_their_value(dtype: pl.DataType) -> None:
    small = pl.Series([1, 2, 3], dtype=dtype)
    big = pl.Series([1, 2, 2**100], dtype=dtype)
    hs, hb = row_hash([small], KEY), row_hash([big], KEY)
    assert (hs[:2] == hb[:2]).all()  # a row's hash depends on that row only
    # distinct values that agree modulo 2**64 are told apart (no forced tie in bounding)
    wide = pl.Series([5, 5 + 2**64, 5 - 2**64 if dtype == pl.Int128 else 5 + 2**65], dtype=dtype)
    assert len({int(v) for v in row_hash([wide], KEY)}) == 3


def test_release_with_a_huge_int128_unit_succeeds() -> None:
    """One unit id beyond 2**63 must neither fail the release nor be echoed."""
    rows = []
    for big in (7, 2**100):
        df = pl.DataFrame({"u": pl.Series([1, 2, big], dtype=pl.Int128), "x": [1.0, 2.0, 3.0]})
        acct = Accountant(PureDP(epsilon=5.0))
        q = dpf.Query(df, privacy_unit="u").agg(dpf.count(alias="n"), max_rows=1)
        out = q.release(epsilon=1.0, accountant=acct, rng=0)
        rows.append(out)
        assert len(acct.ledger) == 1
