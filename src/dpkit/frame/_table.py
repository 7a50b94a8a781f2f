"""The private table of a query, with its identity fixed before any transformation.

Bounding each unit's contribution (Wilson et al. 2020, "Differentially private SQL with bounded
user contribution"; Amin et al. 2019) protects a unit only if the rows it bounds together are
*all* the rows that one unit's data produced. Two transformations broke that when the unit was
read at bounding time: a join with a public table repeating a key turns one row into several,
each of which became its own unit where every row is a unit; and a column expression (or a join
output moved onto the unit's name) overwrote the unit column, so one person's rows became many
"units". So the identity is fixed when the :class:`~dpkit.frame.Query` is made: a hidden column
:data:`UNIT_ID` (a copy of the declared unit column, or a row number where every row is its own
unit) is added to the table before any step, every copy a join makes carries it, and no step may
read or write a column whose name starts with :data:`RESERVED` (by name, or unnamed through a
selector: :func:`check_rowwise`). Bounding reads only that column.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from dpkit._missing import Missing
from dpkit.accounting import Neighbouring
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.frame._engine import as_lazy, is_spark, polars
from dpkit.mechanisms._base import SupportsCharge

__all__ = [
    "RESERVED",
    "UNIT_ID",
    "Table",
    "check_rowwise",
    "check_unnamed",
    "check_unreserved",
    "payer",
    "schema_names",
    "table",
]

RESERVED = "__dpkit_"  # no column of the data, of a public table, or of a step may start so
UNIT_ID = f"{RESERVED}unit"  # the unit's identity, captured when the query is made


@dataclass(frozen=True)
class Table:
    """A query's private table and what is fixed about it (steps append to ``steps`` only)."""

    data: Any  # Polars LazyFrame, or a PySpark DataFrame, with the UNIT_ID column
    unit: str | None  # the declared unit column (as named at construction); None: each row
    neighbouring: Neighbouring
    replace: bool
    spark: bool
    missing: Missing  # the caller's policy for nulls/NaN in aggregated columns
    source: Any = None  # the table as given (with UNIT_ID): missing="raise" reads it, see below
    steps: tuple[str, ...] = ()
    # a part of a parallel composition (Query.partition_by): the accountant of its budget,
    # reachable only through this part's releases
    accountant: Any = None
    pandas: bool = False  # made from a pandas DataFrame: releases are pandas too

    def derive(self, data: Any, step: str) -> Table:
        return replace(self, data=data, steps=(*self.steps, step))


def check_unreserved(names: Iterable[str], what: str) -> None:
    """Refuse (from a schema, never from values) columns under the reserved prefix."""
    bad = sorted(n for n in names if n.startswith(RESERVED))
    if bad:
        raise DataError(
            f"{what} names column(s) with the reserved prefix {RESERVED!r}, which holds the "
            "privacy unit's identity (no step may read or write it); rename them, or name the "
            "columns an expression writes instead of pl.all()."
        )


def check_unnamed(exprs: Iterable[Any], what: str) -> None:
    """Refuse expressions that name a reserved column (its values belong to the bounding: with
    each row its own unit it is a row number, which depends on the rows before it)."""
    names: list[str] = []
    for e in exprs:
        meta = getattr(e, "meta", None)
        if meta is not None and hasattr(meta, "root_names"):
            names += [str(n) for n in meta.root_names()]
    check_unreserved(names, what)


_SCALARS = (str, int, float, bool, type(None))
_MAX_DEPTH = 10_000  # nodes walked per expression; deeper ones are refused, not trusted


def _rowwise(expr: Any) -> bool:
    """Whether every node of ``expr`` is row-separable and keeps the frame's length (or is a
    scalar literal), by Polars' own analysis of the expression (no data, no schema).

    A node that cannot be analysed without a schema (a selector such as ``pl.nth(0)``, a
    regex, several columns in one ``pl.col``) or a Python function (which may keep state
    between rows or batches) cannot be shown row-wise, so it is not."""
    pl = polars()
    if isinstance(expr, _SCALARS):
        return True
    if not isinstance(expr, pl.Expr):
        try:  # a date, a Decimal: a scalar literal; a Series or an array: not one (refused)
            expr = pl.lit(expr)
        except Exception:
            return False
    stack, seen = [expr], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > _MAX_DEPTH:
            return False
        try:
            meta = node.meta
            text = str(node)
            separable = meta.is_row_separable()
            whole = meta.is_length_preserving() or (meta.is_literal() and meta.is_scalar())
            inputs = meta.pop()
        except Exception:  # Polars cannot analyse it without a schema: refuse, never guess
            return False
        if not (separable and whole) or "python_udf" in text:
            return False
        stack += [e for e in inputs if not e.meta.eq(node)]
    return True


def check_rowwise(exprs: Iterable[Any], what: str) -> None:
    """Refuse (from the expressions alone, never from values) a step that is not row-wise.

    The release protects a unit only if each output row depends on one input row and public
    values: an aggregate (``pl.col("x") > pl.col("x").mean()``), a window, a rank, a shift, a
    row number or a Python function lets one unit's rows change every other unit's rows."""
    for e in exprs:
        if not _rowwise(e):
            raise DataError(
                f"{what} has an expression that is not row-wise (it looks at other rows: an "
                "aggregate, a window, a rank, a shift, a row number, a filter inside it), or "
                "one Polars cannot analyse without the table (a selector, a regex, several "
                "columns in one pl.col, a Python function, a Series): each output row must "
                "depend on one input row only. Name each column and use row-wise expressions."
            )


def schema_names(lf: Any, what: str) -> list[str]:
    """The column names of a Polars lazy plan (its schema only: no data are read)."""
    try:
        return list(lf.collect_schema().names())
    except Exception as exc:  # Polars' message may quote an expression or a value
        raise DataError(f"{what} fails on this table's schema ({type(exc).__name__}).") from None


def _spark_functions() -> Any:
    try:
        return importlib.import_module("pyspark.sql.functions")
    except ImportError as exc:  # pragma: no cover - a Spark DataFrame implies pyspark
        raise ImportError("the Spark engine needs PySpark: pip install 'dpkit[spark]'") from exc


def table(
    data: object, unit: str | None, neighbouring: Neighbouring, repl: bool, missing: Missing
) -> Table:
    """The table with its identity column added (before any transformation can run)."""
    spark = is_spark(data)
    frame: Any = data if spark else as_lazy(data)
    if spark:
        names = [f.name for f in frame.schema.fields]
    else:
        names = schema_names(frame, "reading the table")
    check_unreserved(names, "the table")
    if unit is not None and unit not in names:
        raise DataError(
            f"unknown privacy unit column {unit!r}; the table has {names}. Check the spelling."
        )
    if spark:
        f = _spark_functions()
        # each row its own unit: the id tells rows apart; the bounding hashes take the row's
        # occurrence among identical rows instead (see _pipeline.prepare), never this id
        ident = f.monotonically_increasing_id() if unit is None else f.col(unit)
        frame = frame.withColumn(UNIT_ID, ident)
        if unit is not None:  # a null unit is no unit: dropped, never refused (see below)
            keep = f.col(UNIT_ID).isNotNull()
            if frame.schema[unit].dataType.typeName() in ("double", "float"):
                keep = keep & ~f.isnan(f.col(UNIT_ID))  # a NaN unit is null, as from pandas
            frame = frame.filter(keep)
    elif unit is None:
        # a row number: a position, which no step can read (a step naming the column is
        # refused, and one reaching it unnamed, by pl.nth(0), a regex or a selector, is not
        # row-wise and refused by check_rowwise); bounding hashes rows by content instead
        frame = frame.with_row_index(UNIT_ID)
    else:
        pl = polars()
        # A row whose unit is null belongs to no one whose contribution can be bounded: it is
        # dropped here, before any step and any bounding. Refusing the table instead (as before)
        # told whoever saw the refusal that such a row exists, a data-dependent failure; dropping
        # is what dpkit.sql does, so one rule holds on both engines and in SQL. A user who wants
        # such rows counted gives each one a fresh id before the query.
        keep = pl.col(UNIT_ID).is_not_null()
        if frame.collect_schema()[unit].is_float():
            # a float NaN unit is null too: pandas' NaN arrives as null, and Polars would
            # otherwise pool every NaN row into one unit (the engines must agree)
            keep = keep & pl.col(UNIT_ID).is_not_nan()
        frame = frame.with_columns(pl.col(unit).alias(UNIT_ID)).filter(keep)
    # ``missing="raise"`` refuses nulls of the data as given, never the steps' output: a step
    # can make a null from any predicate on private values (``pl.when(user == 123).then(None)``,
    # a left join missing a key), and refusing it was a membership oracle at ε = 0
    kind = type(data).__module__.split(".")[0]
    return Table(
        frame, unit, neighbouring, repl, spark, missing, source=frame, pandas=kind == "pandas"
    )


def payer(table: Table, accountant: SupportsCharge | None) -> SupportsCharge | None:
    """Who pays a release: a part of a parallel composition pays from its own budget only."""
    if table.accountant is None:
        return accountant
    if accountant is not None and accountant is not table.accountant:
        raise PrivacyParameterError(
            "this query is a part of a parallel composition (Accountant.parallel): its releases "
            "are paid from the part's budget; pass no accountant=."
        )
    return table.accountant  # type: ignore[no-any-return]
