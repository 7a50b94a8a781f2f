"""The Spark engine: Spark computes the exact bounded aggregates; the driver does the rest.

Spark runs only deterministic steps, the Polars engine's step by step. In Spark SQL: the rows
with a null or NaN in an aggregated column are dropped, each value is clamped and scaled (the
double ``f(clip(x)) · 2**k`` before its rounding) and each bucket index computed; then the only
Python on the executors, dpkit's keyed row hash (:func:`dpkit.frame._pipeline.row_hashes`, the
very function of the Polars engine, applied to each Arrow batch by ``mapInArrow``, since
AES-CMAC and keyed BLAKE2b are not Spark SQL functions); then, in Spark SQL again, the
stochastic rounding ``floor(y + u)`` with ``u`` from the row hash's low bits, one sign of zero
and one NaN for float keys, ``row_number`` windows ordered by the hashes for the contribution
bounds, and integer sums per key. Each per-row number is made by the same IEEE 754 operations,
in the same order, as by :func:`dpkit.frame._pipeline.prepare` (``greatest``/``least`` clamp as
Polars' ``clip`` does for every non-NaN value; the JVM never fuses a multiply and an add), so
the integers are bit-identical. The small table of exact totals is collected to the driver,
and key selection, noise and estimates run through :func:`dpkit.frame._finish.finish`, the
code the Polars engine uses. Ties in a hash order only rows equal in every hashed column, so
Spark's and Polars' tie-breaking cannot change a sum.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

from dpkit._missing import missing_error
from dpkit.errors import DataError
from dpkit.frame._aggs import Measure
from dpkit.frame._calibrate import Bounding, NoisePlan
from dpkit.frame._engine import polars
from dpkit.frame._pipeline import (
    ALL,
    OCC,
    ROWS,
    UNITS,
    WEIGHT,
    G,
    H,
    Layout,
    row_hashes,
)
from dpkit.frame._selection import weights
from dpkit.stats._spark import failure_name

__all__ = ["spark_refuse_missing", "spark_schema_check", "spark_totals"]

_LOW = 1 << 32  # the row hash's low 32 bits draw the rounding uniform (see _pipeline._row_int)

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


def _hashed_schema(df: Any, names: Sequence[str], t: Any) -> Any:
    """The hash pass's output: ``names`` as they are, then the two hashes."""
    fields = {f.name: f for f in df.schema.fields}
    out = [fields[n] for n in names]
    return t.StructType([*out, t.StructField(H, t.LongType()), t.StructField(G, t.LongType())])


def _hash_batches(layout: Layout, seeds: Sequence[int], occurrence: bool, keep: list[str]) -> Any:
    """The keyed row hashes of each Arrow batch (a picklable closure for the executors)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        pl = polars()
        hashes = row_hashes(layout, seeds, occurrence=occurrence)
        for batch in batches:
            lf = pl.from_arrow(batch).lazy().with_columns(hashes)
            yield from lf.select([*keep, H, G]).collect().to_arrow().to_batches()

    return run


def _scaled(f: Any, m: Measure, k: int) -> tuple[Any, int, int]:
    """``f(clip(x)) · 2**k``, the double a value measure rounds, and its integer range: the
    operations of :func:`dpkit.frame._pipeline._row_int`, in its order."""
    assert m.bounds is not None and m.column is not None
    lo, hi = m.bounds
    x = f.least(f.greatest(f.col(m.column).cast("double"), f.lit(float(lo))), f.lit(float(hi)))
    if m.transform == "plain":
        fx, flo, fhi = x, lo, hi
    else:
        mid = lo / 2 + hi / 2
        inv = 2.0 / (hi - lo) if math.isfinite(hi - lo) else 1.0 / (hi / 2 - lo / 2)
        fx = (x - f.lit(float(mid))) * f.lit(float(inv))
        flo, fhi = -1.0, 1.0
        if m.transform == "square":
            fx, flo = fx * fx, 0.0
    t_lo, t_hi = math.floor(math.ldexp(flo, k)), math.floor(math.ldexp(fhi, k))
    return fx * f.lit(math.ldexp(1.0, k)), t_lo, t_hi


def _rounded(f: Any, y: str, t_lo: int, t_hi: int) -> Any:
    """``floor(y + u)`` clipped to its range, ``u`` from the low 32 bits of the row hash."""
    low = f.col(H).bitwiseAND(f.lit(_LOW - 1)).cast("double")
    u = (low + f.lit(0.5)) * f.lit(2.0**-32)
    v = f.floor(f.col(y) + u).cast("long")
    return f.least(f.greatest(v, f.lit(t_lo).cast("long")), f.lit(t_hi).cast("long"))


def _bucket(f: Any, m: Measure) -> Any:
    """A bucket index (null outside the edges), as :func:`dpkit.frame._pipeline._bucket`."""
    assert m.column is not None
    x = f.col(m.column).cast("double")
    if m.edges:
        e = m.edges
        inside = (x >= f.lit(float(e[0]))) & (x <= f.lit(float(e[-1])))
        idx = f.lit(0).cast("long")
        for v in e[1:-1]:
            idx = idx + (x >= f.lit(float(v))).cast("long")
        return f.when(inside, idx)
    assert m.bounds is not None
    lo, hi = m.bounds
    leaves = m.branching**m.levels
    clipped = f.least(f.greatest(x, f.lit(float(lo))), f.lit(float(hi)))
    leaf = f.floor((clipped - f.lit(float(lo))) * f.lit(leaves / (hi - lo))).cast("long")
    return f.least(f.greatest(leaf, f.lit(0).cast("long")), f.lit(leaves - 1).cast("long"))


def _canonical(f: Any, key: str, dtype: Any) -> Any:
    """One sign of zero and one NaN for a float key, as the Polars engine's ``_canonical``."""
    c = f.col(key)
    zero, nan = f.lit(0.0).cast(dtype), f.lit(float("nan")).cast(dtype)
    return f.when(c == 0, zero).when(f.isnan(c), nan).otherwise(c).alias(key)


def _prepare(
    df: Any, layout: Layout, plan: NoisePlan, seeds: Sequence[int], occurrence: bool
) -> Any:
    """Step 1 of the pipeline on Spark: SQL before and after the one Python pass (the hash)."""
    f, _, t = _spark()
    if layout.values:
        ok = [f.col(c).isNotNull() & ~f.isnan(f.col(c).cast("double")) for c in layout.values]
        cond = ok[0]
        for o in ok[1:]:
            cond = cond & o
        df = df.filter(cond)
    pre: list[Any] = []
    post: list[Any] = []
    for mn in plan.measures:
        m = mn.measure
        if m.kind == "value":
            y, t_lo, t_hi = _scaled(f, m, mn.exponent)
            pre.append(y.alias(f"__y{len(pre)}"))
            post.append(_rounded(f, f"__y{len(pre) - 1}", t_lo, t_hi).alias(m.name))
        elif m.kind == "bucket":
            pre.append(_bucket(f, m).alias(f"__y{len(pre)}"))
            post.append(f.col(f"__y{len(pre) - 1}").alias(m.name))
    occ = [OCC] if occurrence else []
    df = df.select(layout.unit, *layout.keys, *layout.values, *occ, *pre)
    keep = [layout.unit, *layout.keys, *(f"__y{i}" for i in range(len(pre)))]
    hashed = df.mapInArrow(
        _hash_batches(layout, seeds, occurrence, keep), _hashed_schema(df, keep, t)
    )
    types = {fl.name: fl.dataType for fl in hashed.schema.fields}
    keys = [
        _canonical(f, k, types[k]) if isinstance(types[k], t.FloatType | t.DoubleType) else f.col(k)
        for k in layout.keys
    ]
    return hashed.select(layout.unit, *keys, H, G, *post)


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
    f, window, _ = _spark()
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
    prep = _prepare(df, layout, plan, seeds, bool(occ))
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
        )
        return _collect(totals, pl), None
    # a null key value is a group of its own (as in groupBy): the key joins match nulls
    kept = _join_null_safe(rows, pairs.select(unit, *keys), [unit, *keys], "left_semi")
    if b.max_rows_per_unit is not None:
        rn = f.row_number().over(window.partitionBy(unit).orderBy(H))
        kept = kept.withColumn("__rn", rn).filter(f.col("__rn") <= b.max_rows_per_unit)
    kept = kept.cache()  # read by the totals and the bucket counts: prepare runs once
    try:
        per_key = pairs.groupBy(*keys).agg(
            f.count(f.lit(1)).cast("long").alias(UNITS),
            f.sum(WEIGHT).cast("long").alias(WEIGHT),
        )
        sums = kept.groupBy(*keys).agg(
            f.count(f.lit(1)).cast("long").alias(ROWS),
            *(f.sum(c).cast("long").alias(c) for c in values),
        )
        joined = _join_null_safe(per_key, sums, keys, "left")
        joined = joined.fillna(0, subset=[ROWS, *values])
        totals = _collect(joined, pl)
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


def _join_null_safe(left: Any, right: Any, on: Sequence[str], how: str) -> Any:
    """``left.join(right, on, how)`` with null equal to null in every ``on`` column (a plain
    equi-join drops null keys); the right side's copies of ``on`` are not kept."""
    renamed = right.select(
        *(right[c].alias(f"__r{i}") if c in on else right[c] for i, c in enumerate(right.columns))
    )
    names = {c: f"__r{i}" for i, c in enumerate(right.columns) if c in on}
    cond = [left[c].eqNullSafe(renamed[names[c]]) for c in on]
    out = left.join(renamed, on=cond, how=how)
    return out.drop(*names.values()) if how != "left_semi" else out


def _collect(df: Any, pl: Any) -> Any:
    if hasattr(df, "toArrow"):
        return pl.from_arrow(df.toArrow())
    return pl.from_pandas(df.toPandas())  # pragma: no cover - Spark < 4
