"""Spark-backed datasets in the curator: the same answers as a registered copy of the same file,
and a query past the service's Spark time limit cancelled and refunded.

One local Spark session for the file (the ``spark`` fixture); the services are built in this
process on it (``master`` unset: the service takes the process's session).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpkit.errors import DataError
from dpkit.server._config import ServerConfig, load_config
from dpkit.server._outcomes import QueryFailedError
from dpkit.server._service import Curator
from dpkit.server._spark_jobs import QueryTimeoutError, SparkSettings, spark_settings

pytest.importorskip("pyspark")
# PySpark's own notice on its first Arrow exchange (mapInArrow, toArrow) with pandas 3
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")

ROWS = 600
CITIES = ["ams", "ber", "cph"]
COLUMNS = [
    {"name": "age", "type": "float", "bounds": [0, 100]},
    {"name": "kids", "type": "int", "bounds": [0, 5], "missing": "drop"},
    {"name": "city", "type": "category", "categories": CITIES},
]


def _write(folder: Path) -> None:
    """Dirty cells of every kind: null, NaN, ±inf, out of range, undeclared and null text."""
    gen = np.random.default_rng(3)
    age: list[Any] = [float(v) for v in gen.uniform(-10, 110, ROWS)]
    kids: list[Any] = [float(v) for v in gen.integers(0, 8, ROWS)]
    city: list[Any] = [("ams", "ber", "cph", "oslo")[int(i)] for i in gen.integers(0, 4, ROWS)]
    for i in range(0, ROWS, 37):
        age[i], kids[i], city[i] = None, None, None
    for i in range(5, ROWS, 41):
        age[i], kids[i] = float("nan"), 2.5
    age[7], age[8] = float("inf"), float("-inf")
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"age": age, "kids": kids, "city": city, "user": [f"u{i % 200}" for i in
                                                                     range(ROWS)]})  # fmt: skip
    pq.write_table(table, folder / "t.parquet", row_group_size=250)


def _service(tmp: Path, name: str, seconds: float = 600.0) -> Curator:
    cfg = ServerConfig(
        ledger=str(tmp / f"{name}.db"), data_dir=tmp / f"data-{name}", import_dir=tmp / "imp",
        insecure_seed=11, spark=SparkSettings(query_seconds=seconds),
    )  # fmt: skip
    cur = Curator(cfg)
    cur.start()
    return cur


def _analyst(cur: Curator, dataset: str) -> Any:
    a = cur.add_analyst("ann")
    cur.ledger.set_budget(a["id"], dataset, 1e4, 0.5)
    return cur.authenticate(a["key"])


QUERIES: list[dict[str, Any]] = [
    {"query": "count", "epsilon": 1.0},
    {"query": "sum", "column": "age", "epsilon": 1.0},
    {"query": "mean", "column": "kids", "epsilon": 1.0},
    {"query": "var", "column": "age", "epsilon": 1.0},
    {"query": "histogram", "column": "city", "epsilon": 1.0},
    {"query": "quantiles", "column": "age", "q": [0.25, 0.5], "epsilon": 1.0},
    {"query": "group_by", "by": ["city"], "epsilon": 1.0, "aggregations": [
        {"stat": "count"}, {"stat": "sum", "column": "age"}, {"stat": "mean", "column": "kids"}]},
    {"query": "synthesize", "columns": ["age", "city"], "rows": 20, "bins": 4,
     "method": "independent", "epsilon": 1.0, "delta": 1e-6},
]  # fmt: skip


@pytest.fixture(scope="module")
def answered(tmp_path_factory: pytest.TempPathFactory, spark_sessions: Any) -> Any:
    """The same queries on a file-registered dataset and on its Spark-backed twin."""
    spark_sessions.get("local")
    tmp = tmp_path_factory.mktemp("spark-service")
    _write(tmp / "imp")
    out = {}
    spark_source = {"spark": {"parquet": "t.parquet"}}
    for kind, where in (("file", {"source": "t.parquet"}), ("spark", spark_source)):
        cur = _service(tmp, kind)
        cur.register_dataset({"name": "t", "columns": COLUMNS, "total_epsilon": 1e4,
                              "total_delta": 0.5, **where})  # fmt: skip
        who = _analyst(cur, "t")
        out[kind] = (cur, who, [cur.query(who, {"dataset": "t", **q}) for q in QUERIES])
    return out


def _answer(result: dict[str, Any]) -> Any:
    return (result["value"], result["ci"], result["labels"], result["epsilon"], result["delta"])


@pytest.mark.parametrize("i", range(len(QUERIES)), ids=[q["query"] for q in QUERIES])
def test_spark_dataset_answers_as_the_registered_file(answered: Any, i: int) -> None:
    """Same data, same seed: the same answer, noise and interval included, bit for bit."""
    (_, _, file), (cur, _, spark) = answered["file"], answered["spark"]
    assert cur.spark.backs("t") and not answered["file"][0].spark.backs("t")
    assert spark[i]["status"] == "released"
    assert _answer(spark[i]) == _answer(file[i])


def test_spark_dataset_schema_and_listing(answered: Any) -> None:
    cur = answered["spark"][0]
    assert cur.schema("t").to_dict() == answered["file"][0].schema("t").to_dict()
    stored = cur.config.data_dir / "t"
    assert sorted(p.name for p in stored.iterdir()) == ["data.json", "schema.json", "spark.json"]


def test_spark_dataset_on_the_event_loop(answered: Any) -> None:
    """The service's async path: a sum on new bounds is computed by Spark off the loop, then,
    with its exact aggregate remembered, answered on the loop (no Spark job, no JVM call)."""
    cur, who, _ = answered["spark"]
    body = {"dataset": "t", "query": "sum", "column": "age", "bounds": [0, 50], "epsilon": 1.0}
    assert cur.answers_inline(body)
    first = asyncio.run(cur.query_async(who, body))
    second = asyncio.run(cur.query_async(who, body))
    assert first["status"] == second["status"] == "released"
    assert first["epsilon"] == second["epsilon"] == 1.0


def test_spark_registration_refusals(tmp_path: Path, spark_sessions: Any) -> None:
    """Refused from the table's schema or the spec, nothing registered; a missing id told to
    the admin (who sees the data), as for a file."""
    spark_sessions.get("local")
    _write(tmp_path / "imp")
    cur = _service(tmp_path, "refusals")
    base = {"name": "u", "total_epsilon": 1.0, "spark": {"parquet": "t.parquet"},
            "columns": COLUMNS}  # fmt: skip
    for spec, words in [
        ({**base, "spark": {"parquet": "../t.parquet"}}, "import directory"),
        ({**base, "spark": {"table": "x; drop"}}, "db.table"),
        ({**base, "spark": {"parquet": "t.parquet", "table": "t"}}, "spark must be"),
        ({**base, "columns": [{"name": "nope", "type": "float", "bounds": [0, 1]}]}, "no column"),
        (
            {
                **base,
                "columns": [
                    {
                        "name": "rep",
                        "type": "local",
                        "protocol": "GRR",
                        "epsilon": 1,
                        "categories": ["a", "b"],
                    }
                ],
            },
            "local",
        ),
        ({**base, "privacy_unit": "age", "columns": [{"name": "age", "type": "id"}]}, "missing"),
    ]:
        with pytest.raises(DataError, match=words):
            cur.register_dataset(spec)
    assert cur.ledger.datasets() == []


def test_spark_cleaning_of_text_cells(spark_sessions: Any) -> None:
    """Numbers stored as text are parsed as file ingestion parses them (an unparsable cell is
    missing, never an error, ANSI mode or not); categories from numbers compared as text."""
    from dpkit.server._schema import DatasetSchema, clean_column_mask
    from dpkit.server._spark_tables import cleaned_frame

    spark = spark_sessions.get("local")
    cells = [("1.5", 2), ("abc", 1), (None, None), (" 0.25", 7), ("-inf", 1)]
    raw = spark.createDataFrame(cells, "x string, k long")
    schema = DatasetSchema.from_dict({"name": "c", "columns": [
        {"name": "x", "type": "float", "bounds": [0, 1]},
        {"name": "k", "type": "category", "categories": ["1", "2"]}]})  # fmt: skip
    frame, _ = cleaned_frame(raw, schema)
    rows = frame.collect()
    for i, col in enumerate(schema.columns):
        want = clean_column_mask(col, [c[i] for c in cells])[0].tolist()
        assert [r[col.name] for r in rows] == want


def test_spark_dataset_with_a_unit_column(answered: Any) -> None:
    """A person's rows bounded on Spark, the unit being the table's own id value."""
    cur, who, _ = answered["spark"]
    cur.register_dataset({"name": "v", "privacy_unit": "user", "total_epsilon": 100.0,
                          "spark": {"parquet": "t.parquet"},
                          "columns": [{"name": "user", "type": "id"}, *COLUMNS]})  # fmt: skip
    cur.ledger.set_budget(who.id, "v", 10.0, 0.0)
    out = cur.query(who, {"dataset": "v", "query": "group_by", "by": ["city"], "max_rows": 2,
                          "max_groups": 1, "epsilon": 1.0})  # fmt: skip
    assert out["status"] == "released"
    assert [r["city"] for r in out["value"]] == [*CITIES, "(other)"]
    with pytest.raises(DataError, match="several rows per person"):
        cur.query(who, {"dataset": "v", "query": "count", "epsilon": 1.0})


def test_spark_query_past_the_limit_is_cancelled_and_refunded(
    tmp_path: Path, spark_sessions: Any
) -> None:
    """A deliberately slow job (a UDF that sleeps) under a 1 s limit: its job group is cancelled,
    the query fails after its charge and is refunded (no noise was drawn); the thread's job
    group is cleared, so its next job is not in the cancelled group."""
    from pyspark.sql import functions as f

    spark = spark_sessions.get("local")
    slow = f.udf(lambda v: (__import__("time").sleep(0.2), v)[1], "double")
    frame = spark.range(400).select(f.col("id").cast("double").alias("x"))
    frame.select(slow("x").alias("x")).createOrReplaceTempView("dpkit_slow")
    (tmp_path / "imp").mkdir()
    cur = _service(tmp_path, "slow", seconds=1.0)
    cols = [{"name": "x", "type": "float", "bounds": [0, 400]}]
    # registration's row count does not read the slow column (Spark prunes it)
    cur.register_dataset({"name": "slow", "columns": cols, "total_epsilon": 10.0,
                          "spark": {"table": "dpkit_slow"}})  # fmt: skip
    who = _analyst(cur, "slow")
    with pytest.raises(QueryFailedError, match="refunded") as err:
        cur.query(who, {"dataset": "slow", "query": "var", "column": "x", "epsilon": 1.0})
    assert isinstance(err.value.__cause__, QueryTimeoutError)
    (charge,) = cur.ledger.charges(who.id)
    assert charge.status == "refunded"
    (budget,) = cur.ledger.budgets(who.id)
    assert budget["spent_epsilon"] == 0.0
    sc = spark.sparkContext
    assert sc.getLocalProperty("spark.jobGroup.id") is None
    tracker = sc.statusTracker()
    deadline = time.monotonic() + 60  # the cancelled tasks stop (not a timing assertion)
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tracker.getActiveJobsIds() == []
    assert spark.range(3).count() == 3


def test_spark_settings_from_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "curator.toml").write_text(
        '[spark]\nmaster = "spark://head:7077"\nquery_seconds = 12.5\n'
        '[spark.conf]\n"spark.executor.memory" = "4g"\n'
        '[[datasets]]\nname = "v"\nspark = {table = "db.visits"}\ntotal_epsilon = 1.0\n'
        'columns = [{name = "x", type = "float", bounds = [0, 1]}]\n'
    )
    cfg = load_config(tmp_path / "curator.toml")
    assert cfg.spark == SparkSettings("spark://head:7077", "dpkit-curator", 12.5,
                                      (("spark.executor.memory", "4g"),))  # fmt: skip
    assert cfg.datasets[0]["spark"] == {"table": "db.visits"}
    assert load_config(_toml(tmp_path, "")).spark is None
    s = spark_settings({"master": "local[2]", "query_seconds": 30,
                        "conf": {"spark.ui.enabled": False}})  # fmt: skip
    assert s == SparkSettings("local[2]", "dpkit-curator", 30.0, (("spark.ui.enabled", "false"),))
    assert spark_settings(None) is None
    for bad in ({"query_seconds": 0}, {"master": ""}, {"mastr": "x"}, {"conf": [1]}):
        with pytest.raises(DataError):
            spark_settings(bad)


def _toml(folder: Path, text: str) -> Path:
    (folder / "plain.toml").write_text(text)
    return folder / "plain.toml"
