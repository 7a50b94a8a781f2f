"""Checks and helpers of the SQL compiler that read the query text only: constructs refused
wherever they appear, which nodes are aggregates, literals, default output names."""

from __future__ import annotations

from typing import Any

from dpkit.errors import QueryRefusedError
from dpkit.sql._exprs import nondeterministic
from dpkit.sql._parse import MARKER, sqlglot
from dpkit.sql._scope import Scope

__all__ = [
    "ANON_AGGS",
    "default_name",
    "has_agg",
    "is_agg",
    "literal_int",
    "not_null",
    "probability",
    "refuse_structure",
]


def refuse_structure(tree: Any) -> None:
    """Constructs refused wherever they appear: set operations, CTEs, subqueries, windows."""
    exp = sqlglot().exp
    if isinstance(tree, exp.Union | exp.Intersect | exp.Except):
        raise QueryRefusedError(
            "UNION, INTERSECT and EXCEPT are refused: run each SELECT as its own query (each is "
            "charged), then combine the released tables."
        )
    if not isinstance(tree, exp.Select):
        raise QueryRefusedError("only SELECT queries are supported.")
    if tree.args.get("with_") or tree.args.get("with"):
        raise QueryRefusedError(
            "WITH (common table expressions) is refused: query the table directly."
        )
    for node in tree.walk():
        nondeterministic(node)
        if isinstance(node, exp.Select) and node is not tree:
            raise QueryRefusedError(
                "subqueries over private data are refused: a subquery's exact result would "
                "steer the outer query (WHERE x > (SELECT AVG(x) ...) lets one unit move every "
                "row). Run it as its own private query and use its released value as a literal."
            )
        if isinstance(node, exp.Union | exp.Intersect | exp.Except):
            raise QueryRefusedError("UNION, INTERSECT and EXCEPT are refused.")
        if isinstance(node, exp.Window):
            raise QueryRefusedError(
                "window functions (OVER ...) are refused: a row's value would depend on other "
                "units' rows."
            )
        if isinstance(node, exp.Lateral | exp.Unnest | exp.Pivot):
            raise QueryRefusedError("LATERAL, UNNEST and PIVOT are not supported.")
        if isinstance(node, exp.TableSample):
            # never run silently as the whole table, nor sampled by the database's randomness
            raise QueryRefusedError("TABLESAMPLE is not supported.")
    # clauses the compiler does not read would otherwise be dropped silently (a PREWHERE filter)
    for arg in ("qualify", "distinct_on", "prewhere", "sample", "settings", "connect", "into"):
        if tree.args.get(arg):
            raise QueryRefusedError(f"{arg.upper()} is not supported.")
    group = tree.args.get("group")
    if group is not None and any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
        raise QueryRefusedError(
            "ROLLUP, CUBE and GROUPING SETS are not supported: one query per grouping."
        )


ANON_AGGS = {"VAR": "var", "STDEV": "stddev", "VAR_POP": "var", "STDEV_POP": "stddev"}


def is_agg(node: Any) -> bool:
    exp = sqlglot().exp
    if isinstance(node, exp.Anonymous):
        name = str(node.name).upper()
        return name.startswith(MARKER) or name in ANON_AGGS
    return isinstance(node, exp.AggFunc | exp.WithinGroup)


def has_agg(node: Any) -> bool:
    return any(is_agg(n) for n in node.walk())


def not_null(cond: Any, scope: Scope) -> set[str]:
    """Columns that WHERE's top-level conjuncts require non-NULL (``x IS NOT NULL``)."""
    exp = sqlglot().exp
    if isinstance(cond, exp.Paren):
        return not_null(cond.this, scope)
    if isinstance(cond, exp.And):
        return not_null(cond.this, scope) | not_null(cond.expression, scope)
    inner = cond.this if isinstance(cond, exp.Not) else cond
    negated = isinstance(cond, exp.Not) != bool(inner.args.get("negate"))
    if (
        negated
        and isinstance(inner, exp.Is)
        and isinstance(inner.this, exp.Column)
        and isinstance(inner.expression, exp.Null)
    ):
        return {scope.resolve(inner.this).physical}
    return set()


def probability(p: Any) -> float:
    exp = sqlglot().exp
    if not isinstance(p, exp.Literal) or p.is_string:
        raise QueryRefusedError("a percentile must be a literal probability in [0, 1].")
    q = float(str(p.this))
    if not 0.0 <= q <= 1.0:
        raise QueryRefusedError("a percentile must be a literal probability in [0, 1].")
    return q


def literal_int(node: Any, what: str) -> int | None:
    exp = sqlglot().exp
    if node is None:
        return None
    e = node.args.get("expression") or node.this
    if not isinstance(e, exp.Literal) or e.is_string or not str(e.this).isdigit():
        raise QueryRefusedError(f"{what} must be a non-negative integer literal.")
    return int(str(e.this))


def default_name(node: Any) -> str:
    exp = sqlglot().exp
    if isinstance(node, exp.Column):
        return str(node.name)
    if isinstance(node, exp.Anonymous) and str(node.name).upper().startswith(MARKER):
        node = node.expressions[0]
    simple = {
        exp.Count: "count",
        exp.Sum: "sum",
        exp.Avg: "avg",
        exp.Variance: "var",
        exp.Stddev: "stddev",
        exp.Median: "median",
    }
    for cls, stem in simple.items():
        if type(node) is cls:
            a = node.this
            if isinstance(a, exp.Star):
                return stem
            if isinstance(a, exp.Distinct) and len(a.expressions) == 1:
                return f"{stem}_distinct_{a.expressions[0].name}"
            if isinstance(a, exp.Column):
                return f"{stem}_{a.name}"
    return str(node.sql()).lower()
