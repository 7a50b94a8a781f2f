"""A parsed SELECT to a plan: keys, frame aggregations, row-wise steps, post-processing.

Everything here reads the query text and the catalog only: every refusal happens here, before
any data are seen, so whether a query is refused can never depend on a record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dpkit.errors import QueryRefusedError
from dpkit.frame import Aggregation, count, count_units, mean, quantiles, std, var
from dpkit.frame import sum as fsum
from dpkit.frame._engine import polars
from dpkit.sql._catalog import Catalog
from dpkit.sql._exprs import RowExpr, rowwise
from dpkit.sql._parse import MARKER, Parsed, sqlglot
from dpkit.sql._post import Post
from dpkit.sql._scope import Scope, scope_of
from dpkit.sql._text import (
    ANON_AGGS,
    default_name,
    has_agg,
    is_agg,
    literal_int,
    not_null,
    probability,
    refuse_structure,
)

__all__ = ["Compiled", "compile_tree"]


@dataclass
class Compiled:
    """What the SQL text means, as a plan for :mod:`dpkit.frame` and its post-processing."""

    sql: str
    bigquery: bool
    options: dict[str, Any]
    scope: Scope
    where: Any = None  # a Polars predicate
    derived: dict[str, Any] = field(default_factory=dict)  # physical name → Polars expression
    windows: dict[str, Any] = field(default_factory=dict)  # BigQuery: per-unit aggregates
    keys: list[str] = field(default_factory=list)  # physical key columns
    key_values: list[Any] = field(default_factory=list)  # per key: tuple, "public", or None
    aggs: list[Aggregation] = field(default_factory=list)
    agg_notes: list[str] = field(default_factory=list)
    outputs: list[tuple[str, Post, bool]] = field(default_factory=list)  # name, tree, is_key
    having: Post | None = None
    order: list[tuple[Post, bool]] = field(default_factory=list)
    limit: int | None = None
    offset: int = 0
    max_groups: int = 1
    max_rows: int = 1
    max_rows_per_unit: int | None = None
    n_dp_functions: int = 0  # aggregate calls in SELECT (BigQuery's budget split)
    _agg_index: dict[tuple[Any, ...], str] = field(default_factory=dict)


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


class _Compiler:
    def __init__(self, parsed: Parsed, catalog: Catalog, sql: str) -> None:
        self.p = parsed
        self.bq = parsed.bigquery
        tree = parsed.tree
        refuse_structure(tree)
        scope = scope_of(tree, catalog)
        t = scope.private
        self.c = Compiled(sql, self.bq, dict(parsed.options), scope)
        self.c.max_groups, self.c.max_rows = t.max_groups, t.max_rows
        self.c.max_rows_per_unit = t.max_rows_per_unit
        self.tree = tree
        self.scope = scope
        self.counter = 0
        self.key_exprs: list[tuple[Any, str, str]] = []  # (node, physical, output name)

    # -- helpers --------------------------------------------------------------------------
    def _fresh(self, stem: str) -> str:
        self.counter += 1
        return f"__sql_{stem}{self.counter}"

    def _row(self, node: Any, *, clamp: bool, allow_unit: bool = False) -> RowExpr:
        return rowwise(node, self.scope.resolve, clamp=clamp, allow_unit=allow_unit)

    def _derive(self, key: str, expr: Any) -> str:
        for name, e in self.c.derived.items():
            if e is expr:
                return name
        name = self._fresh(key)
        self.c.derived[name] = expr
        return name

    def _register(self, sig: tuple[Any, ...], make: Any, note: str) -> str:
        if sig in self.c._agg_index:
            return self.c._agg_index[sig]
        alias = f"sqlagg{len(self.c.aggs) + 1}"
        self.c.aggs.append(make(alias))
        self.c.agg_notes.append(f"{alias} = {note}")
        self.c._agg_index[sig] = alias
        return alias

    # -- the statement --------------------------------------------------------------------
    def run(self) -> Compiled:
        exp = sqlglot().exp
        tree = self.tree
        if tree.args.get("distinct"):
            raise QueryRefusedError(
                "SELECT DISTINCT releases values without noise or threshold; use GROUP BY with "
                "an aggregate (COUNT(*)), whose keys are public or privately selected."
            )
        where = tree.args.get("where")
        if where is not None:
            self.scope.not_null = not_null(where.this, self.scope)
            if has_agg(where.this):
                raise QueryRefusedError("aggregates are not allowed in WHERE; use HAVING.")
            w = self._row(where.this, clamp=False, allow_unit=True)
            self.c.where = w.expr
        self._keys()
        items = tree.expressions
        if any(isinstance(i, exp.Star) for i in items):
            raise QueryRefusedError("SELECT * releases rows: select keys and aggregates.")
        if not any(has_agg(i) for i in items):
            raise QueryRefusedError(
                "a query must release aggregates (COUNT, SUM, AVG, ...): selecting columns "
                "without one would release individual rows or keys without noise."
            )
        seen: set[str] = set()
        for item in items:
            name, node = (
                (str(item.alias), item.this) if isinstance(item, exp.Alias) else (None, item)
            )
            if has_agg(node):
                self.c.n_dp_functions += sum(
                    1
                    for n in node.walk()
                    if is_agg(n) and not (isinstance(n.parent, exp.Anonymous | exp.WithinGroup))
                )
                tree_ = self._post(node)
                out = name or default_name(node)
                is_key = False
            else:
                phys, kname = self._key_of(node)
                tree_, out, is_key = ("key", phys), name or kname, True
            base, k = out, 2
            while out.lower() in seen:
                out, k = f"{base}_{k}", k + 1
            seen.add(out.lower())
            self.c.outputs.append((out, tree_, is_key))
        having = tree.args.get("having")
        if having is not None:
            self.c.having = self._post(having.this)
        order = tree.args.get("order")
        if order is not None:
            for o in order.expressions:
                self.c.order.append((self._order_item(o.this), bool(o.args.get("desc"))))
        self.c.limit = literal_int(tree.args.get("limit"), "LIMIT")
        self.c.offset = literal_int(tree.args.get("offset"), "OFFSET") or 0
        if self.bq:
            self._bigquery_options()
        return self.c

    def _keys(self) -> None:
        exp = sqlglot().exp
        group = self.tree.args.get("group")
        if group is None:
            return
        aliases = {
            str(i.alias).lower(): i.this for i in self.tree.expressions if isinstance(i, exp.Alias)
        }
        for g in group.expressions:
            node = g
            if isinstance(g, exp.Literal) and not g.is_string:
                pos = int(str(g.this))
                if not 1 <= pos <= len(self.tree.expressions):
                    raise QueryRefusedError("GROUP BY position out of range.")
                node = self.tree.expressions[pos - 1]
                node = node.this if isinstance(node, exp.Alias) else node
            elif isinstance(g, exp.Column) and not g.table and str(g.name).lower() in aliases:
                try:
                    self.scope.resolve(g)
                except QueryRefusedError:
                    node = aliases[str(g.name).lower()]
            if has_agg(node):
                raise QueryRefusedError("GROUP BY an aggregate is refused.")
            try:
                r = self._row(node, clamp=False)
            except QueryRefusedError as exc:
                if "privacy unit" in str(exc):
                    raise QueryRefusedError(
                        "GROUP BY the privacy unit (or an expression of it) is refused: it would "
                        "release one group per individual."
                    ) from None
                raise
            if r.bare is not None:
                phys, out = r.bare.physical, r.bare.column.name
                values: Any = r.values
                if values is None and self.scope.public_column(phys) is not None:
                    values = "public"
            else:
                phys = self._fresh("k")
                self.c.derived[phys] = r.expr
                out = default_name(node)
                # a public set only if it cannot hold NULL (a NULL key would be dropped)
                known = r.values is not None and not r.nullable and None not in r.values
                values = r.values if known else None
            if phys in self.c.keys:
                continue
            self.c.keys.append(phys)
            self.c.key_values.append(values)
            self.key_exprs.append((node, phys, out))

    def _key_of(self, node: Any) -> tuple[str, str]:
        """A non-aggregate SELECT item must be a GROUP BY key."""
        for knode, phys, out in self.key_exprs:
            if knode == node:
                return phys, out
        exp = sqlglot().exp
        if isinstance(node, exp.Column):
            try:
                phys = self.scope.resolve(node).physical
            except QueryRefusedError:
                phys = ""
            for _, kphys, out in self.key_exprs:
                if kphys == phys:
                    return kphys, out
        raise QueryRefusedError(
            "every selected column must be a GROUP BY key or inside an aggregate: a bare "
            "column would release individual values."
        )

    def _order_item(self, node: Any) -> Post:
        exp = sqlglot().exp
        if isinstance(node, exp.Literal) and not node.is_string:
            text = str(node.this)
            if not text.isdigit() or not 1 <= int(text) <= len(self.c.outputs):
                raise QueryRefusedError("ORDER BY position out of range.")
            return ("out", self.c.outputs[int(text) - 1][0])
        if isinstance(node, exp.Column) and not node.table:
            for name, _, _ in self.c.outputs:
                if name.lower() == str(node.name).lower():
                    return ("out", name)
        return self._post(node)

    # -- post-processing of aggregates --------------------------------------------------------
    def _post(self, node: Any) -> Post:
        exp = sqlglot().exp
        if is_agg(node):
            return self._aggregate(node)
        if isinstance(node, exp.Paren):
            return self._post(node.this)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return ("const", str(node.this))
            return ("const", float(str(node.this)))
        if isinstance(node, exp.Neg):
            return ("neg", self._post(node.this))
        ops = {
            exp.Add: "+",
            exp.Sub: "-",
            exp.Mul: "*",
            exp.Div: "/",
            exp.EQ: "eq",
            exp.NEQ: "ne",
            exp.GT: "gt",
            exp.GTE: "ge",
            exp.LT: "lt",
            exp.LTE: "le",
            exp.And: "and",
            exp.Or: "or",
        }
        for cls, op in ops.items():
            if isinstance(node, cls):
                return ("op", op, self._post(node.this), self._post(node.expression))
        if isinstance(node, exp.Not):
            return ("not", self._post(node.this))
        if isinstance(node, exp.Abs):
            return ("fn", "abs", self._post(node.this))
        if isinstance(node, exp.Sqrt):
            return ("fn", "sqrt", self._post(node.this))
        if isinstance(node, exp.Round):
            d = node.args.get("decimals")
            return ("fn", "round", self._post(node.this), ("const", int(str(d.this)) if d else 0))
        if isinstance(node, exp.Least | exp.Greatest):
            name = "least" if isinstance(node, exp.Least) else "greatest"
            return ("fn", name, *(self._post(e) for e in [node.this, *node.expressions]))
        if isinstance(node, exp.Column):
            if not node.table:
                for name, _, is_key in self.c.outputs:
                    if name.lower() == str(node.name).lower() and not is_key:
                        return ("out", name)
            phys, _ = self._key_of(node)
            return ("key", phys)
        raise QueryRefusedError(
            f"{type(node).__name__} is not supported on released aggregates; use + - * /, "
            "comparisons, AND/OR/NOT, ABS, SQRT, ROUND, LEAST, GREATEST."
        )

    def _aggregate(self, node: Any) -> Post:
        exp = sqlglot().exp
        bounds: tuple[float, float] | None = None
        if isinstance(node, exp.Anonymous) and str(node.name).upper().startswith(MARKER):
            k = int(str(node.name)[len(MARKER) :])
            named, bounds = self.p.bounds[k]
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
            return self._percentile(order[0].this, inner.this, bounds)
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
            return self._percentile(node.this, exp.Literal.number(0.5), bounds)
        if kind == "percentile":
            if node.expression is None:
                raise QueryRefusedError("PERCENTILE_CONT needs WITHIN GROUP (ORDER BY x).")
            return self._percentile(node.this, node.expression, bounds)
        arg = node.this
        if kind == "count":
            if isinstance(arg, exp.Distinct):
                cols = arg.expressions
                one = len(cols) == 1 and isinstance(cols[0], exp.Column)
                if one and self.scope.resolve(cols[0]).is_unit:
                    return (
                        "ref",
                        self._register(("units",), lambda a: count_units(alias=a), "count_units()"),
                    )
                raise QueryRefusedError(
                    "COUNT(DISTINCT x) is supported for the privacy unit only (distinct units); "
                    "COUNT(DISTINCT other) would let one unit add up to max_rows new values to "
                    "every group. Group by x and count instead."
                )
            if self.bq:
                return self._bq_aggregate("count", arg, bounds)
            if isinstance(arg, exp.Star):
                return ("ref", self._register(("rows",), lambda a: count(alias=a), "count()"))
            r = self._row(arg, clamp=False)
            if not r.nullable:
                return ("ref", self._register(("rows",), lambda a: count(alias=a), "count()"))
            col = self._derive("n", r.expr.is_not_null().cast(polars().Int8))
            return (
                "ref",
                self._register(
                    ("nn", col),
                    lambda a: fsum(col, bounds=(0, 1), alias=a),
                    "sum(non-null indicator) in (0, 1)",
                ),
            )
        if isinstance(arg, exp.Distinct):
            raise QueryRefusedError(f"{name.upper()}(DISTINCT ...) is not supported.")
        if self.bq:
            return self._bq_aggregate(kind, arg, bounds)
        r = self._bounded(arg, name.upper())
        col, lo, hi = self._column_for(
            r, zero_nulls=kind == "sum" or (kind == "avg" and r.nullable)
        )
        if kind == "sum":
            return (
                "ref",
                self._register(
                    ("sum", col, lo, hi),
                    lambda a: fsum(col, bounds=(lo, hi), alias=a),
                    f"sum({col}) clamped to ({lo:g}, {hi:g})",
                ),
            )
        if kind == "avg":
            if not r.nullable:
                return (
                    "ref",
                    self._register(
                        ("mean", col, lo, hi),
                        lambda a: mean(col, bounds=(lo, hi), alias=a),
                        f"mean({col}) clamped to ({lo:g}, {hi:g})",
                    ),
                )
            s = self._register(
                ("sum", col, lo, hi),
                lambda a: fsum(col, bounds=(lo, hi), alias=a),
                f"sum({col}) clamped to ({lo:g}, {hi:g})",
            )
            nn = self._derive("n", r.expr.is_not_null().cast(polars().Int8))
            n = self._register(
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
            self._register(
                (kind, col, lo, hi),
                lambda a: make(col, bounds=(lo, hi), alias=a),
                f"{kind}({col}) clamped to ({lo:g}, {hi:g})",
            ),
        )

    def _bounded(self, arg: Any, what: str, bounds: tuple[float, float] | None = None) -> RowExpr:
        r = self._row(arg, clamp=True)
        if r.kind not in ("num", "bool"):
            raise QueryRefusedError(f"{what} needs a numeric expression.")
        if bounds is None and not r.bounded:
            raise QueryRefusedError(
                f"{what} has unbounded sensitivity: a column it reads has no declared bounds. "
                "Declare bounds for the column in the metadata (values outside are clamped)."
            )
        return r

    def _column_for(self, r: RowExpr, *, zero_nulls: bool) -> tuple[str, float, float]:
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
        return self._derive("e", e), lo, hi

    def _percentile(self, arg: Any, p: Any, bounds: tuple[float, float] | None) -> Post:
        q = probability(p)
        if self.bq:
            from dpkit.sql._bigquery import bq_percentile

            return bq_percentile(self, arg, q, bounds)
        r = self._bounded(arg, "PERCENTILE_CONT", bounds)
        if r.nullable:
            raise QueryRefusedError(
                "PERCENTILE_CONT of a nullable expression is not supported: add COALESCE(x, v)."
            )
        if bounds is None:
            col, lo, hi = self._column_for(r, zero_nulls=False)
        else:
            col = (
                r.bare.physical
                if r.bare is not None and r.kind == "num"
                else self._derive("e", r.expr.cast(polars().Float64))
            )
            lo, hi = bounds
        alias = self._register(
            ("q", col, lo, hi, q),
            lambda a: quantiles(col, [q], bounds=(lo, hi), alias=a),
            f"quantile {q:g} of {col} in ({lo:g}, {hi:g})",
        )
        return ("ref", f"{alias}_{q:g}")

    # -- BigQuery ------------------------------------------------------------------------------
    def _bq_aggregate(self, kind: str, arg: Any, bounds: tuple[float, float] | None) -> Post:
        """Per unit and group first (a window over the unit and keys), then clamped."""
        from dpkit.sql._bigquery import bq_aggregate

        return bq_aggregate(self, kind, arg, bounds)

    def _bigquery_options(self) -> None:
        from dpkit.sql._bigquery import bq_options

        bq_options(self)


def compile_tree(parsed: Parsed, catalog: Catalog, sql: str) -> Compiled:
    """Compile a parsed statement on a catalog; refuse (QueryRefusedError) what is unsafe."""
    c = _Compiler(parsed, catalog, sql).run()
    if not math.isfinite(float(len(c.aggs))) or not c.aggs:  # pragma: no cover - checked above
        raise QueryRefusedError("a query must release aggregates.")
    return c
