"""SQL on Spark tables: the same compiled query, run by :mod:`dpkit.frame`'s Spark engine.

A query whose private table is a Spark DataFrame (or the name of a table registered in the
active Spark session) is planned twice from the same compiled text:

* the *checked* plan is the Polars plan on an empty frame with the Spark table's schema, so
  every check the Polars path makes (types against the metadata, row-wise steps, the frame's
  plan, the post-processing) runs here, from the schema alone, with the same refusals;
* the *Spark* plan runs the query's row-wise steps (public joins, WHERE, the expressions that
  keys and aggregates read) on the executors, as the very same Polars expressions applied to
  each Arrow batch (``mapInArrow``: a step is row-wise, so a batch at a time computes what the
  whole table would), then :mod:`dpkit.frame`'s Spark engine bounds and aggregates exactly.

The private table's identity is fixed before any step, as on Polars: the frame query is made
on the Spark DataFrame (its hidden unit column added by Spark) and the steps carry that column
through. Public tables are public: one given as a Spark DataFrame is collected to the driver,
and every public table travels to the executors inside the step. A private table joined on
the unit (BigQuery's allowance) is joined by Spark.

BigQuery's per-unit values (a unit's rows, non-null rows, sum or average within a group) are
Spark windows over (unit, keys); a sum of floats is taken in ascending order of its values, so
it is the same on every run and partitioning, and equal to the Polars path's whenever the sum
is exact (integer values, or any values on a grid whose sums stay below 2**53 steps).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dpkit.errors import DataError
from dpkit.frame import GroupedQuery, Query
from dpkit.frame._engine import is_spark, polars
from dpkit.frame._table import UNIT_ID

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.sql._query import SQLQuery

__all__ = ["is_session", "named_table", "spark_plans", "spark_table"]

_HINT = "Spark tables need PySpark: pip install 'dpkit[spark]'"


def _pyspark(module: str) -> Any:
    try:
        return importlib.import_module(f"pyspark.sql.{module}")
    except ImportError as exc:  # pragma: no cover - the test environment has pyspark
        raise ImportError(_HINT) from exc


def is_session(obj: object) -> bool:
    """Whether ``obj`` is a SparkSession (by type name: pyspark is not imported)."""
    cls = type(obj)
    return cls.__name__ == "SparkSession" and cls.__module__.startswith("pyspark.")


def spark_table(session: Any, name: str) -> Any:
    """The table registered under ``name`` in ``session`` (its plan only: no job runs)."""
    try:
        return session.table(name)
    except Exception as exc:  # Spark's message may list the catalog: not repeated
        raise DataError(
            f"no Spark table {name!r} in the session ({type(exc).__name__}); register it "
            "(DataFrame.createOrReplaceTempView or a catalog table) or give the DataFrame."
        ) from None


def named_table(value: object) -> Any:
    """The data for a table: a frame as given, or, for a string, the Spark table of that name
    in the active Spark session."""
    if not isinstance(value, str):
        return value
    session = _pyspark("session").SparkSession.getActiveSession()
    if session is None:
        raise DataError(
            "a table given by name is a Spark table, and no Spark session is active; give the "
            "DataFrame, or start a SparkSession first."
        )
    return spark_table(session, value)


def _empty_like(sdf: Any) -> Any:
    """An empty Polars LazyFrame with ``sdf``'s schema, as Arrow carries it to Polars."""
    pl = polars()
    to_arrow = _pyspark("pandas.types").to_arrow_schema
    try:
        schema = to_arrow(sdf.schema)
    except Exception as exc:
        raise DataError(
            f"the Spark table has a column type Arrow cannot carry ({type(exc).__name__}); "
            "cast it (or drop it) before the query."
        ) from None
    return pl.from_arrow(schema.empty_table()).lazy()


def _collect(sdf: Any) -> Any:
    """A public Spark table on the driver, as Polars."""
    pl = polars()
    try:
        return pl.from_arrow(sdf.toArrow())
    except Exception as exc:
        raise DataError(f"the public Spark table cannot be read ({type(exc).__name__}).") from None


@dataclass(frozen=True)
class RowSteps:
    """The query's row-wise steps as Polars expressions, applied to one batch at a time on the
    executors (picklable: public tables are collected frames)."""

    joins: tuple[tuple[Any, tuple[str, ...], str], ...]  # (public frame, on, how)
    where: Any
    derived: tuple[tuple[str, Any], ...]
    inputs: tuple[tuple[str, Any], ...]  # BigQuery: the row-wise inputs of the windows
    out: tuple[tuple[str, Any], ...]  # output column, and the Polars type to cast to (or None)

    def transform(self, lf: Any) -> Any:
        """The steps, in the Polars plan's order (joins, WHERE, then the expressions)."""
        for frame, on, how in self.joins:
            lf = lf.join(frame.lazy(), on=list(on), how=how)
        if self.where is not None:
            lf = lf.filter(self.where)
        if self.derived:
            lf = lf.with_columns(**dict(self.derived))
        if self.inputs:
            lf = lf.with_columns(**dict(self.inputs))
        return lf

    def apply(self, lf: Any) -> Any:
        """The steps, then the output columns with their Spark-carried types."""
        pl = polars()
        return self.transform(lf).select(
            [pl.col(n) if t is None else pl.col(n).cast(t) for n, t in self.out]
        )

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        pl = polars()
        for batch in batches:
            yield from self.apply(pl.from_arrow(batch).lazy()).collect().to_arrow().to_batches()


def _spark_type(pl: Any, t: Any, st: Any) -> tuple[Any, Any]:
    """(the Polars type a new column is cast to on the executors, its Spark type)."""
    exact = [
        (pl.Boolean, st.BooleanType()),
        (pl.Int8, st.ByteType()),
        (pl.Int16, st.ShortType()),
        (pl.Int32, st.IntegerType()),
        (pl.Int64, st.LongType()),
        (pl.Float32, st.FloatType()),
        (pl.Float64, st.DoubleType()),
        (pl.String, st.StringType()),
        (pl.Date, st.DateType()),
    ]
    for p, s in exact:
        if t == p:
            return p, s
    wider = {pl.UInt8: pl.Int16, pl.UInt16: pl.Int32, pl.UInt32: pl.Int64, pl.Null: pl.String}
    for p, w in wider.items():
        if t == p:
            return _spark_type(pl, w, st)
    raise DataError(
        f"an expression of the query makes a column of type {t}, which the Spark path does "
        "not carry; cast it in the query (CAST(... AS DOUBLE))."
    )


def _row_pass(sdf: Any, steps: RowSteps, keep: list[str], mirror: Any) -> Any:
    """``sdf`` after the row-wise steps, with the columns ``keep`` only (one Python pass on the
    executors). ``mirror``: the same steps on an empty frame of ``sdf``'s schema."""
    pl = polars()
    st = _pyspark("types")
    fields = {f.name: f for f in sdf.schema.fields}
    schema = mirror.collect_schema()
    out: list[tuple[str, Any]] = []
    spark_fields = []
    for n in keep:
        if n in fields and not any(n == d for d, _ in (*steps.derived, *steps.inputs)):
            out.append((n, None))
            spark_fields.append(fields[n])
        else:
            cast, stype = _spark_type(pl, schema[n], st)
            out.append((n, cast))
            spark_fields.append(st.StructField(n, stype, True))
    steps = replace(steps, out=tuple(out))
    return sdf.mapInArrow(steps, st.StructType(spark_fields))


def _roots(exprs: list[Any]) -> set[str]:
    names: set[str] = set()
    for e in exprs:
        names |= {str(n) for n in e.meta.root_names()}
    return names


def spark_plans(sq: SQLQuery, given: dict[str, Any]) -> tuple[GroupedQuery, GroupedQuery]:
    """(the checked Polars plan on the schema, the Spark plan) of a query on a Spark table."""
    c = sq._c
    srcs = c.scope.sources
    f = _pyspark("functions")
    mirror: dict[str, Any] = {}
    for s in srcs:
        raw = given[s.table.name]
        if s.role == "public":
            mirror[s.table.name] = _collect(raw) if is_spark(raw) else raw
        elif is_spark(raw):
            mirror[s.table.name] = _empty_like(raw)
        else:
            raise DataError(
                "the private tables of one query run on one engine: give every private table "
                "as a Spark DataFrame (public tables may be any frame)."
            )
    checked = sq._frame_query(mirror)  # every refusal of the Polars path, from the schema
    base = given[srcs[0].table.name]
    unit = c.scope.unit
    if unit is not None:
        keep = f.col(unit).isNotNull()  # dropped, never refused (as on Polars)
        if base.schema[unit].dataType.typeName() in ("double", "float"):
            keep = keep & ~f.isnan(f.col(unit))  # a NaN unit is null too (as the frame)
        base = base.filter(keep)
    joins = []
    publics: dict[str, Any] = {}
    for s in srcs[1:]:
        if s.role == "unit_join":
            other = given[s.table.name].select(
                [f.col(col.name).alias(s.names[col.name.lower()]) for col in s.table.columns]
            )
            base = base.join(other, on=[p for p, _ in s.on], how="inner")
        else:
            data = sq._data(mirror, s.table.name)
            publics[s.alias] = data
            frame = sq._renamed(s, data).collect()
            joins.append((frame, tuple(p for p, _ in s.on), s.how))
    pk = sq._public_keys(publics)
    inputs, windows = _window_inputs(c.windows)
    steps = RowSteps(tuple(joins), c.where, tuple(c.derived.items()), tuple(inputs), ())
    keys = list(c.keys)
    values = sorted({col for a in c.aggs for col in a.columns})
    if c.bigquery:
        assert unit is not None  # BigQuery's clause refuses row privacy
        needed = _needed(base, steps, [unit, *keys], values)
        keep = list(dict.fromkeys([unit, *keys, *(n for n, _ in inputs)]))
        rows = _row_pass(base.select(needed), steps, keep, steps.transform(_plain(base, needed)))
        rows = _spark_windows(rows, windows)
        q = Query(rows.select(unit, *keys, *values), privacy_unit=unit, missing="drop")
        return checked, sq._grouped(q, pk)
    q = Query(base, privacy_unit=unit, missing="drop")
    t = q._table
    if joins or c.where is not None or c.derived:
        needed = _needed(t.data, steps, [UNIT_ID, *keys], values)
        keep = list(dict.fromkeys([UNIT_ID, *keys, *values]))
        data = t.data.select(needed)
        data = _row_pass(data, steps, keep, steps.transform(_plain(data, needed)))
    else:
        data = t.data.select(*dict.fromkeys([UNIT_ID, *keys, *values]))
    # the steps the Polars plan lists (the same steps, run by the executors)
    q._table = replace(t, data=data, steps=checked._table.steps)
    return checked, sq._grouped(q, pk)


def _plain(sdf: Any, names: list[str]) -> Any:
    return _empty_like(sdf.select(names))


def _needed(sdf: Any, steps: RowSteps, cols: list[str], values: list[str]) -> list[str]:
    """The columns of ``sdf`` the steps and the aggregation read (the rest stay in Spark)."""
    exprs = [e for e in (steps.where,) if e is not None]
    exprs += [e for _, e in (*steps.derived, *steps.inputs)]
    names = _roots(exprs) | set(cols) | set(values)
    for _, on, _ in steps.joins:
        names |= set(on)
    present = [fl.name for fl in sdf.schema.fields]
    return [n for n in present if n in names]


def _window_inputs(windows: dict[str, Any]) -> tuple[list[tuple[str, Any]], list[Any]]:
    """BigQuery's windows: the row-wise inputs (computed with the steps) and the windows."""
    pl = polars()
    inputs: list[tuple[str, Any]] = []
    spec: list[Any] = []
    for name, w in windows.items():
        if w.kind == "row":
            inputs.append((name, w.expr))
            continue
        src = f"{name}__in"
        if w.kind == "nn":
            inputs.append((src, w.expr.is_not_null().cast(pl.Int64)))
        elif w.kind in ("sum", "mean"):
            inputs.append((src, w.expr))
        spec.append((name, w.kind, src, w.part))
    return inputs, spec


def _spark_windows(sdf: Any, spec: list[Any]) -> Any:
    """Each unit's value in each group, by Spark windows over (unit, keys)."""
    f = _pyspark("functions")
    window = _pyspark("window").Window
    for name, kind, src, part in spec:
        w = window.partitionBy(*part)
        if kind == "rows":
            col = f.count(f.lit(1)).over(w).cast("double")
        elif kind == "nn":
            col = f.sum(f.col(src)).over(w).cast("double")
        else:
            # ascending values, all rows of the frame: one summation order on every run
            ordered = w.orderBy(f.col(src).asc_nulls_first()).rowsBetween(
                window.unboundedPreceding, window.unboundedFollowing
            )
            if kind == "sum":
                col = f.coalesce(f.sum(f.col(src)).over(ordered), f.lit(0.0))
            else:
                col = f.avg(f.col(src)).over(ordered)
        sdf = sdf.withColumn(name, col)
    return sdf
