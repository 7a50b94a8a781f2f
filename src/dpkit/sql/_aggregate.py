"""The aggregates of a SELECT: each SQL aggregate call as :mod:`dpkit.frame` aggregations.

dpkit's dialect reads bounds from the metadata (or a query's contribution bounds); BigQuery's
aggregates go to :mod:`dpkit.sql._bigquery` (per-unit values first, then clamping). Like the
rest of the compiler, everything here reads the query text and the catalog only: every refusal
(MIN/MAX, aggregates of aggregates, unbounded sensitivity, COUNT(DISTINCT other)) happens before
any data are seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.errors import QueryRefusedError
from dpkit.frame import count, count_units, mean, quantiles, std, var
from dpkit.frame import sum as fsum
from dpkit.frame._engine import polars
from dpkit.sql._bigquery import bq_aggregate
from dpkit.sql._exprs import RowExpr
from dpkit.sql._parse import MARKER, sqlglot
from dpkit.sql._post import Post
from dpkit.sql._text import ANON_AGGS, has_agg, is_agg, probability

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.sql._compile import _Compiler

__all__ = ["aggregate", "bounded", "column_for", "percentile"]

_AGG_NAMES = {
    "Count": "count",
    "Sum": "sum",
    "Avg": "avg",
    "Variance": "var",
    "VariancePop": "var",
    "Stddev": "stddev",
    "StddevPop": "stddev",
    "StddevSamp": "stddev",
    "Median": "median",
    "PercentileCont": "percentile",
    "PercentileDisc": "percentile",
}


def aggregate(comp: _Compiler, node: Any) -> Post:
    """One aggregate call (with its contribution bounds, if given) as a released value."""
    exp = sqlglot().exp
    bounds: tuple[float, float] | None = None
    if isinstance(node, exp.Anonymous) and str(node.name).upper().startswith(MARKER):
        k = int(str(node.name)[len(MARKER) :])
        named, bounds = comp.p.bounds[k]
        if len(node.expressions) != 1:
            raise QueryRefusedError("contribution bounds belong to one aggregate.")
        node = node.expressions[0]
        if not is_agg(node):
            raise QueryRefusedError("contribution bounds are an argument of an aggregate.")
        # per row (percentiles) and per group (the rest) clamp different things: one
        # given for the other would silently change what the release means
        pct = isinstance(node, exp.PercentileCont | exp.PercentileDisc | exp.WithinGroup)
        if named.lower().endswith("per_row") != pct:
            raise QueryRefusedError(
                "PERCENTILE_CONT takes contribution_bounds_per_row, COUNT, SUM and AVG "
                "contribution_bounds_per_group."
            )
    if isinstance(node, exp.WithinGroup):
        inner = node.this
        order = node.expression.expressions if node.expression is not None else []
        if not isinstance(inner, exp.PercentileCont | exp.PercentileDisc) or len(order) != 1:
            raise QueryRefusedError("WITHIN GROUP is supported for PERCENTILE_CONT only.")
        return percentile(comp, order[0].this, inner.this, bounds)
    name = type(node).__name__
    if isinstance(node, exp.Anonymous):  # VAR(x) in dialects that do not name it
        if len(node.expressions) != 1:
            raise QueryRefusedError(f"{str(node.name).upper()} takes one argument.")
        is_var = ANON_AGGS[str(node.name).upper()] == "var"
        node = (exp.Variance if is_var else exp.Stddev)(this=node.expressions[0])
        name = type(node).__name__
    for arg in node.iter_expressions():
        if has_agg(arg):
            raise QueryRefusedError(
                "aggregates of aggregates (SUM(SUM(x))) are refused: release the inner "
                "aggregate and compute on it, or nest nothing."
            )
    if name in ("Min", "Max", "ArgMin", "ArgMax"):
        q = "0.05" if name.startswith(("Min", "ArgMin")) else "0.95"
        raise QueryRefusedError(
            f"{name.upper()} is refused: one unit decides it, so no noise can hide it. Use a "
            f"private quantile instead: PERCENTILE_CONT({q}) WITHIN GROUP (ORDER BY x)."
        )
    kind = _AGG_NAMES.get(name)
    if kind is None:
        raise QueryRefusedError(
            f"aggregate {name.upper()} is not supported; supported: COUNT, SUM, AVG, VAR, "
            "STDDEV, PERCENTILE_CONT, MEDIAN (and COUNT(DISTINCT unit))."
        )
    if kind == "median":
        return percentile(comp, node.this, exp.Literal.number(0.5), bounds)
    if kind == "percentile":
        if node.expression is None:
            raise QueryRefusedError("PERCENTILE_CONT needs WITHIN GROUP (ORDER BY x).")
        return percentile(comp, node.this, node.expression, bounds)
    arg = node.this
    if kind == "count":
        if isinstance(arg, exp.Distinct):
            cols = arg.expressions
            one = len(cols) == 1 and isinstance(cols[0], exp.Column)
            if one and comp.scope.resolve(cols[0]).is_unit:
                return (
                    "ref",
                    comp._register(("units",), lambda a: count_units(alias=a), "count_units()"),
                )
            raise QueryRefusedError(
                "COUNT(DISTINCT x) is supported for the privacy unit only (distinct units); "
                "COUNT(DISTINCT other) would let one unit add up to max_rows new values to "
                "every group. Group by x and count instead."
            )
        if comp.bq:
            return bq_aggregate(comp, "count", arg, bounds)
        if isinstance(arg, exp.Star):
            return ("ref", comp._register(("rows",), lambda a: count(alias=a), "count()"))
        r = comp._row(arg, clamp=False)
        if not r.nullable:
            return ("ref", comp._register(("rows",), lambda a: count(alias=a), "count()"))
        col = comp._derive("n", r.expr.is_not_null().cast(polars().Int8))
        return (
            "ref",
            comp._register(
                ("nn", col),
                lambda a: fsum(col, bounds=(0, 1), alias=a),
                "sum(non-null indicator) in (0, 1)",
            ),
        )
    if isinstance(arg, exp.Distinct):
        raise QueryRefusedError(f"{name.upper()}(DISTINCT ...) is not supported.")
    if comp.bq:
        return bq_aggregate(comp, kind, arg, bounds)
    r = bounded(comp, arg, name.upper())
    col, lo, hi = column_for(comp, r, zero_nulls=kind == "sum" or (kind == "avg" and r.nullable))
    if kind == "sum":
        return (
            "ref",
            comp._register(
                ("sum", col, lo, hi),
                lambda a: fsum(col, bounds=(lo, hi), alias=a),
                f"sum({col}) clamped to ({lo:g}, {hi:g})",
            ),
        )
    if kind == "avg":
        if not r.nullable:
            return (
                "ref",
                comp._register(
                    ("mean", col, lo, hi),
                    lambda a: mean(col, bounds=(lo, hi), alias=a),
                    f"mean({col}) clamped to ({lo:g}, {hi:g})",
                ),
            )
        s = comp._register(
            ("sum", col, lo, hi),
            lambda a: fsum(col, bounds=(lo, hi), alias=a),
            f"sum({col}) clamped to ({lo:g}, {hi:g})",
        )
        nn = comp._derive("n", r.expr.is_not_null().cast(polars().Int8))
        n = comp._register(
            ("nn", nn),
            lambda a: fsum(nn, bounds=(0, 1), alias=a),
            "sum(non-null indicator) in (0, 1)",
        )
        return ("ratio", ("ref", s), ("ref", n))
    if r.nullable:
        raise QueryRefusedError(
            f"{name.upper()} of a nullable expression is not supported: add WHERE x IS NOT "
            "NULL or use COALESCE(x, value)."
        )
    make = var if kind == "var" else std
    return (
        "ref",
        comp._register(
            (kind, col, lo, hi),
            lambda a: make(col, bounds=(lo, hi), alias=a),
            f"{kind}({col}) clamped to ({lo:g}, {hi:g})",
        ),
    )


def bounded(
    comp: _Compiler, arg: Any, what: str, bounds: tuple[float, float] | None = None
) -> RowExpr:
    """The aggregated expression, refused where its sensitivity has no bound."""
    r = comp._row(arg, clamp=True)
    if r.kind not in ("num", "bool"):
        raise QueryRefusedError(f"{what} needs a numeric expression.")
    if bounds is None and not r.bounded:
        raise QueryRefusedError(
            f"{what} has unbounded sensitivity: a column it reads has no declared bounds. "
            "Declare bounds for the column in the metadata (values outside are clamped)."
        )
    return r


def column_for(comp: _Compiler, r: RowExpr, *, zero_nulls: bool) -> tuple[str, float, float]:
    """The column an aggregation reads, and its bounds (a derived one for expressions)."""
    pl = polars()
    lo, hi = r.lo, r.hi
    if zero_nulls:
        lo, hi = min(lo, 0.0), max(hi, 0.0)  # a NULL adds 0 (SQL skips it): |.| stays
    if lo == hi:
        lo, hi = min(lo, 0.0), max(hi, 0.0) if max(hi, 0.0) > min(lo, 0.0) else lo + 1.0
    if r.bare is not None and r.kind == "num" and not r.nullable:
        return r.bare.physical, lo, hi  # frame clamps the column itself
    e = r.expr.cast(pl.Float64)
    if zero_nulls and r.nullable:
        e = e.fill_null(0.0)
    return comp._derive("e", e), lo, hi


def percentile(comp: _Compiler, arg: Any, p: Any, bounds: tuple[float, float] | None) -> Post:
    """PERCENTILE_CONT / MEDIAN: a quantile tree over the clamped values."""
    q = probability(p)
    if comp.bq:
        from dpkit.sql._bigquery import bq_percentile

        return bq_percentile(comp, arg, q, bounds)
    r = bounded(comp, arg, "PERCENTILE_CONT", bounds)
    if r.nullable:
        raise QueryRefusedError(
            "PERCENTILE_CONT of a nullable expression is not supported: add COALESCE(x, v)."
        )
    if bounds is None:
        col, lo, hi = column_for(comp, r, zero_nulls=False)
    else:
        col = (
            r.bare.physical
            if r.bare is not None and r.kind == "num"
            else comp._derive("e", r.expr.cast(polars().Float64))
        )
        lo, hi = bounds
    alias = comp._register(
        ("q", col, lo, hi, q),
        lambda a: quantiles(col, [q], bounds=(lo, hi), alias=a),
        f"quantile {q:g} of {col} in ({lo:g}, {hi:g})",
    )
    return ("ref", f"{alias}_{q:g}")
