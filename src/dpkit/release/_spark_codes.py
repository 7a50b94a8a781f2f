"""The synthesizer's encoded table on Spark: cell codes in Spark SQL, one job per marginal.

:meth:`Synthesizer.fit <dpkit.release.Synthesizer.fit>` reads the data only through the exact
marginal counts of the encoded table. For a PySpark DataFrame the table is encoded where the data
are, by SQL expressions that give every record the cell :meth:`Domain.encode
<dpkit.release.Domain.encode>` gives it (clamp to ``[lo, hi]``, ``rint`` for integer columns —
NumPy's ``round`` is half-even too — then the bin from the edges, atoms first; a category by
equality, ``other`` or dropped). Every marginal the fit may read (known from public parameters,
:func:`~dpkit.release._scan_codes.needed_marginals`) is then counted in one Spark job, a ``GROUP
BY GROUPING SETS`` aggregation with each record's state (kept, dropped, missing) in every set:
one pass over the data, one shuffle of the small partial counts, and the missing-value check in
the same job, all before the charge. The small dense tables are collected to the driver, where
the model is fitted with the code of the single-machine path (a subset's counts summed from a
superset's). Same data and seed: the same model and the same synthetic data.

A categorical column on Spark must be a string column with string categories, or a numeric or
boolean column with numeric categories (compared as Python compares them: ``1 == 1.0 ==
True``); other pairings are refused from the schema, before anything is charged.
"""

from __future__ import annotations

import importlib
import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._missing import Missing, check_missing, missing_error
from dpkit.errors import DataError
from dpkit.release._domain import DROPPED, MISSING, Categorical, Domain, Numeric
from dpkit.release._marginals import sub_marginal
from dpkit.release._scan_codes import prefetched

__all__ = ["SparkCodes", "encode_spark", "is_spark"]

IntArray = npt.NDArray[np.int64]
Cols = tuple[int, ...]

_STATE = "state"  # each record's: kept, dropped (a category with no place) or missing
_KEPT, _DROPPED, _MISSING = 0, 1, 2


def is_spark(data: object) -> bool:
    """Whether ``data`` is a PySpark DataFrame (by type name: pyspark is not imported)."""
    cls = type(data)
    return cls.__name__ == "DataFrame" and cls.__module__.startswith("pyspark.")


def _failure(exc: BaseException) -> DataError:
    return DataError(
        f"the Spark job computing a marginal failed ({type(exc).__name__}); Spark's own message "
        "is not repeated (it may quote data)."
    )


class SparkCodes:
    """Exact marginal counts of a Spark table, counted by one aggregation on the executors."""

    def __init__(self, codes: Any, shape: Sequence[int], tables: dict[Cols, IntArray]) -> None:
        self._codes = codes  # every record's cells and state (not cached: read again if needed)
        self._shape = tuple(int(d) for d in shape)
        self._tables = tables
        self.shape = (-1, len(shape))  # the number of records is private: never counted alone

    def marginal(self, shape: Sequence[int], cols: Sequence[int]) -> IntArray:
        """Exact counts per cell of the marginal on ``cols``: from the counted tables, or (a
        marginal outside them) one more Spark aggregation."""
        got = sub_marginal(self._tables, cols)
        if got is not None:
            return got
        key = tuple(sorted(int(c) for c in cols))
        self._tables.update(_grouped_counts(self._codes, self._shape, [key], "drop"))
        return self.marginal(shape, cols)

    def release(self) -> None:
        """Drop the count tables."""
        self._tables = {}


_MAX_KEYS = 63
"""Columns one GROUPING SETS job may group by besides the state: Spark numbers the grouping
columns in a 64-bit grouping id, so a query on more of them is refused."""


def _grouped_counts(
    codes: Any, shape: Sequence[int], sets: Sequence[Cols], missing: Missing
) -> dict[Cols, IntArray]:
    """The kept records' counts on every set of ``sets``, in one job (one per 63 columns of a
    wider table); under ``"raise"`` a record with a missing value is refused (every record is
    in every set of every job), before anything is charged."""
    chunks: list[list[Cols]] = []
    used: set[int] = set()
    for s in sets:  # which sets share a job: from the public shape and parameters only
        if not chunks or len(used | set(s)) > _MAX_KEYS:
            chunks.append([])
            used = set()
        chunks[-1].append(s)
        used |= set(s)
    out: dict[Cols, IntArray] = {}
    for chunk in chunks:
        tables, found_missing = _one_job(codes, shape, chunk)
        if missing == "raise" and found_missing:
            raise missing_error("the table")
        out.update(tables)
    return out


def _one_job(
    codes: Any, shape: Sequence[int], sets: Sequence[Cols]
) -> tuple[dict[Cols, IntArray], bool]:
    """The kept records' counts on ``sets`` in one GROUPING SETS job, and whether a record
    has a missing value."""
    grouping = ", ".join("(" + ", ".join([_STATE, *(f"c{c}" for c in s)]) + ")" for s in sets)
    cols = ", ".join(f"c{c}" for c in sorted({c for s in sets for c in s}))
    query = (
        f"SELECT {_STATE}, {cols}, COUNT(1) AS n FROM {{codes}} GROUP BY GROUPING SETS ({grouping})"
    )
    out = {s: np.zeros(tuple(int(shape[c]) for c in s), dtype=np.int64) for s in sets}
    by_cols = {frozenset(s): s for s in sets}
    try:
        rows = codes.sparkSession.sql(query, codes=codes).collect()
    except Exception as exc:
        raise _failure(exc) from None
    found_missing = False
    for r in rows:
        state = int(r[_STATE])
        if state != _KEPT:
            found_missing |= state == _MISSING
            continue
        # codes are never null, so the non-null columns name the grouping set
        s = by_cols[frozenset(int(k[1:]) for k in r.asDict() if k[0] == "c" and r[k] is not None)]
        out[s][tuple(int(r[f"c{c}"]) for c in s)] = int(r["n"])
    return out, found_missing


def _numeric(f: Any, x: Any, col: Numeric) -> Any:
    missing = x.isNull() | f.isnan(x)
    v = f.least(f.greatest(x, f.lit(float(col.lo))), f.lit(float(col.hi)))
    if col.integer:
        v = f.rint(v)
    pos = f.lit(0).cast("long")
    for e in col.bin_edges:
        pos = pos + (v >= f.lit(float(e))).cast("long")
    cell = f.least(f.greatest(pos - 1, f.lit(0)), f.lit(col.bins - 1)) + len(col.atoms)
    out = f.when(missing, f.lit(MISSING))
    for i, a in enumerate(col.atoms):  # distinct: at most one matches
        out = out.when(v == f.lit(float(a)), f.lit(i))
    return out.otherwise(cell).cast("long")


def _categorical(f: Any, x: Any, col: Categorical, dtype: Any, name: str) -> Any:
    t = importlib.import_module("pyspark.sql.types")
    fallback = DROPPED if col.other is None else col.categories.index(col.other)
    out = f.when(x.isNull(), f.lit(MISSING))
    if isinstance(dtype, t.StringType):
        matches = [(i, x == f.lit(c)) for i, c in enumerate(col.categories) if isinstance(c, str)]
    elif isinstance(dtype, t.NumericType | t.BooleanType):
        out = out.when(f.isnan(x.cast("double")), f.lit(MISSING))
        integral = isinstance(dtype, t.IntegralType | t.BooleanType)
        v = x.cast("long") if integral else x.cast("double")
        matches = []
        for i, c in enumerate(col.categories):
            if not isinstance(c, numbers.Real) or (isinstance(c, float) and math.isnan(c)):
                continue
            # Python compares a number with a category exactly (2**53 != 2**53 + 1): a category
            # that no long (no double) equals exactly matches no record, as in memory.
            if integral and (not math.isfinite(c) or c != math.trunc(c)):
                continue  # an integer never equals 1.5 or inf
            if not integral and float(c) != c:
                continue  # 2**53 + 1, 1/3 as a Fraction: no double equals it
            lit = f.lit(math.trunc(c)) if integral else f.lit(float(c))
            matches.append((i, v == lit))
    else:
        raise DataError(
            f"column {name!r}: a categorical column on Spark must hold strings, numbers or "
            f"booleans, not {dtype}."
        )
    for i, cond in matches:
        out = out.when(cond, f.lit(i))
    return out.otherwise(f.lit(fallback)).cast("long")


def encode_spark(
    domain: Domain, df: Any, missing: Missing, sets: Sequence[Cols] | None = None
) -> SparkCodes:
    """The cell codes of a Spark table and the exact counts of the marginals ``sets`` (default:
    the one-way marginals) of its kept records, in one job that reads every record, applies
    the missing-value policy and counts, before anything is charged."""
    f = importlib.import_module("pyspark.sql.functions")
    policy = check_missing(missing)
    fields = {fld.name: fld.dataType for fld in df.schema.fields}
    absent = [n for n in domain.names if n not in fields]
    if absent:
        raise DataError(f"the table lacks the domain's column(s) {absent}.")
    exprs = []
    t = importlib.import_module("pyspark.sql.types")
    for i, name in enumerate(domain.names):
        col = domain.columns[name]
        if isinstance(fields[name], t.NullType):
            # Spark infers this type from the values when every one is null: each record's
            # value is missing, as in memory (refusing the type would depend on the records)
            exprs.append(f.lit(MISSING).cast("long").alias(f"c{i}"))
        elif isinstance(col, Numeric):
            if not isinstance(fields[name], t.NumericType | t.BooleanType):
                raise DataError(f"column {name!r} must be numeric, not {fields[name]}.")
            exprs.append(_numeric(f, f.col(name).cast("double"), col).alias(f"c{i}"))
        else:
            exprs.append(_categorical(f, f.col(name), col, fields[name], name).alias(f"c{i}"))
    cells = [f.col(f"c{i}") for i in range(len(domain.names))]
    state: Any = f.when(_any(f, [c == f.lit(MISSING) for c in cells]), f.lit(_MISSING))
    state = state.when(_any(f, [c < f.lit(0) for c in cells]), f.lit(_DROPPED))
    codes = df.select(*exprs).withColumn(_STATE, state.otherwise(f.lit(_KEPT)))
    if sets is None:
        sets = [(c,) for c in range(len(domain.names))]
    # as many count cells as the streamed path keeps (the driver collects them all); a
    # marginal left out is one more job when the fit reads it
    sets = prefetched(sets, domain.shape)
    # Every record is encoded and counted now, before the fit charges: a record that makes the
    # input fail (an ANSI cast of a bad string upstream, an unreadable file) fails here,
    # uncharged and with Spark's message withheld. No total is ever read on its own.
    tables = _grouped_counts(codes, domain.shape, sets, policy)
    return SparkCodes(codes, domain.shape, tables)


def _any(f: Any, conds: Sequence[Any]) -> Any:
    out: Any = f.lit(False)
    for c in conds:
        out = out | c
    return out
