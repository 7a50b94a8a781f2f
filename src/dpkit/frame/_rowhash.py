"""dpkit's keyed row hash: SipHash-2-4 over a canonical 64-bit encoding of a row's values.

Contribution bounding keeps, of each unit's rows, those with the smallest keyed hashes, and the
fixed-point rounding of a row draws its uniform from the same hash. The hash must therefore be
the same on every engine and every version of every engine: an executor with another Polars (or
another Spark) that hashed differently would keep other rows, and the Spark and Polars paths
would no longer agree. Polars' ``Expr.hash`` is documented as unstable across versions, so dpkit
defines its own hash and computes it with its own code (NumPy, vectorised), wherever it runs.

Specification (version 1)
-------------------------
The key is 128 bits, ``(k0, k1)``, two unsigned 64-bit integers drawn from the release's secret
generator. A row of ``m`` hashed columns is encoded as ``m + 1`` unsigned 64-bit words:

* ``w_i`` for the value of column ``i``, by the column's type:

  - null: ``0`` (and bit ``i`` of the last word is set);
  - boolean: ``0`` or ``1``;
  - integer (8 to 64 bits, signed or not): the value modulo ``2**64`` (two's complement);
  - integer of 128 bits: ``lo = v mod 2**64`` where ``v`` fits in 64 bits (``hi = ⌊v / 2**64⌋``
    is ``0``, or ``-1`` with ``lo ≥ 2**63`` when signed: the word of the same value as a 64-bit
    integer), else ``lo XOR SipHash-2-4(hi mod 2**64)`` under the same key, so that values
    beyond 64 bits hash without a failure and agree modulo ``2**64`` only by chance;
  - float (32 or 64 bits) and decimal: the IEEE 754 binary64 bits of the value as a float64,
    with ``-0.0`` written as ``+0.0`` and every NaN as ``0x7FF8000000000000``;
  - date: days since 1970-01-01; datetime and duration: microseconds (since 1970-01-01 UTC);
    time: nanoseconds since midnight (each an integer as above);
  - string, categorical, enum (their text) and binary: the first 8 bytes, read little-endian, of
    BLAKE2b (RFC 7693) with an 8-byte digest, keyed with the 16 bytes ``k0 ‖ k1`` (each
    little-endian), of the UTF-8 bytes (of the bytes, for binary);

* ``w_m``: the null mask, bit ``i`` set when column ``i`` is null (``m ≤ 64``).

The hash is SipHash-2-4 (Aumasson and Bernstein 2012, "SipHash: a fast short-input PRF") with key
``(k0, k1)`` of the ``8 (m + 1)`` bytes ``w_0 ‖ … ‖ w_m`` (each little-endian), read as a signed
64-bit integer. Other column types (lists, structs, objects) are refused by the query's schema
check. Test vectors (the SipHash reference vectors, and rows under a fixed key) are in
``tests/frame/test_frame_rowhash.py``: a change to any of this changes them.

SipHash is a pseudorandom function: without the key nobody can predict, or choose data to steer,
which rows are kept (the guarantee itself holds for every key: which rows of a unit survive is a
function of that unit's rows only). Its cost is a few dozen vector operations per word; the
measured cost is in ``docs/spark.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.frame._engine import polars

__all__ = ["SPEC_VERSION", "hash_key", "hash_series", "row_hash", "siphash24_words"]

SPEC_VERSION = 1
"""The version of the row-hash specification above (a change to it is a new version)."""

U64 = npt.NDArray[np.uint64]
_MASK = (1 << 64) - 1
_NAN = 0x7FF8000000000000
_BLOCK = 1 << 14  # rows per SipHash pass: the five state vectors stay in the CPU cache


def hash_key(seed: int, salt: int) -> tuple[int, int]:
    """The 128-bit key ``(seed, salt)`` as two unsigned 64-bit integers."""
    return int(seed) & _MASK, int(salt) & _MASK


def _rotl(x: U64, r: int, tmp: U64) -> None:
    """``x ← rotl(x, r)`` in place (``tmp`` a scratch buffer of x's size)."""
    np.right_shift(x, np.uint64(64 - r), out=tmp)
    np.left_shift(x, np.uint64(r), out=x)
    x |= tmp


def _round(v0: U64, v1: U64, v2: U64, v3: U64, tmp: U64) -> None:
    """One SipRound, in place (NumPy's unsigned additions wrap modulo 2**64, as SipHash's)."""
    v0 += v1
    _rotl(v1, 13, tmp)
    v1 ^= v0
    _rotl(v0, 32, tmp)
    v2 += v3
    _rotl(v3, 16, tmp)
    v3 ^= v2
    v0 += v3
    _rotl(v3, 21, tmp)
    v3 ^= v0
    v2 += v1
    _rotl(v1, 17, tmp)
    v1 ^= v2
    _rotl(v2, 32, tmp)


_IV = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)


def siphash24_words(key: tuple[int, int], words: Sequence[U64], n: int | None = None) -> U64:
    """SipHash-2-4 of the messages ``words[0][j] ‖ words[1][j] ‖ …`` (8-byte words, little-endian),
    one per row ``j`` (``n`` rows: needed only when there are no words), vectorised over rows."""
    n = len(words[0]) if words else (n or 0)
    out = np.empty(n, dtype=np.uint64)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    last = np.uint64((8 * len(words) & 0xFF) << 56)  # no trailing bytes: the length byte only
    size = min(n, _BLOCK)
    v0, v1, v2, v3, tmp = (np.empty(size, dtype=np.uint64) for _ in range(5))
    for s in range(0, n, _BLOCK):
        e = min(s + _BLOCK, n)
        m = e - s
        a, b, c, d, t = v0[:m], v1[:m], v2[:m], v3[:m], tmp[:m]
        a.fill(k0 ^ np.uint64(_IV[0]))
        b.fill(k1 ^ np.uint64(_IV[1]))
        c.fill(k0 ^ np.uint64(_IV[2]))
        d.fill(k1 ^ np.uint64(_IV[3]))
        for w in words:
            block = w[s:e]
            d ^= block
            _round(a, b, c, d, t)
            _round(a, b, c, d, t)
            a ^= block
        d ^= last
        _round(a, b, c, d, t)
        _round(a, b, c, d, t)
        a ^= last
        c ^= np.uint64(0xFF)
        for _ in range(4):
            _round(a, b, c, d, t)
        np.bitwise_xor(a, b, out=out[s:e])
        out[s:e] ^= c
        out[s:e] ^= d
    return out


def _text_words(values: Any, key: tuple[int, int], binary: bool) -> U64:
    """Keyed BLAKE2b-64 of each distinct text (or bytes), mapped back to the rows."""
    pl = polars()
    blake_key = key[0].to_bytes(8, "little") + key[1].to_bytes(8, "little")
    uniq = values.drop_nulls().unique()
    digests = []
    for v in uniq.to_list():
        data = v if binary else v.encode("utf-8")
        d = hashlib.blake2b(data, digest_size=8, key=blake_key).digest()
        digests.append(int.from_bytes(d, "little"))
    table = pl.Series("w", digests, dtype=pl.UInt64)
    mapped = values.replace_strict(uniq, table, default=0, return_dtype=pl.UInt64)
    return mapped.fill_null(0).to_numpy().astype(np.uint64, copy=False)  # type: ignore[no-any-return]


def _float_words(values: Any) -> U64:
    x: npt.NDArray[np.float64] = values.cast(polars().Float64).fill_null(0.0).to_numpy()
    x = x.astype(np.float64) + 0.0  # -0.0 + 0.0 is +0.0: one sign of zero
    bits = x.view(np.uint64).copy()
    bits[np.isnan(x)] = np.uint64(_NAN)
    return bits


def _wide_int_words(values: Any, key: tuple[int, int]) -> U64:
    """A 128-bit integer column: no value may make a strict cast fail (a refusal that would
    depend on one record, with Polars' message quoting it), and values beyond 64 bits keep
    distinct words under a secret fold rather than colliding by their low half."""
    pl = polars()
    t = values.dtype
    word = pl.lit(1 << 64, dtype=t)
    frame = values.fill_null(0).alias("v").to_frame()
    lo_hi = frame.select(
        (pl.col("v") % word).cast(pl.UInt64).alias("lo"),
        (pl.col("v") // word).cast(pl.Int64 if t == pl.Int128 else pl.UInt64).alias("hi"),
    )
    lo = lo_hi["lo"].to_numpy().astype(np.uint64)
    hi = lo_hi["hi"].to_numpy()
    hi_words = hi.astype(np.int64).view(np.uint64) if t == pl.Int128 else hi.astype(np.uint64)
    # the value fits in 64 bits exactly when hi is the sign extension of lo (0 when unsigned)
    fits = hi == (lo.view(np.int64) >> 63) if t == pl.Int128 else hi_words == 0
    fold = siphash24_words(key, [hi_words])
    return np.where(fits, lo, lo ^ fold)  # type: ignore[no-any-return]


def _int_words(values: Any) -> U64:
    pl = polars()
    if values.dtype == pl.UInt64:
        return values.fill_null(0).to_numpy().astype(np.uint64)  # type: ignore[no-any-return]
    ints = values.cast(pl.Int64).fill_null(0).to_numpy()
    return ints.astype(np.int64).view(np.uint64)  # type: ignore[no-any-return]


def column_words(values: Any, key: tuple[int, int]) -> U64:
    """The words ``w_i`` of one column (a Polars Series), per the module's specification."""
    pl = polars()
    t = values.dtype
    if t in (pl.Int128, getattr(pl, "UInt128", pl.Int128)):
        return _wide_int_words(values, key)
    if t == pl.Boolean or t.is_integer():
        return _int_words(values)
    if t.is_float() or t.is_decimal():
        return _float_words(values)
    if t == pl.Date:
        return _int_words(values.cast(pl.Int32))
    if isinstance(t, pl.Datetime):
        # the physical value counts from 1970-01-01 UTC whatever the zone shown
        return _int_words(values.dt.cast_time_unit("us").to_physical())
    if isinstance(t, pl.Duration):
        return _int_words(values.cast(pl.Duration("us")).cast(pl.Int64))
    if t == pl.Time:
        return _int_words(values.cast(pl.Int64))
    if t == pl.String or isinstance(t, pl.Categorical | pl.Enum):
        return _text_words(values.cast(pl.String), key, binary=False)
    if t == pl.Binary:
        return _text_words(values, key, binary=True)
    if t == pl.Null:
        return np.zeros(len(values), dtype=np.uint64)
    raise DataError(f"a column of type {t} cannot be hashed for bounding; cast it first.")


def row_hash(columns: Sequence[Any], key: tuple[int, int]) -> U64:
    """dpkit's row hash (see the module) of the rows of ``columns`` (Polars Series), unsigned."""
    if len(columns) > 64:
        raise DataError("at most 64 columns can be hashed together for bounding.")
    words = [column_words(c, key) for c in columns]
    mask = np.zeros(len(columns[0]) if columns else 0, dtype=np.uint64)
    for i, c in enumerate(columns):
        if c.null_count():
            mask |= c.is_null().to_numpy().astype(np.uint64) << np.uint64(i)
    return siphash24_words(key, [*words, mask])


def hash_series(names: Sequence[str], key: tuple[int, int]) -> Any:
    """A Polars expression: the signed row hash of the columns ``names`` (row-wise, so it runs
    per batch on the streaming engine and inside Spark's ``mapInArrow``)."""
    pl = polars()

    def run(s: Any) -> Any:
        fields = s.struct.unnest().get_columns()
        return pl.Series(s.name, row_hash(fields, key).view(np.int64), dtype=pl.Int64)

    return pl.struct(list(names)).map_batches(run, return_dtype=pl.Int64, is_elementwise=True)
