"""The exact aggregates of :mod:`dpkit.stats` computed by Spark, where the data are.

A statistic is a deterministic function of the data (a count, integer sums of per-record
fixed-point integers, bin counts) followed by noise. When ``x`` is a PySpark DataFrame (one
column; one per dimension for :func:`~dpkit.stats.histogram`), the first part runs as one Spark
job of plain SQL expressions (no Python on the executors) and only the few exact integers come
back to the driver, where the very code of the NumPy path calibrates, charges and draws the noise
with dpkit's exact samplers. Same data, same seed: the same release, bit for bit.

Each per-record integer is computed by the same IEEE 754 operations as on NumPy, in the same
order: ``greatest``/``least`` clamp as ``np.clip`` does (for every non-NaN value, ±inf
included), ``*``, ``-`` and ``/`` on doubles round the same way on the JVM (which never fuses
them), and ``rint`` is round-half-even like ``np.rint``. The fixed-point sum
``rint(clip(x) · 2**k)`` is the integer :func:`dpkit.stats._fixed.fixed_sum` adds (its proof).
Sums are taken as ``DECIMAL(38, 0)``: exact for any number of records (a ``bigint`` sum would
wrap silently where ANSI mode is off), so no float is ever reduced in Spark.

Missing values (null or NaN in a read column) follow :mod:`dpkit._missing`: ``"drop"`` filters
the records out; under ``"raise"`` they are counted in the statistic's own job (one job per
statistic) and refused, before anything is charged, when there is one. A failing Spark job is a
:class:`~dpkit.errors.DataError` that names only the failure's class (Spark's message may quote
a record) and charges nothing.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpkit._missing import Missing, missing_error
from dpkit.errors import DataError
from dpkit.stats._data import FloatArray

__all__ = [
    "failure_name",
    "is_spark",
    "spark_count",
    "spark_fixed_sum",
    "spark_histogram",
    "spark_scaled_sums",
]

_HINT = "statistics on a Spark DataFrame need PySpark: pip install 'dpkit[spark]'"
_EXACT = "decimal(38,0)"  # exact integer sums, whatever the number of records


def is_spark(data: object) -> bool:
    """Whether ``data`` is a PySpark DataFrame (by type name: pyspark is not imported)."""
    cls = type(data)
    return cls.__name__ == "DataFrame" and cls.__module__.startswith("pyspark.")


def _functions() -> Any:
    try:
        return importlib.import_module("pyspark.sql.functions")
    except ImportError as exc:  # pragma: no cover - the test environment has pyspark
        raise ImportError(_HINT) from exc


def failure_name(exc: BaseException) -> str:
    """A failed Spark job's class and error condition: names only, never Spark's message (an
    executor's message can quote the offending record)."""
    parts = [type(exc).__name__]
    try:
        condition = exc.getCondition() if hasattr(exc, "getCondition") else None
        if condition is None and hasattr(exc, "java_exception"):  # a raw Py4JJavaError
            condition = exc.java_exception.getClass().getName()
    except Exception:  # the JVM may be gone: the Python class name is enough
        condition = None
    if isinstance(condition, str) and condition:
        parts.append(condition)
    return ", ".join(parts)


def _columns(df: Any, name: str, dims: int | None = 1) -> list[str]:
    """The data's columns, checked from the schema (no job): numeric, ``dims`` of them."""
    t = importlib.import_module("pyspark.sql.types")
    fields = list(df.schema.fields)
    if dims is not None and len(fields) != dims:
        raise DataError(
            f"{name} as a Spark DataFrame must have exactly {dims} column(s) (select them "
            f"first), not {len(fields)}."
        )
    for fld in fields:
        if not isinstance(fld.dataType, t.NumericType | t.BooleanType):
            raise DataError(f"{name}: column {fld.name!r} must be numeric, not {fld.dataType}.")
    return [fld.name for fld in fields]


def _run(job: Any) -> Any:
    try:
        return job()
    except DataError:
        raise
    except Exception as exc:
        raise DataError(
            f"the Spark job computing the exact aggregate failed ({failure_name(exc)}); nothing "
            "was released or charged (Spark's own message is not repeated: it may quote data)."
        ) from None


def _value(f: Any, c: str) -> Any:
    return f.col(c).cast("double")


def _bad(f: Any, cols: Sequence[str]) -> Any:
    """A record with a null or NaN in any read column (a missing value)."""
    bad: Any = f.lit(False)
    for c in cols:
        bad = bad | f.col(c).isNull() | f.isnan(_value(f, c))
    return bad


def _aggregate(df: Any, cols: Sequence[str], missing: Missing, name: str, **exprs: Any) -> Any:
    """One job: ``exprs`` over the records under the missing-value policy. Under ``"drop"`` the
    records with a missing value are filtered out; under ``"raise"`` they are counted in the
    same job (their values masked, so no expression sees a NaN) and refused, before anything is
    charged, when there is one."""
    f = _functions()
    bad = _bad(f, cols)
    if missing == "drop":
        rows, ok = df.filter(~bad), f.lit(True)
        masked = {k: e(ok) for k, e in exprs.items()}
    else:
        rows = df
        masked = {k: e(~bad) for k, e in exprs.items()}
        masked["__missing"] = f.sum(bad.cast("long"))
    out = _run(lambda: rows.agg(*(e.alias(k) for k, e in masked.items())).first())
    if missing == "raise" and int(out["__missing"] or 0):
        raise missing_error(name)
    return out


def _clip(f: Any, c: str, lo: float, hi: float) -> Any:
    return f.least(f.greatest(_value(f, c), f.lit(float(lo))), f.lit(float(hi)))


def _exact_sum(f: Any, expr: Any) -> Any:
    """The exact sum of a per-record integer-valued double over the records where ``ok``."""
    return lambda ok: f.sum(f.when(ok, expr.cast("long").cast(_EXACT)))


def _count(f: Any) -> Any:
    return lambda ok: f.count(f.when(ok, f.lit(1)))


def spark_count(df: Any, missing: Missing, name: str = "x") -> int:
    """The number of records (rows), after the missing-value policy."""
    f = _functions()
    cols = _columns(df, name, dims=None)
    return int(_aggregate(df, cols, missing, name, n=_count(f))["n"])


def spark_fixed_sum(
    df: Any, bounds: tuple[float, float], k: int, missing: Missing, name: str = "x"
) -> tuple[int, int]:
    """``(Σ rint(clip(x, L, U) · 2**k), n)``: :func:`~dpkit.stats._fixed.fixed_sum`'s integer
    and the number of records, in one job."""
    f = _functions()
    (c,) = _columns(df, name)
    t = f.rint(_clip(f, c, *bounds) * f.lit(math.ldexp(1.0, k)))
    out = _aggregate(df, [c], missing, name, t=_exact_sum(f, t), n=_count(f))
    return int(out["t"] or 0), int(out["n"])


def spark_scaled_sums(
    df: Any, bounds: tuple[float, float], missing: Missing, unit: float, name: str = "x"
) -> tuple[int, int, int]:
    """``(Σ rint(u · unit), Σ rint((u² − 1/2) · unit), n)`` with ``u`` the clamped record mapped
    to about [-1, 1] exactly as :func:`dpkit.stats._common.normalise` maps it (the variance's
    parts), in one job."""
    f = _functions()
    (c,) = _columns(df, name)
    lo, hi = bounds
    m = lo / 2 + hi / 2
    inv = 2.0 / (hi - lo) if math.isfinite(hi - lo) else 1.0 / (hi / 2 - lo / 2)
    u = (_clip(f, c, lo, hi) - f.lit(m)) * f.lit(inv)
    q = u * u - f.lit(0.5)
    s = f.lit(float(unit))
    out = _aggregate(
        df, [c], missing, name,
        s1=_exact_sum(f, f.rint(u * s)), s2=_exact_sum(f, f.rint(q * s)), n=_count(f),
    )  # fmt: skip
    return int(out["s1"] or 0), int(out["s2"] or 0), int(out["n"])


def spark_histogram(
    df: Any, edges: Sequence[FloatArray], missing: Missing, name: str = "x"
) -> FloatArray:
    """Counts per bin, as ``numpy.histogramdd`` counts them (bins ``[e_i, e_{i+1})``, the last
    one closed; records outside the edges not counted), in one job: records with a missing value
    form the group ``-1`` (refused under ``"raise"``, left out under ``"drop"``)."""
    f = _functions()
    cols = _columns(df, name, dims=len(edges))
    bad = _bad(f, cols)
    inside: Any = f.lit(True)
    index = f.lit(0).cast("long")
    for c, e in zip(cols, edges, strict=True):
        x = _value(f, c)
        inside = inside & (x >= f.lit(float(e[0]))) & (x <= f.lit(float(e[-1])))
        pos = f.lit(0).cast("long")
        for v in e[1:-1]:
            pos = pos + (x >= f.lit(float(v))).cast("long")
        index = index * f.lit(int(e.size - 1)) + pos
    shape = tuple(int(e.size - 1) for e in edges)
    bucket = f.when(bad, f.lit(-1).cast("long")).otherwise(index).alias("b")
    grouped = df.filter(bad | inside).groupBy(bucket).agg(f.count(f.lit(1)).alias("n"))
    counts = np.zeros(shape, dtype=np.float64)
    for r in _run(grouped.collect):
        b = int(r["b"])
        if b < 0:
            if missing == "raise":
                raise missing_error(name)
            continue
        counts[np.unravel_index(b, shape)] = float(r["n"])
    return counts
