"""dpkit's row hash is fixed by its specification, whatever the engine or its version.

Three checks: the AES-128-CMAC examples of RFC 4493 (and OpenSSL's own CMAC on random messages);
a scalar implementation written here from the specification in ``dpkit.frame._rowhash`` against
the vectorised one; and pinned outputs for rows of every supported type under a fixed key, so
that a change of Polars, NumPy or dpkit that moved any row's hash (and so which rows bounding
keeps) fails here. The Spark side of the same vectors is in ``test_frame_spark.py``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import struct

import numpy as np
import polars as pl
import pytest
from cryptography.hazmat.primitives import cmac
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import dpkit.frame as dpf
from dpkit.errors import DataError
from dpkit.frame._rowhash import SPEC_VERSION, cmac_words, row_hash

KEY = (0x0706050403020100, 0x0F0E0D0C0B0A0908)  # the bytes 00..0f

# RFC 4493, section 4: AES-128 key 2b7e1516 28aed2a6 abf71588 09cf4f3c, the message's first
# 0, 16, 40 and 64 bytes, and their 16-byte tags
RFC_KEY = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c")
RFC_MESSAGE = bytes.fromhex(
    "6bc1bee22e409f96e93d7e117393172a"
    "ae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52ef"
    "f69f2445df4f9b17ad2b417be66c3710"
)
RFC_TAGS = {
    0: "bb1d6929e95937287fa37d129b756746",
    16: "070a16b46b4d4144f79bdd9dd04a287c",
    40: "dfa66747de9ae63030ca32611497c827",
    64: "51f0bebf7e3b9d92fc49741779363cfe",
}


def _as_key(k: bytes) -> tuple[int, int]:
    return int.from_bytes(k[:8], "little"), int.from_bytes(k[8:], "little")


def _columns(msg: bytes, rows: int) -> list[np.ndarray]:
    return [
        np.full(rows, int.from_bytes(msg[i : i + 8], "little"), dtype=np.uint64)
        for i in range(0, len(msg), 8)
    ]


def test_cmac_matches_rfc_4493() -> None:
    rows = 40_000  # more than one pass of the vectorised code (32,768 rows)
    for length, tag in RFC_TAGS.items():
        got = cmac_words(_as_key(RFC_KEY), _columns(RFC_MESSAGE[:length], rows), n=rows)
        assert (got == np.uint64(int.from_bytes(bytes.fromhex(tag)[:8], "little"))).all()


def test_cmac_matches_openssl_on_random_messages() -> None:
    g = np.random.default_rng(4)
    for words in range(1, 10):  # odd counts end in a padded block, even ones in a full one
        key = g.bytes(16)
        msgs = [g.bytes(8 * words) for _ in range(5)]
        cols = [
            np.array([int.from_bytes(m[8 * i : 8 * i + 8], "little") for m in msgs], np.uint64)
            for i in range(words)
        ]
        got = [int(v) for v in cmac_words(_as_key(key), cols)]
        for m, v in zip(msgs, got, strict=True):
            c = cmac.CMAC(algorithms.AES(key))
            c.update(m)
            assert v == int.from_bytes(c.finalize()[:8], "little")


# -- a scalar implementation, written from the module's specification (and RFC 4493) ------------
M64 = (1 << 64) - 1


def _dbl(b: bytes) -> bytes:
    v = int.from_bytes(b, "big") << 1
    return ((v ^ 0x87 if v >> 128 else v) & ((1 << 128) - 1)).to_bytes(16, "big")


def _cmac(key: tuple[int, int], data: bytes) -> int:
    k = key[0].to_bytes(8, "little") + key[1].to_bytes(8, "little")
    aes = Cipher(algorithms.AES(k), modes.ECB()).encryptor()
    k1 = _dbl(aes.update(bytes(16)))
    blocks = [data[i : i + 16] for i in range(0, len(data), 16)] or [b""]
    last = blocks[-1]
    if len(last) == 16:
        sub = k1
    else:
        sub, last = _dbl(k1), last + b"\x80" + bytes(15 - len(last))
    blocks[-1] = bytes(a ^ b for a, b in zip(last, sub, strict=True))
    x = bytes(16)
    for m in blocks:
        x = aes.update(bytes(a ^ b for a, b in zip(x, m, strict=True)))
    return int.from_bytes(x[:8], "little")


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
    return _cmac(key, b"".join(w.to_bytes(8, "little") for w in words))


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


# Pinned under KEY (specification version 2): the rows of _rows(), all five columns
PINNED = [
    0x4BD9029C18389004,
    0xC0619DF6BEF9ED3E,
    0x36601800FA62E65F,
    0xAF0AAB4E7D98965A,
    0x3F80430634F4D484,
]


def test_row_hash_matches_the_specification_and_pinned_vectors() -> None:
    assert SPEC_VERSION == 2
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


def test_text_words_depend_on_the_row_alone() -> None:
    """Text is dictionary-encoded per batch, but a row's word must not depend on which other
    rows share the batch, their order or the chunking (a unit's kept rows may depend only on
    its own rows); embedded NULs, long texts, empty vs null are distinct values."""
    mine = pl.Series(["a\x00", "a", "", None, "x" * 100_000, "a\x00b"])
    alone = row_hash([mine], KEY)
    assert len({int(v) for v in alone}) == len(mine)
    others = pl.Series(["zz", "a", None, "q" * 50])
    mixed = pl.concat([others, mine.reverse(), others], rechunk=False)  # three chunks
    got = row_hash([mixed], KEY)[len(others) : len(others) + len(mine)][::-1]
    assert (got == alone).all()
    b = pl.Series([b"", None, b"\x00", b"\x00\x00"], dtype=pl.Binary)
    hb = row_hash([b], KEY)
    assert len({int(v) for v in hb}) == 4
    assert (row_hash([pl.concat([b.reverse(), b])], KEY)[4:] == hb).all()
