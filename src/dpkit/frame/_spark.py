"""The Spark engine: Spark computes the exact bounded aggregates; the driver does the rest.

Spark runs only deterministic steps: the row-wise *prepare* step of the Polars engine (the very
same function, applied to each Arrow batch by ``mapInArrow``, so hashes and fixed-point integers
are bit-identical), then ``row_number`` windows ordered by the keyed hashes for the contribution
bounds and integer sums per key. The small table of exact totals is collected to the driver, and
key selection, noise and estimates run through :func:`dpkit.frame._finish.finish`, the code the
Polars engine uses. Ties in a hash order only rows equal in every hashed column, so Spark's and
Polars' tie-breaking cannot change a sum.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import Any

from dpkit._missing import missing_error
from dpkit.errors import DataError
from dpkit.frame._calibrate import Bounding, NoisePlan
from dpkit.frame._engine import polars
from dpkit.frame._pipeline import ALL, OCC, ROWS, UNITS, WEIGHT, G, H, Layout, prepare
from dpkit.frame._selection import weights
from dpkit.stats._spark import failure_name

__all__ = ["spark_refuse_missing", "spark_schema_check", "spark_totals"]

_HINT = "the Spark engine needs PySpark: pip install 'dpkit[spark]'"


def _spark() -> tuple[Any, Any, Any]:
    try:
        f = importlib.import_module("pyspark.sql.functions")
        w = importlib.import_module("pyspark.sql.window")
        t = importlib.import_module("pyspark.sql.types")
    except ImportError as exc:  # pragma: no cover - the test environment has pyspark
        raise ImportError(_HINT) from exc
    return f, w.Window, t


def spark_schema_check(df: Any, by: Sequence[str], layout: Layout) -> None:
    """Missing columns and non-numeric aggregated columns, from the Spark schema (no job).

    The unit's identity column was added when the query was made (no step runs on Spark)."""
    _, _, t = _spark()
    fields = {f.name: f.dataType for f in df.schema.fields}
    wanted = [*by, *layout.values]
    missing = [c for c in wanted if c not in fields]
    if missing:
        shown = [c for c in fields if c != layout.unit]
        raise DataError(f"unknown column(s) {missing}; the table has {shown}.")
    for c in layout.values:
        if not isinstance(fields[c], t.NumericType):
            raise DataError(f"column {c!r} must be numeric to be aggregated, not {fields[c]}.")


def _prepared_schema(df: Any, layout: Layout, plan: NoisePlan, t: Any) -> Any:
    fields = {f.name: f for f in df.schema.fields}
    out = [fields[layout.unit], *(fields[k] for k in layout.keys)]
    out += [t.StructField(H, t.LongType()), t.StructField(G, t.LongType())]
    out += [
        t.StructField(m.measure.name, t.LongType())
        for m in plan.measures
        if m.measure.kind in ("value", "bucket")
    ]
    return t.StructType(out)


def _prepare_batches(
    layout: Layout, plan: NoisePlan, seeds: Sequence[int], occurrence: bool
) -> Any:  # a picklable closure for the executors
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        pl = polars()
        for batch in batches:
            frame = pl.from_arrow(batch)
            lf = frame.lazy()
            out = prepare(lf, layout, plan, seeds, own_unit=False, occurrence=occurrence).collect()
            yield from out.to_arrow().to_batches()

    return run


def spark_totals(
    df: Any,
    own_unit: bool,
    bounding: Bounding,
    layout: Layout,
    plan: NoisePlan,
    seeds: Sequence[int],
) -> tuple[Any, Any]:
    """Exact bounded totals computed by Spark, returned as Polars frames on the driver.

    ``df`` carries the unit's identity in ``layout.unit`` (added when the query was made: a copy
    of the unit column, or a row id where each row is its own unit). Runs before the accountant
    is charged, so a failing Spark job (an unreadable input, a lost executor, a failing
    transformation) is raised as a :class:`DataError` and charges nothing.
    """
    try:
        return _spark_totals(df, own_unit, bounding, layout, plan, seeds)
    except DataError:
        raise
    except Exception as exc:
        raise DataError(
            f"the Spark job computing the bounded aggregates failed ({failure_name(exc)}); "
            "nothing was released or charged. Check that the input is readable and that its "
            "transformations run (Spark's own message is not repeated: it may quote data)."
        ) from None


def _spark_totals(
    df: Any,
    own_unit: bool,
    b: Bounding,
    layout: Layout,
    plan: NoisePlan,
    seeds: Sequence[int],
) -> tuple[Any, Any]:
    f, window, t = _spark()
    pl = polars()
    if layout.keys == (ALL,):
        df = df.withColumn(ALL, f.lit(0).cast("int"))
    unit, keys = layout.unit, list(layout.keys)
    if own_unit:
        # the row id (given when the query was made) tells rows apart; the row hash takes the
        # occurrence number among identical rows instead (see prepare), so one row more or
        # less changes no other row's integers
        content = window.partitionBy(*keys, *layout.values).orderBy(f.lit(0))
        df = df.withColumn(OCC, f.row_number().over(content).cast("long") - 1)
    occ = [OCC] if own_unit else []
    df = df.select(unit, *keys, *layout.values, *occ)
    prep = df.mapInArrow(
        _prepare_batches(layout, plan, seeds, bool(occ)), _prepared_schema(df, layout, plan, t)
    )
    values = [m.measure.name for m in plan.measures if m.measure.kind == "value"]
    buckets = [m.measure.name for m in plan.measures if m.measure.kind == "bucket"]
    row_path = bool(buckets) or b.max_rows_per_unit is not None
    if b.max_rows == 1 and not row_path:  # the row with the smallest row hash, as in Polars
        pairs = prep.groupBy(unit, *keys).agg(
            f.first(G).alias(G),
            f.lit(1).cast("long").alias(ROWS),
            *(f.min_by(c, H).alias(c) for c in values),
        )
        rows = prep
    else:
        rn = f.row_number().over(window.partitionBy(unit, *keys).orderBy(H))
        rows = prep.withColumn("__rn", rn)
        rows = rows.filter(f.col("__rn") <= b.max_rows).drop("__rn")
        pairs = rows.groupBy(unit, *keys).agg(
            f.first(G).alias(G),
            f.count(f.lit(1)).alias(ROWS),
            *(f.sum(c).alias(c) for c in values),
        )
    pairs = pairs.withColumn("__gr", f.row_number().over(window.partitionBy(unit).orderBy(G)))
    pairs = pairs.filter(f.col("__gr") <= b.max_groups).drop("__gr")
    if plan.selection is not None and plan.selection.method == "gaussian":
        w = weights(b.max_groups)
        tcount = f.count(f.lit(1)).over(window.partitionBy(unit))
        table = f.array(*(f.lit(v).cast("long") for v in w))
        pairs = pairs.withColumn(WEIGHT, f.element_at(table, (tcount + 1).cast("int")))
    else:
        pairs = pairs.withColumn(WEIGHT, f.lit(0).cast("long"))
    if not row_path:
        totals = pairs.groupBy(*keys).agg(
            f.sum(ROWS).cast("long").alias(ROWS),
            *(f.sum(c).cast("long").alias(c) for c in values),
            f.count(f.lit(1)).cast("long").alias(UNITS),
            f.sum(WEIGHT).cast("long").alias(WEIGHT),
            _nulls(f, unit),
        )
        return _checked(_collect(totals, pl), unit), None
    kept = rows.join(pairs.select(unit, *keys), on=[unit, *keys], how="left_semi")
    if b.max_rows_per_unit is not None:
        rn = f.row_number().over(window.partitionBy(unit).orderBy(H))
        kept = kept.withColumn("__rn", rn).filter(f.col("__rn") <= b.max_rows_per_unit)
    kept = kept.cache()  # read by the totals and the bucket counts: prepare runs once
    try:
        per_key = pairs.groupBy(*keys).agg(
            f.count(f.lit(1)).cast("long").alias(UNITS),
            f.sum(WEIGHT).cast("long").alias(WEIGHT),
            _nulls(f, unit),
        )
        sums = kept.groupBy(*keys).agg(
            f.count(f.lit(1)).cast("long").alias(ROWS),
            *(f.sum(c).cast("long").alias(c) for c in values),
        )
        joined = per_key.join(sums, on=keys, how="left").fillna(0, subset=[ROWS, *values])
        totals = _checked(_collect(joined, pl), unit)
        if not buckets:
            return totals, None
        parts = [
            kept.filter(f.col(name).isNotNull())
            .groupBy(*keys, name)
            .agg(f.count(f.lit(1)).cast("long").alias("__count"))
            .select(
                *keys,
                f.lit(name).alias("__measure"),
                f.col(name).cast("long").alias("__bucket"),
                "__count",
            )
            for name in buckets
        ]
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        return totals, _collect(union, pl)
    finally:
        kept.unpersist()


def spark_refuse_missing(df: Any, values: Sequence[str]) -> None:
    """``missing="raise"`` on Spark: refuse, before anything is charged, a table with a null or
    NaN in an aggregated column (the rows :func:`prepare` would drop). One job, stopped at the
    first such row."""
    f, _, _ = _spark()
    bad = None
    for c in values:
        col = f.col(c)
        cond = col.isNull() | f.isnan(col.cast("double"))
        bad = cond if bad is None else bad | cond
    try:
        found = df.filter(bad).limit(1).count()
    except Exception as exc:
        raise DataError(
            f"the Spark job checking for missing values failed ({failure_name(exc)}); nothing "
            "was released or charged."
        ) from None
    if found:
        raise missing_error("an aggregated column")


def _nulls(f: Any, unit: str) -> Any:
    """Pairs with a null unit, counted in the same job as the totals (no extra pass)."""
    return f.sum(f.col(unit).isNull().cast("long")).alias("__null_units")


def _checked(totals: Any, unit: str) -> Any:
    """Refuse null units (before anything is charged) and drop the check column.

    ``unit`` is the hidden identity column: the message does not name it."""
    if totals.height and int(totals["__null_units"].sum() or 0) > 0:
        raise DataError("the privacy unit column has null values; every row must belong to a unit.")
    return totals.drop("__null_units")


def _collect(df: Any, pl: Any) -> Any:
    if hasattr(df, "toArrow"):
        return pl.from_arrow(df.toArrow())
    return pl.from_pandas(df.toPandas())  # pragma: no cover - Spark < 4
