"""A parsed SELECT to a plan: keys, frame aggregations, row-wise steps, post-processing.

Everything here reads the query text and the catalog only: every refusal happens here, before
any data are seen, so whether a query is refused can never depend on a record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dpkit.errors import QueryRefusedError
from dpkit.frame import Aggregation
from dpkit.sql._aggregate import aggregate
from dpkit.sql._bigquery import bq_options
from dpkit.sql._catalog import Catalog
from dpkit.sql._exprs import RowExpr, rowwise
from dpkit.sql._parse import Parsed, sqlglot
from dpkit.sql._post import Post
from dpkit.sql._scope import Scope, scope_of
from dpkit.sql._text import (
    default_name,
    has_agg,
    is_agg,
    literal_int,
    not_null,
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
    windows: dict[str, Any] = field(default_factory=dict)  # BigQuery: name → _bigquery.Window
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
            bq_options(self)
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
            return aggregate(self, node)
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


def compile_tree(parsed: Parsed, catalog: Catalog, sql: str) -> Compiled:
    """Compile a parsed statement on a catalog; refuse (QueryRefusedError) what is unsafe."""
    c = _Compiler(parsed, catalog, sql).run()
    if not math.isfinite(float(len(c.aggs))) or not c.aggs:  # pragma: no cover - checked above
        raise QueryRefusedError("a query must release aggregates.")
    return c
