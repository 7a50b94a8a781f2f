"""A Spark-backed dataset's cells and units are what a registered copy of the same data holds:
text numbers parsed by the file path's grammar, float ids coded as numbers, and the units a
``sql`` query reads coded as integers whatever the ids look like (its success must not depend
on a private id)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from dpkit.server._config import ServerConfig
from dpkit.server._ingest import _parse_numbers
from dpkit.server._schema import DatasetSchema, clean_column_mask
from dpkit.server._service import Curator
from dpkit.server._spark_jobs import SparkSettings

pytest.importorskip("pyspark")
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")

# Texts Spark's cast reads differently from the file path (its trim, then a number grammar)
TEXTS = ["1d", "1f", "INF", "Infinity", "-infinity", "0x1p3", " 2 ", "1e309", "-0", "NaN",
         "-nan", "", "  ", "\u00a03", "\t4\n", "+5", "1_000", "\u0661", "5.", ".5", "0.7e0",
         "+Infinity", "\u20033", "3\u2028", "\x1f3", "0.5\u3000", None]  # fmt: skip


def test_text_numbers_parse_as_in_a_file(spark_sessions: Any) -> None:
    """Each text is the number (or the fill) file registration makes of it: no cell that a file
    fills is read by Spark as a number, or the other way."""
    from dpkit.server._spark_tables import cleaned_frame

    spark = spark_sessions.get("local")
    schema = DatasetSchema.from_dict({"name": "c", "columns": [
        {"name": "x", "type": "float", "bounds": [-10, 10], "fill": 9.0}]})  # fmt: skip
    raw = spark.createDataFrame([(t,) for t in TEXTS], "x string")
    frame, _ = cleaned_frame(raw, schema)
    got = [r["x"] for r in frame.collect()]
    parsed = np.asarray(_parse_numbers(pl, pl.Series(TEXTS, dtype=pl.String)).to_numpy(), float)
    want = clean_column_mask(schema.columns[0], parsed)[0].tolist()
    assert got == want


def test_float_ids_are_units_as_in_a_file(spark_sessions: Any) -> None:
    """-0.0 and 0.0 are one person (as the file path codes them), not two; a NaN id is
    missing (dropped here), not one unit shared by every row without an id."""
    from dpkit.server._spark_tables import cleaned_frame

    spark = spark_sessions.get("local")
    ids = [0.0, -0.0, 0.0, 1.0, math.nan, math.nan, 2.5, None]
    schema = DatasetSchema.from_dict({"name": "c", "privacy_unit": "u", "columns": [
        {"name": "u", "type": "id", "missing": "drop"}]})  # fmt: skip
    frame, _ = cleaned_frame(spark.createDataFrame([(v,) for v in ids], "u double"), schema)
    codes, bad = clean_column_mask(schema.columns[0], ids)
    rows = [r["u"] for r in frame.collect()]
    assert len(rows) == int(np.sum(~bad)) == 5
    assert len(set(rows)) == len(set(codes[~bad].tolist())) == 3
    refusing = DatasetSchema.from_dict({"name": "c", "privacy_unit": "u", "columns": [
        {"name": "u", "type": "id"}]})  # fmt: skip
    raw = spark.createDataFrame([(0.0,), (math.nan,)], "u double")
    assert cleaned_frame(raw, refusing)[1].count() == 1  # told to the admin at registration


def _sql_service(tmp: Path) -> tuple[Curator, Any]:
    (tmp / "imp").mkdir()
    cfg = ServerConfig(
        ledger=str(tmp / "l.db"), data_dir=tmp / "data", import_dir=tmp / "imp",
        insecure_seed=5, spark=SparkSettings(),
    )  # fmt: skip
    cur = Curator(cfg)
    cur.start()
    return cur, cur.add_analyst("ann")


def test_sql_success_does_not_depend_on_the_ids(tmp_path: Path, spark_sessions: Any) -> None:
    """Two tables that differ in one person's id ("x" for "9"): a sql query answers on both.
    Before, the ids were cast to integers in the service, so the query failed (refunded: a free
    bit) exactly when one id was not a number."""
    spark = spark_sessions.get("local")
    cur, ann = _sql_service(tmp_path)
    who = cur.authenticate(ann["key"])
    cols = [{"name": "user", "type": "id"},
            {"name": "city", "type": "category", "categories": ["a", "b"]}]  # fmt: skip
    out = []
    for name, last in (("digits", "9"), ("letter", "x")):
        users = [str(i % 9) for i in range(40)] + [last]
        rows = [(u, "ab"[i % 2]) for i, u in enumerate(users)]
        spark.createDataFrame(rows, "user string, city string").createOrReplaceTempView(name)
        cur.register_dataset({"name": name, "privacy_unit": "user", "total_epsilon": 10.0,
                              "spark": {"table": name}, "columns": cols})  # fmt: skip
        cur.ledger.set_budget(who.id, name, 10.0, 0.0)
        sql = f"SELECT city, COUNT(*) AS n FROM {name} GROUP BY city"
        out.append(cur.query(who, {"dataset": name, "query": "sql", "sql": sql, "epsilon": 1.0}))
    assert [o["status"] for o in out] == ["released", "released"]


def test_boolean_categories_as_in_a_file(spark_sessions: Any) -> None:
    """A boolean column declared categorical is compared as the file path's text ("True")."""
    from dpkit.server._spark_tables import cleaned_frame

    spark = spark_sessions.get("local")
    cells = [True, False, None, True]
    schema = DatasetSchema.from_dict({"name": "c", "columns": [
        {"name": "b", "type": "category", "categories": ["False", "True", "true"]}]})  # fmt: skip
    frame, _ = cleaned_frame(spark.createDataFrame([(v,) for v in cells], "b boolean"), schema)
    want = clean_column_mask(schema.columns[0], cells)[0].tolist()
    assert [r["b"] for r in frame.collect()] == want == [1, 0, 3, 1]
