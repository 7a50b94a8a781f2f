"""The synthesizer's encoded table on Spark: cell codes in Spark SQL, one job per marginal.

:meth:`Synthesizer.fit <dpkit.release.Synthesizer.fit>` reads the data only through the exact
marginal counts of the encoded table. For a PySpark DataFrame the table is encoded where the data
are, by SQL expressions that give every record the cell :meth:`Domain.encode
<dpkit.release.Domain.encode>` gives it (clamp to ``[lo, hi]``, ``rint`` for integer columns —
NumPy's ``round`` is half-even too — then the bin from the edges, atoms first; a category by
equality, ``other`` or dropped); each marginal is then one ``groupBy().count()`` of the cached
codes, collected as a small dense table to the driver, where the model is fitted with the code of
the single-machine path. Same data and seed: the same model and the same synthetic data.

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

__all__ = ["SparkCodes", "encode_spark", "is_spark"]

IntArray = npt.NDArray[np.int64]


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
    """The encoded records of a Spark table (cached on the executors), read by marginals."""

    def __init__(self, codes: Any, width: int) -> None:
        self._codes = codes
        self._width = width
        self.shape = (-1, width)  # the number of records is private: never counted on its own

    def marginal(self, shape: Sequence[int], cols: Sequence[int]) -> IntArray:
        """Exact counts per cell of the marginal on ``cols``: one Spark aggregation."""
        f = importlib.import_module("pyspark.sql.functions")
        dims = tuple(int(shape[c]) for c in cols)
        out = np.zeros(dims, dtype=np.int64)
        names = [f"c{c}" for c in cols]
        try:
            rows = self._codes.groupBy(*names).agg(f.count(f.lit(1)).alias("n")).collect()
        except Exception as exc:
            raise _failure(exc) from None
        for r in rows:
            out[tuple(int(r[n]) for n in names)] = int(r["n"])
        return out

    def release(self) -> None:
        """Drop the cached codes from the executors."""
        self._codes.unpersist()


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


def encode_spark(domain: Domain, df: Any, missing: Missing) -> SparkCodes:
    """The cell codes of a Spark table, with the missing-value policy applied (one job under
    ``"raise"``, before anything is charged), cached for the marginals."""
    f = importlib.import_module("pyspark.sql.functions")
    policy = check_missing(missing)
    fields = {fld.name: fld.dataType for fld in df.schema.fields}
    absent = [n for n in domain.names if n not in fields]
    if absent:
        raise DataError(f"the table lacks the domain's column(s) {absent}.")
    exprs = []
    for i, name in enumerate(domain.names):
        col = domain.columns[name]
        if isinstance(col, Numeric):
            t = importlib.import_module("pyspark.sql.types")
            if not isinstance(fields[name], t.NumericType | t.BooleanType):
                raise DataError(f"column {name!r} must be numeric, not {fields[name]}.")
            exprs.append(_numeric(f, f.col(name).cast("double"), col).alias(f"c{i}"))
        else:
            exprs.append(_categorical(f, f.col(name), col, fields[name], name).alias(f"c{i}"))
    codes = df.select(*exprs)
    cols = [f.col(f"c{i}") for i in range(len(domain.names))]
    if policy == "raise":
        bad: Any = f.lit(False)
        for c in cols:
            bad = bad | (c == f.lit(MISSING))
        try:
            found = codes.filter(bad).limit(1).count()
        except Exception as exc:
            raise _failure(exc) from None
        if found:
            raise missing_error("the table")
    keep: Any = f.lit(True)
    for c in cols:
        keep = keep & (c >= f.lit(0))
    kept = codes.filter(keep)
    try:
        # Every record is encoded (and cached) now, before the fit charges: a record that makes
        # the input fail (an ANSI cast of a bad string upstream, an unreadable file) fails here,
        # uncharged and with Spark's message withheld, not in a marginal after the charge. The
        # count itself is discarded (the number of records is private).
        kept = kept.cache()
        kept.count()
    except Exception as exc:
        kept.unpersist()
        raise _failure(exc) from None
    return SparkCodes(kept, len(domain.names))
