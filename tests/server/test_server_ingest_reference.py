"""Registration reads files with Polars now (no PyArrow in the service): on adversarial CSV and
Parquet files it stores exactly what the PyArrow reading stored (the reference, kept verbatim in
``_arrow_reference.py``), bit for bit (``-0.0``, NaN and missing cells, infinities, huge and
tiny numbers, white space, dictionary codes, ids in order of first appearance, integer and
decimal promotion), or both refuse the file with a :class:`DataError`. And the stored column
file maps back to those same bits."""

from __future__ import annotations

import csv
import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _arrow_reference import read_source_arrow

from dpkit.errors import DataError
from dpkit.server import _csv_rows
from dpkit.server._ingest import WHITESPACE, read_source
from dpkit.server._schema import DatasetSchema, Table
from dpkit.server._store import load_table, store_table

# Text a numeric cell may hold: every spelling the grammar accepts or must refuse, overflow and
# underflow, the halfway cases of rounding, signed zeros and NaNs, non-ASCII digits, and every
# white-space character around a number.
NUMBERS = [
    "1", "-0", "+0", "0.0", "-0.0", "1e999", "-1e999", "1e-999", "-1e-400", "+nan", "-nan",
    "nan", "NaN", "NAN", "inf", "-inf", "+inf", "Infinity", "-Infinity", "infinity", "INF",
    "1.", "-.5", ".5e3", "1_000", "0x10", "\u0661", "\uff11", "1e", "e5", "", "NA", "null",
    " 2.5 ", "\t3\t", "00012", "1" + "0" * 400, "0." + "0" * 400 + "1",
    "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
    "1.7976931348623157e308", "1.7976931348623159e308", "9007199254740993", "0.1",
    "3.14159265358979323846264338327950288", "1E5", "1e+05", "1.5e-7", " ", "--1", "+-1",
    "1.2.3", "1 2", "\u200b7", "7\ufeff", "\u180e7", "1e99999999999999999999",
    "-1e-99999999999999999999", "1" * 5000, "0." + "0" * 5000 + "1", "1" * 400 + "e-400",
    "9" * 20 + "." + "9" * 20 + "e+0000000000000000000000005", "+.5", "-1.e5", "1.E-5",
] + [w + "7" + w for w in WHITESPACE]  # fmt: skip
TEXTS = ["a", "b", "", " a", "a ", "A", "é", "e\u0301", "NA", "null", "nan", "1", "1.0", "\u200b"]


def _schema(*cols: dict[str, Any], unit: str = "row") -> DatasetSchema:
    return DatasetSchema.from_dict({"name": "t", "privacy_unit": unit, "columns": list(cols)})


FLOAT = {"name": "x", "type": "float", "bounds": [-1e307, 1e307], "fill": 0.25}
NARROW = {"name": "y", "type": "float", "bounds": [-1, 1], "fill": -0.0}
INT = {"name": "n", "type": "int", "bounds": [-10, 10], "fill": 3}
CAT = {"name": "c", "type": "category", "categories": ["a", "NA", "1", "é"]}
CAT_DROP = {**CAT, "name": "d", "missing": "drop"}
USER = {"name": "u", "type": "id", "missing": "drop"}


def _same(path: Path, schema: DatasetSchema) -> None:
    """Both readings refuse the file, or store the same bits (and the store keeps them)."""
    try:
        want: Table | None = read_source_arrow(path, schema)
    except DataError:
        want = None
    if want is None:
        with pytest.raises(DataError):
            read_source(path, schema)
        return
    got = read_source(path, schema)
    stored = path.parent / "data"
    store_table(stored, got)
    mapped = load_table(stored, schema)
    for col in schema.columns:
        a = np.asarray(want.columns[col.name])
        for b in (np.asarray(got.columns[col.name]), np.asarray(mapped.columns[col.name])):
            assert (a.dtype, a.shape) == (b.dtype, b.shape), col.name
            assert a.tobytes() == b.tobytes(), (col.name, np.flatnonzero(a != b)[:5])


def _csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_numbers_in_text_parse_to_the_same_floats(tmp_path: Path) -> None:
    rows = [[v, v, v, v] for v in NUMBERS]
    path = _csv(tmp_path / "n.csv", ["x", "y", "n", "c"], rows)
    _same(path, _schema(FLOAT, NARROW, INT, CAT))


def test_text_columns_give_the_same_codes(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rows = [[TEXTS[i], TEXTS[j], TEXTS[k], "0.5"] for i, j, k in rng.integers(0, 14, (300, 3))]
    path = _csv(tmp_path / "t.csv", ["u", "c", "d", "x"], rows)
    _same(path, _schema(USER, CAT, CAT_DROP, FLOAT, unit="u"))


# CSV files whose structure is odd: each is read the same way, or refused by both.
LAYOUTS: dict[str, bytes] = {
    "bom": b"\xef\xbb\xbfx,c\n1,a\n2,b\n",
    "crlf": b"x,c\r\n1,a\r\n-0,b\r\n",
    "no final newline": b"x,c\n1,a\n2,b",
    "blank lines": b"x,c\n1,a\n\n2,b\n\n",
    "quoted": b'x,c\n"1",a\n" 2 ","a"\n"3","""a"""\n',
    "quoted newline": b'x,c\n1,"a\nb"\n2,a\n',
    "extra column": b"x,c,z\n1,a,q\n2,b,r\n",
    "columns in another order": b"c,x\na,1\nb,2\n",
    "short row": b"x,c\n1,a\n2\n3,b\n",
    "long row": b"x,c\n1,a,9\n2,b\n",
    "missing column": b"x\n1\n2\n",
    "duplicated column": b"x,c,x\n1,a,2\n3,b,4\n",
    "header only": b"x,c\n",
    "empty file": b"",
    "invalid utf-8 in a category": b"x,c\n1,\xff\n2,a\n",
    "invalid utf-8 in a number": b"x,c\n\xff,a\n2,a\n",
    "one row": b"x,c\n1,a\n",
    "semicolons": b"x;c\n1;a\n2;b\n",
    "blank lines with carriage returns": b"x,c\r\n1,a\r\n\r\n\r\n2,b\r\n\r\n",
    "a blank first line": b"\nx,c\n1,a\n2,b\n",
    "white space only": b"x,c\n1,a\n  \n2,b\n",
    "a lone carriage return": b"x,c\n1,a\n\r\n2,b\r",
    "an open quote": b'x,c\n1,"a\n2,b\n',
    "a quoted blank line": b'x,c\n1,"a\n\nb"\n2,b\n\n',
    "quoted commas": b'x,c\n1,"a,b"\n"2,5",a\n',
}


# Read before, refused now (with a clear message, never with other values): line ends that are
# carriage returns only (classic Mac OS), and a quote inside an unquoted field, which Polars'
# reader refuses.
REFUSED_NOW = {
    "carriage returns only": b"x,c\r1,a\r2,b\r",
    "a quote inside a field": b'x,c\n1,a"b\n2,b\n',
    "a carriage return before a line end": b"x,c\n1,a\r\r\n2,b\n",
    "a carriage return as a blank line": b"x,c\r\n1,a\r\n\r\r\n2,b\r\n",
}


@pytest.mark.parametrize("name", list(REFUSED_NOW))
def test_layouts_refused_now(tmp_path: Path, name: str) -> None:
    path = tmp_path / "l.csv"
    path.write_bytes(REFUSED_NOW[name])
    assert read_source_arrow(path, _schema(FLOAT, CAT)).rows == 2
    with pytest.raises(DataError, match="could not read the file"):
        read_source(path, _schema(FLOAT, CAT))


@pytest.mark.parametrize("block", [1, 2, 3, 5, 1 << 23])
def test_the_record_scan_across_block_boundaries(
    tmp_path: Path, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the scan reads the file in blocks: a line end, a quote or a carriage return at a block's
    # edge must not change which lines are records
    monkeypatch.setattr(_csv_rows, "_BLOCK", block)
    body = b'x,c\r\n1,a\r\n\r\n"2",""""\r\n\n3,"b\r\n,"\n\r\n4,a'
    path = tmp_path / "b.csv"
    path.write_bytes(body)
    assert _csv_rows.csv_records(path)[1].tolist() == [True, False, True, False, True, False, True]
    _same(path, _schema(FLOAT, CAT))


@pytest.mark.parametrize("block", [1, 2, 4, 1 << 23])
def test_a_carriage_return_in_a_line_is_refused_never_split_an_id(
    tmp_path: Path, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old reading took a lone carriage return for a line end: "u1\r\r\n" was the id "u1".
    # Polars keeps it in the field: the same person would get two ids ("u1" and "u1\r"),
    # each bounded apart. Refused instead, at any block size of the scan.
    monkeypatch.setattr(_csv_rows, "_BLOCK", block)
    schema = _schema(FLOAT, USER, unit="u")
    path = tmp_path / "r.csv"
    path.write_bytes(b"x,u\n1,u1\r\r\n2,u1\n3,u2\n")
    assert read_source_arrow(path, schema).columns["u"].tolist() == [0, 0, 1]
    with pytest.raises(DataError, match="as many fields as the header"):
        read_source(path, schema)
    path.write_bytes(b'x,u\r\n1,"u1\r"\r\n2,u1\r\n3,u2\r')  # quoted, or a line end: read
    _same(path, schema)


def test_a_short_line_is_refused_with_what_to_check(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes(LAYOUTS["short row"])
    with pytest.raises(DataError, match="as many fields as the header"):
        read_source(path, _schema(FLOAT, CAT))


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_odd_csv_layouts(tmp_path: Path, name: str) -> None:
    path = tmp_path / "l.csv"
    path.write_bytes(LAYOUTS[name])
    _same(path, _schema(FLOAT, CAT))


def _parquet_columns() -> dict[str, tuple[pa.Array, dict[str, Any]]]:
    big = 2**53 + 1
    dec = [
        decimal.Decimal("0.1"),
        None,
        decimal.Decimal("-0.0"),
        decimal.Decimal("123456789012345678.01234567890123456789"),
    ]
    return {  # the file's column, and the schema's column it is read as
        "int with nulls": (pa.array([1, None, -5, 12]), FLOAT),
        "int64 beyond 2^53": (pa.array([big, -big, 2**63 - 1, 0]), FLOAT),
        "uint64": (pa.array([2**64 - 1, 0, 1, 7], pa.uint64()), FLOAT),
        "bool with nulls": (pa.array([True, None, False, True]), FLOAT),
        "decimal": (pa.array(dec, pa.decimal128(38, 20)), FLOAT),
        "float32": (pa.array([0.1, -0.0, float("nan"), None], pa.float32()), FLOAT),
        "float64 signed zeros": (pa.array([-0.0, 0.0, float("-inf"), float("nan")]), NARROW),
        "all null": (pa.array([None] * 4, pa.null()), FLOAT),
        "text numbers": (pa.array(["1", " -0 ", "x", None]), NARROW),
        "date as number": (pa.array([0, 1, 2, 3], pa.int32()).cast(pa.date32()), FLOAT),
        "list as number": (pa.array([[1], [2], [], None]), FLOAT),
        "dictionary text as number": (pa.array(["1", "2", "1", "2"]).dictionary_encode(), FLOAT),
        "int as int": (pa.array([1, 2, 99, None], pa.int16()), INT),
        "text category": (pa.array(["a", None, "", "NA"]), CAT),
        "large text category": (pa.array(["a", None, "b", "é"], pa.large_string()), CAT),
        "dictionary category": (pa.array(["a", None, "b", "a"]).dictionary_encode(), CAT),
        "int category": (pa.array([1, None, 2, 1]), CAT),
        "float category": (pa.array([1.0, float("nan"), 2.5, None]), CAT),
        "date category": (pa.array([0, 1, None, 3], pa.int32()).cast(pa.date32()), CAT),
        "bool category": (pa.array([True, False, None, True]), CAT),
        "text ids": (pa.array(["u2", "", None, "u2"]), USER),
        "int ids": (pa.array([7, None, -7, 7], pa.int64()), USER),
        "uint8 ids": (pa.array([7, 0, 255, 7], pa.uint8()), USER),
        "float ids": (pa.array([1.5, -0.0, 0.0, float("nan")]), USER),
        "dictionary ids": (pa.array(["b", "a", None, "b"]).dictionary_encode(), USER),
    }


@pytest.mark.parametrize("name", list(_parquet_columns()))
def test_parquet_types(tmp_path: Path, name: str) -> None:
    values, spec = _parquet_columns()[name]
    spec = {**spec, "name": "v"}
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"v": values, "w": pa.array([0.5] * len(values))}), path)
    unit = "v" if spec["type"] == "id" else "row"
    _same(path, _schema(spec, {"name": "w", "type": "float", "bounds": [0, 1]}, unit=unit))


@pytest.mark.parametrize("chunk", [None, 7])
def test_parquet_row_groups_and_ids_across_them(tmp_path: Path, chunk: int | None) -> None:
    rng = np.random.default_rng(3)
    n = 60
    users = [None if i % 11 == 0 else f"u{k}" for i, k in enumerate(rng.integers(0, 9, n))]
    cats = [TEXTS[k] for k in rng.integers(0, len(TEXTS), n)]
    table = pa.table({"u": users, "c": pa.array(cats).dictionary_encode(),
                      "x": rng.normal(size=n), "n": rng.integers(-20, 20, n)})  # fmt: skip
    path = tmp_path / "g.parquet"
    pq.write_table(table, path, row_group_size=chunk)
    _same(path, _schema(USER, CAT, FLOAT, INT, unit="u"))


def test_files_written_by_polars(tmp_path: Path) -> None:
    import polars as pl

    frame = pl.DataFrame({
        "c": pl.Series(["a", "b", None, "a"], dtype=pl.Categorical),
        "x": pl.Series([1, None, 3, 4], dtype=pl.Int32),
        "u": ["p", "q", "p", "r"],
    })  # fmt: skip
    path = tmp_path / "pl.parquet"
    frame.write_parquet(path)
    _same(path, _schema(CAT, FLOAT, USER, unit="u"))
    write: Callable[..., Any] = frame.with_columns(pl.col("c").cast(pl.String)).write_csv
    write(tmp_path / "pl.csv")
    _same(tmp_path / "pl.csv", _schema(CAT, FLOAT, USER, unit="u"))
