"""dpkit's keyed row hash: AES-128-CMAC over a canonical 64-bit encoding of a row's values.

Contribution bounding keeps, of each unit's rows, those with the smallest keyed hashes, and the
fixed-point rounding of a row draws its uniform from the same hash. The hash must therefore be
the same on every engine and every version of every engine: an executor with another Polars (or
another Spark) that hashed differently would keep other rows, and the Spark and Polars paths
would no longer agree. Polars' ``Expr.hash`` is documented as unstable across versions, so dpkit
defines its own hash and computes it with its own code wherever it runs.

Specification (version 2)
-------------------------
The key is 128 bits, ``(k0, k1)``, two unsigned 64-bit integers drawn from the release's secret
generator; as bytes it is ``K = k0 ‖ k1``, each little-endian. A row of ``m`` hashed columns is
encoded as ``m + 1`` unsigned 64-bit words:

* ``w_i`` for the value of column ``i``, by the column's type:

  - null: ``0`` (and bit ``i`` of the last word is set);
  - boolean: ``0`` or ``1``;
  - integer (8 to 64 bits, signed or not): the value modulo ``2**64`` (two's complement);
  - integer of 128 bits: ``lo = v mod 2**64`` where ``v`` fits in 64 bits (``hi = ⌊v / 2**64⌋``
    is ``0``, or ``-1`` with ``lo ≥ 2**63`` when signed: the word of the same value as a 64-bit
    integer), else ``lo XOR H(hi mod 2**64)``, ``H`` the hash below of that one word under the
    same key, so that values beyond 64 bits hash without a failure and agree modulo ``2**64``
    only by chance;
  - float (32 or 64 bits) and decimal: the IEEE 754 binary64 bits of the value as a float64,
    with ``-0.0`` written as ``+0.0`` and every NaN as ``0x7FF8000000000000``;
  - date: days since 1970-01-01; datetime and duration: microseconds (since 1970-01-01 UTC);
    time: nanoseconds since midnight (each an integer as above);
  - string, categorical, enum (their text) and binary: the first 8 bytes, read little-endian, of
    BLAKE2b (RFC 7693) with an 8-byte digest, keyed with the 16 bytes ``K``, of the UTF-8 bytes
    (of the bytes, for binary);

* ``w_m``: the null mask, bit ``i`` set when column ``i`` is null (``m ≤ 64``).

The hash ``H`` is AES-128-CMAC (NIST SP 800-38B; RFC 4493, Song, Poovendran, Lee and Iwata 2006)
with key ``K`` of the ``8 (m + 1)`` bytes ``w_0 ‖ … ‖ w_m`` (each little-endian): the first 8
bytes of the 16-byte tag, read little-endian as a signed 64-bit integer. Other column types
(lists, structs, objects) are refused by the query's schema check. Test vectors (RFC 4493's, and
rows under a fixed key) are in ``tests/frame/test_frame_rowhash.py``: a change to any of this
changes them.

Why this function. Bounding needs, per release, an order of each unit's rows (and of its (unit,
key) pairs) that depends on the rows' content only, never on their position, and a uniform per
row for the rounding. The privacy guarantee holds for *any* such per-unit deterministic choice
(which rows of a unit survive is a function of that unit's rows only); the hash being a keyed
pseudorandom function adds that nobody without the key can predict, or choose data to steer,
which rows are kept, and that the rounding uniforms behave as independent. CMAC is a PRF
whenever AES is a pseudorandom permutation (Iwata and Kurosawa 2003, "OMAC: One-Key CBC MAC"),
and a truncation of a PRF is one. It replaced SipHash-2-4 (version 1) for speed: AES runs in
hardware (AES-NI, ARMv8 crypto) through OpenSSL, one call per 16 bytes of every row, where
SipHash took dozens of NumPy passes per 8 bytes.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.frame._engine import polars

__all__ = ["SPEC_VERSION", "cmac_words", "hash_key", "hash_series", "row_hash"]

SPEC_VERSION = 2
"""The version of the row-hash specification above (a change to it is a new version)."""

U64 = npt.NDArray[np.uint64]
_MASK = (1 << 64) - 1
_NAN = 0x7FF8000000000000
_ROWS = 1 << 15  # rows per pass: the message and state blocks (512 KiB each) stay in the cache
_PAD = 0x80  # CMAC's padding of an incomplete last block: the byte 0x80, then zeros
_HINT = "dpkit.frame's row hash needs cryptography (AES): pip install 'dpkit[frame]'"


def hash_key(seed: int, salt: int) -> tuple[int, int]:
    """The 128-bit key ``(seed, salt)`` as two unsigned 64-bit integers."""
    return int(seed) & _MASK, int(salt) & _MASK


def _key_bytes(key: tuple[int, int]) -> bytes:
    return (key[0] & _MASK).to_bytes(8, "little") + (key[1] & _MASK).to_bytes(8, "little")


def _aes_ecb(key: bytes) -> Any:
    """An AES-128 encryptor of whole 16-byte blocks (ECB: each block on its own)."""
    try:
        ciphers = importlib.import_module("cryptography.hazmat.primitives.ciphers")
    except ImportError as exc:  # pragma: no cover - the test environment has cryptography
        raise ImportError(_HINT) from exc
    return ciphers.Cipher(ciphers.algorithms.AES(key), ciphers.modes.ECB()).encryptor()


def _double(block: bytes) -> bytes:
    """CMAC's subkey step: the 128-bit string shifted left by one bit, XOR 0x87 on a carry."""
    v = int.from_bytes(block, "big") << 1
    if v >> 128:
        v = (v & ((1 << 128) - 1)) ^ 0x87
    return v.to_bytes(16, "big")


def cmac_words(key: tuple[int, int], words: Sequence[U64], n: int | None = None) -> U64:
    """AES-128-CMAC (RFC 4493) of the messages ``words[0][j] ‖ words[1][j] ‖ …`` (8-byte words,
    little-endian), one per row ``j`` (``n`` rows: needed only when there are no words),
    vectorised over rows: the first 8 bytes of each tag, little-endian, unsigned."""
    n = len(words[0]) if words else (n or 0)
    enc = _aes_ecb(_key_bytes(key))
    k1 = _double(enc.update(bytes(16)))  # L = AES_K(0^128); K1 = dbl(L), K2 = dbl(K1)
    if not words:  # the empty message: one padded block, the same tag for every row
        empty = np.frombuffer(bytes([_PAD]) + bytes(15), dtype="<u8") ^ np.frombuffer(
            _double(k1), dtype="<u8"
        )
        tag = np.frombuffer(enc.update(empty.astype("<u8").tobytes()), dtype="<u8")
        return np.full(n, tag[0], dtype=np.uint64)
    msg: list[U64 | None] = list(words)
    if len(msg) % 2:  # an incomplete last block: padded, and K2
        msg.append(None)
        sub = np.frombuffer(_double(k1), dtype="<u8")
    else:
        sub = np.frombuffer(k1, dtype="<u8")
    blocks = len(msg) // 2
    out = np.empty(n, dtype=np.uint64)
    size = max(1, min(n, _ROWS))
    # x: the chaining value X_i (AES's output), y: X_{i-1} XOR M_i (its input); both as (rows,
    # 2) little-endian words over bytearrays, which OpenSSL reads and writes in place (its
    # output buffer must have 15 bytes to spare)
    x_raw, y_raw = bytearray(16 * size + 16), bytearray(16 * size + 16)
    x = np.frombuffer(x_raw, dtype="<u8", count=2 * size).reshape(size, 2)
    y = np.frombuffer(y_raw, dtype="<u8", count=2 * size).reshape(size, 2)
    y_view = memoryview(y_raw)
    pad = np.uint64(_PAD)
    for s in range(0, n, _ROWS):
        e = min(s + _ROWS, n)
        xs, ys = x[: e - s], y[: e - s]
        for i in range(blocks):
            a, b = msg[2 * i], msg[2 * i + 1]
            assert a is not None
            if i == 0:  # X_0 = 0
                ys[:, 0] = a[s:e]
                ys[:, 1] = pad if b is None else b[s:e]
            else:
                np.bitwise_xor(xs[:, 0], a[s:e], out=ys[:, 0])
                np.bitwise_xor(xs[:, 1], pad if b is None else b[s:e], out=ys[:, 1])
            if i == blocks - 1:
                ys ^= sub
            enc.update_into(y_view[: 16 * (e - s)], x_raw)
        out[s:e] = xs[:, 0]
    return out


def _text_words(values: Any, key: tuple[int, int], binary: bool) -> U64:
    """Keyed BLAKE2b-64 of each distinct text (or bytes), mapped back to the rows.

    The distinct values are hashed once each (in Python), then mapped back to the rows by
    Polars' hash table in one pass; a null's word is 0."""
    pl = polars()
    blake_key = _key_bytes(key)
    distinct = values.drop_nulls().unique()
    table = []
    for v in distinct.to_list():
        data = v if binary else v.encode("utf-8")
        d = hashlib.blake2b(data, digest_size=8, key=blake_key).digest()
        table.append(int.from_bytes(d, "little"))
    words = values.replace_strict(
        distinct, pl.Series(table, dtype=pl.UInt64), default=None, return_dtype=pl.UInt64
    )
    return np.asarray(words.fill_null(0).to_numpy(), dtype=np.uint64)


def _float_words(values: Any) -> U64:
    x = np.asarray(values.cast(polars().Float64).fill_null(0.0).to_numpy(), dtype=np.float64)
    bits = np.add(x, 0.0).view(np.uint64)  # -0.0 + 0.0 is +0.0: one sign of zero
    np.putmask(bits, np.isnan(x), np.uint64(_NAN))  # one NaN
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
    fold = cmac_words(key, [hi_words])
    return np.where(fits, lo, lo ^ fold)  # type: ignore[no-any-return]


def _int_words(values: Any) -> U64:
    """Zero-copy where Polars' column already is the 64-bit integer (reinterpreted unsigned)."""
    pl = polars()
    if values.dtype == pl.UInt64:
        return np.asarray(values.fill_null(0).to_numpy(), dtype=np.uint64)
    ints = np.asarray(values.cast(pl.Int64).fill_null(0).to_numpy(), dtype=np.int64)
    return ints.view(np.uint64)


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
    return cmac_words(key, [*words, mask])


def hash_series(names: Sequence[str], key: tuple[int, int]) -> Any:
    """A Polars expression: the signed row hash of the columns ``names`` (row-wise, so it runs
    per batch on the streaming engine and inside Spark's ``mapInArrow``)."""
    pl = polars()

    def run(s: Any) -> Any:
        fields = s.struct.unnest().get_columns()
        return pl.Series(s.name, row_hash(fields, key).view(np.int64), dtype=pl.Int64)

    return pl.struct(list(names)).map_batches(run, return_dtype=pl.Int64, is_elementwise=True)
