"""dpkit's row hash is fixed by its specification, whatever the engine or its version.

Three checks: the SipHash-2-4 reference vectors (Aumasson and Bernstein 2012, key 00..0f, message
00 01 02 ...); a scalar implementation written here from the specification in
``dpkit.frame._rowhash`` against the vectorised one; and pinned outputs for rows of every
supported type under a fixed key, so that a change of Polars, NumPy or dpkit that moved any row's
hash (and so which rows bounding keeps) fails here. The Spark side of the same vectors is in
``test_frame_spark.py``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import struct

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError
from dpkit.frame._rowhash import SPEC_VERSION, row_hash, siphash24_words

KEY = (0x0706050403020100, 0x0F0E0D0C0B0A0908)  # the bytes 00..0f, as the reference vectors

# SipHash-2-4 of the messages 00 01 .. (len - 1) under KEY, from the reference implementation
REFERENCE = {
    0: 0x726FDB47DD0E0E31,
    8: 0x93F5F5799A932462,
    16: 0x3F2ACC7F57C29BDB,
    24: 0xB8AD50C6F649AF94,
    32: 0x7127512F72F27CCE,
}


def test_siphash_reference_vectors() -> None:
    msg = bytes(range(64))
    for length, expected in REFERENCE.items():
        words = [
            np.array([int.from_bytes(msg[8 * i : 8 * i + 8], "little")] * 3, dtype=np.uint64)
            for i in range(length // 8)
        ]
        got = siphash24_words(KEY, words, n=3)
        assert [int(v) for v in got] == [expected] * 3


# -- a scalar implementation, written from the module's specification ---------------------------
M64 = (1 << 64) - 1


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def _siphash24(key: tuple[int, int], data: bytes) -> int:
    k0, k1 = key
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D]
    v += [k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rnd() -> None:
        v[0] = (v[0] + v[1]) & M64
        v[1] = _rotl(v[1], 13) ^ v[0]
        v[0] = _rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & M64
        v[3] = _rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & M64
        v[3] = _rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & M64
        v[1] = _rotl(v[1], 17) ^ v[2]
        v[2] = _rotl(v[2], 32)

    tail = len(data) % 8
    blocks = [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data) - tail, 8)]
    blocks.append(int.from_bytes(data[len(data) - tail :], "little") | (len(data) & 0xFF) << 56)
    for m in blocks:
        v[3] ^= m
        rnd()
        rnd()
        v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _word(value: object, key: tuple[int, int]) -> int:
    if value is None:
        return 0
    if isinstance(value, bool | int):
        return int(value) & M64
    if isinstance(value, float):
        if value != value:
            return 0x7FF8000000000000
        return int.from_bytes(struct.pack("<d", value + 0.0), "little")
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days & M64
    assert isinstance(value, str)
    k = key[0].to_bytes(8, "little") + key[1].to_bytes(8, "little")
    d = hashlib.blake2b(value.encode(), digest_size=8, key=k).digest()
    return int.from_bytes(d, "little")


def _scalar_row_hash(row: tuple[object, ...], key: tuple[int, int]) -> int:
    mask = sum(1 << i for i, v in enumerate(row) if v is None)
    words = [_word(v, key) for v in row] + [mask]
    return _siphash24(key, b"".join(w.to_bytes(8, "little") for w in words))


def _rows() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "i": pl.Series([0, -1, 2**62, None, 7], dtype=pl.Int64),
            "f": pl.Series([0.0, -0.0, float("nan"), 1.5, None], dtype=pl.Float64),
            "s": pl.Series(["", "a", "é", None, "dpkit"], dtype=pl.String),
            "b": pl.Series([True, False, None, True, False]),
            "d": [
                dt.date(1970, 1, 1),
                dt.date(2024, 2, 29),
                None,
                dt.date(1969, 12, 31),
                dt.date(2000, 1, 1),
            ],
        }
    )


# Pinned under KEY (specification version 1): the rows of _rows(), all five columns
PINNED = [
    0xFB564684BE578AC1,
    0x166737BC7ABF07F1,
    0x68784F38C436932B,
    0x2B26E365AC0AA525,
    0xC1139D3CC81CA894,
]


def test_row_hash_matches_the_specification_and_pinned_vectors() -> None:
    assert SPEC_VERSION == 1
    df = _rows()
    got = [int(v) for v in row_hash(df.get_columns(), KEY)]
    assert got == [_scalar_row_hash(r, KEY) for r in df.iter_rows()]
    assert got == PINNED
    for name in df.columns:  # one column at a time too
        one = [int(v) for v in row_hash([df[name]], KEY)]
        assert one == [_scalar_row_hash((v,), KEY) for v in df[name].to_list()]
    other = [int(v) for v in row_hash(df.get_columns(), (KEY[0], KEY[1] ^ 1))]
    assert all(a != b for a, b in zip(got, other, strict=True))  # the key matters


def test_encoding_is_canonical_across_types() -> None:
    """The word is the value, not its storage: widths, signed zeros, NaN payloads and categorical
    storage do not change a hash; null differs from zero and from the empty string."""
    i64 = pl.Series([1, -5, None], dtype=pl.Int64)
    for t in (pl.Int8, pl.Int16, pl.Int32):
        assert (row_hash([i64.cast(t)], KEY) == row_hash([i64], KEY)).all()
    f = pl.Series([-0.0, 0.0, float("nan"), 2.5])
    assert (row_hash([f.cast(pl.Float32)], KEY) == row_hash([f], KEY)).all()
    h = row_hash([f], KEY)
    assert h[0] == h[1]
    payload = np.array([0x7FF8000000000001], dtype=np.uint64).view(np.float64)
    assert row_hash([pl.Series(payload)], KEY)[0] == h[2]
    s = pl.Series(["x", "y", None, ""])
    assert (row_hash([s.cast(pl.Categorical)], KEY) == row_hash([s], KEY)).all()
    assert len({int(v) for v in row_hash([s], KEY)}) == 4
    z = row_hash([pl.Series([0, None])], KEY)
    assert z[0] != z[1]
    t = pl.Series([dt.datetime(2020, 1, 1, 12)]).dt.replace_time_zone("UTC")
    naive = pl.Series([dt.datetime(2020, 1, 1, 12)])
    assert row_hash([t.dt.convert_time_zone("Asia/Tokyo")], KEY)[0] == row_hash([naive], KEY)[0]


def test_unhashable_types_are_refused_before_charging() -> None:
    from dpkit.accounting import Accountant, PureDP

    df = pl.DataFrame({"u": [1, 2], "k": [[1], [2]], "x": [1.0, 2.0]})
    acct = Accountant(PureDP(epsilon=5.0))
    keys = pl.DataFrame({"k": [[1]]})
    q = dpf.Query(df, privacy_unit="u").group_by("k", public_keys=keys, max_groups=1, max_rows=1)
    with pytest.raises(DataError):
        q.agg(dpf.count()).release(epsilon=1.0, accountant=acct)
    assert not acct.ledger
