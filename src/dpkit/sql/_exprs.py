"""Row-wise SQL expressions to Polars expressions, with the public range of their values.

Only a whitelist of row-wise constructs is translated (arithmetic, comparisons, boolean logic,
CASE, COALESCE, IN/BETWEEN over literals, a few deterministic functions); anything else is
refused from the query text. Inside an aggregate each column is first clamped to its declared
bounds, so the interval computed here by interval arithmetic holds for every row whatever the
data (the clamping happens before the expression, then the aggregate clamps its result to that
interval again: the sensitivity follows the expression, never a column's bounds alone).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpkit.errors import QueryRefusedError
from dpkit.frame._engine import polars
from dpkit.sql._catalog import Column
from dpkit.sql._parse import sqlglot

__all__ = ["Resolved", "RowExpr", "interval_mul", "nondeterministic", "rowwise"]

INF = math.inf


@dataclass(frozen=True)
class Resolved:
    """A column reference resolved: its physical name in the joined table and its metadata."""

    physical: str
    column: Column
    is_unit: bool
    public_values: tuple[Any, ...] | None = None  # from metadata keys or a public table


@dataclass(frozen=True)
class RowExpr:
    """A translated expression: Polars expression, value range, nullability, kind, values."""

    expr: Any
    lo: float
    hi: float
    nullable: bool
    kind: str  # "num", "bool", "str", "other"
    values: tuple[Any, ...] | None = None  # the finite public set of its values, if known
    bare: Resolved | None = None  # the column, when the expression is just one column

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)


def interval_mul(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    ps = []
    for x in a:
        for y in b:
            ps.append(0.0 if x == 0 or y == 0 else x * y)  # 0·inf is 0 here (a bound of 0)
    return min(ps), max(ps)


def _lit(value: Any, kind: str) -> RowExpr:
    pl = polars()
    if value is None:  # NULL: no value, so no part of any range
        return RowExpr(pl.lit(None), 0.0, 0.0, True, kind, (None,))
    if kind == "num":
        return RowExpr(pl.lit(value), float(value), float(value), False, "num", (value,))
    return RowExpr(pl.lit(value), -INF, INF, value is None, kind, (value,))


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


_NONDETERMINISTIC = (
    "Rand",
    "Randn",
    "Random",
    "CurrentDate",
    "CurrentDatetime",
    "CurrentTime",
    "CurrentTimestamp",
    "Uuid",
    "GenerateSeries",
)

Resolver = Callable[[Any], Resolved]


def nondeterministic(node: Any) -> None:
    """Refuse a function whose value changes between runs (RANDOM(), NOW(), ...)."""
    name = type(node).__name__
    anon = isinstance(node, sqlglot().exp.Anonymous)
    if name in _NONDETERMINISTIC or (anon and str(node.name).upper() in _NONDET_NAMES):
        shown = str(node.name).upper() if anon else name.upper()
        raise QueryRefusedError(
            f"non-deterministic function {shown}() refused: a query's meaning must not change "
            "between runs (dpkit's randomness is the noise only)."
        )


_NONDET_NAMES = ("NOW", "RANDOM", "RAND", "NEWID", "UUID", "GEN_RANDOM_UUID", "SYSDATE")


def _refuse_node(node: Any) -> None:
    nondeterministic(node)
    name = type(node).__name__
    raise QueryRefusedError(
        f"{name} is not supported in a row-wise expression; use arithmetic, comparisons, "
        "AND/OR/NOT, CASE, COALESCE, IN/BETWEEN with literals, ABS, ROUND, FLOOR, CEIL, "
        "LEAST, GREATEST, LOWER, UPPER or CAST."
    )


def rowwise(node: Any, resolve: Resolver, *, clamp: bool, allow_unit: bool = False) -> RowExpr:
    """Translate ``node`` (a row-wise sqlglot expression) to Polars.

    ``clamp``: clamp each numeric column to its declared bounds first (inside aggregates).
    ``allow_unit``: whether the privacy unit's column may be read (in WHERE only).
    """
    exp = sqlglot().exp
    pl = polars()

    def go(n: Any) -> RowExpr:
        return rowwise(n, resolve, clamp=clamp, allow_unit=allow_unit)

    if isinstance(node, exp.Paren):
        return go(node.this)
    if isinstance(node, exp.Column):
        r = resolve(node)
        if r.is_unit and not allow_unit:
            raise QueryRefusedError(
                "the privacy unit's column can be read only in WHERE and in COUNT(DISTINCT "
                "unit): grouping by it or aggregating it would release or depend on "
                "individual identities."
            )
        c = r.column
        e = pl.col(r.physical)
        if c.type == "boolean":
            return RowExpr(e, 0.0, 1.0, c.nullable, "bool", (False, True), r)
        if c.numeric:
            lo, hi = c.bounds if c.bounds is not None else (-INF, INF)
            if clamp and c.bounds is not None:
                e = e.cast(pl.Float64).clip(lo, hi)
            return RowExpr(e, lo, hi, c.nullable, "num", r.public_values, r)
        kind = "str" if c.type == "string" else "other"
        return RowExpr(e, -INF, INF, c.nullable, kind, r.public_values, r)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return _lit(str(node.this), "str")
        return _lit(_number(str(node.this)), "num")
    if isinstance(node, exp.Boolean):
        v = bool(node.this)
        return RowExpr(pl.lit(v), float(v), float(v), False, "bool", (v,))
    if isinstance(node, exp.Null):
        return _lit(None, "other")
    if isinstance(node, exp.Neg):
        a = go(node.this)
        return RowExpr(-a.expr, -a.hi, -a.lo, a.nullable, "num")
    arith = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}
    for cls, op in arith.items():
        if isinstance(node, cls):
            return _arith(op, go(node.this), go(node.expression), clamp)
    if isinstance(node, exp.Mod):
        a, b = go(node.this), go(node.expression)
        if b.values is None or len(b.values) != 1 or not isinstance(b.values[0], int | float):
            raise QueryRefusedError("% takes a literal, positive divisor.")
        m = abs(float(b.values[0]))
        if m == 0:
            raise QueryRefusedError("% takes a literal, positive divisor.")
        return RowExpr(a.expr % b.expr, 0.0 if a.lo >= 0 else -m, m, a.nullable, "num")
    cmp = {
        exp.EQ: "eq",
        exp.NEQ: "ne",
        exp.GT: "gt",
        exp.GTE: "ge",
        exp.LT: "lt",
        exp.LTE: "le",
    }
    for cls, op in cmp.items():
        if isinstance(node, cls):
            a, b = go(node.this), go(node.expression)
            return _bool(getattr(a.expr, op)(b.expr), a.nullable or b.nullable)
    if isinstance(node, exp.And | exp.Or):
        a, b = go(node.this), go(node.expression)
        e = a.expr & b.expr if isinstance(node, exp.And) else a.expr | b.expr
        return _bool(e, a.nullable or b.nullable)
    if isinstance(node, exp.Not):
        a = go(node.this)
        return _bool(~a.expr, a.nullable)
    if isinstance(node, exp.Is):
        if not isinstance(node.expression, exp.Null):
            _refuse_node(node)
        e = go(node.this).expr
        return _bool(e.is_not_null() if node.args.get("negate") else e.is_null(), False)
    if isinstance(node, exp.In):
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise QueryRefusedError("IN (subquery) refused: subqueries over private data.")
        a = go(node.this)
        vals = [go(v) for v in node.expressions]
        if not all(v.values is not None and len(v.values) == 1 for v in vals):
            raise QueryRefusedError("IN (...) takes literal values only.")
        if len({v.kind for v in vals if v.values != (None,)}) > 1:
            raise QueryRefusedError("IN (...) takes literal values of one type.")
        return _bool(a.expr.is_in([v.values[0] for v in vals if v.values]), a.nullable)
    if isinstance(node, exp.Between):
        a, low, high = go(node.this), go(node.args["low"]), go(node.args["high"])
        return _bool((a.expr >= low.expr) & (a.expr <= high.expr), a.nullable)
    if isinstance(node, exp.Case):
        return _case(node, go)
    if isinstance(node, exp.If):
        cond, then = go(node.this), go(node.args["true"])
        other = (
            go(node.args["false"]) if node.args.get("false") is not None else _lit(None, then.kind)
        )
        return _branches([(cond, then)], other)
    if isinstance(node, exp.Coalesce):
        parts = [go(node.this), *(go(e) for e in node.expressions)]
        return RowExpr(
            pl.coalesce([p.expr for p in parts]),
            min(p.lo for p in parts),
            max(p.hi for p in parts),
            all(p.nullable for p in parts),
            _kind(parts),
            _union([p.values for p in parts]),
        )
    if isinstance(node, exp.Abs):
        a = go(node.this)
        lo = 0.0 if a.lo <= 0 <= a.hi else min(abs(a.lo), abs(a.hi))
        return RowExpr(a.expr.abs(), lo, max(abs(a.lo), abs(a.hi)), a.nullable, "num")
    if isinstance(node, exp.Floor | exp.Ceil):
        a = go(node.this)
        e = a.expr.floor() if isinstance(node, exp.Floor) else a.expr.ceil()
        return RowExpr(e, _floor(a.lo), _ceil(a.hi), a.nullable, "num")
    if isinstance(node, exp.Round):
        a = go(node.this)
        d = node.args.get("decimals")
        dec = -1.0 if d is not None and not isinstance(d, exp.Literal) else 0.0
        if isinstance(d, exp.Literal):
            dec = float(_number(str(d.this)))
        if not (0 <= dec <= 15 and dec == int(dec)):  # a float holds 15-17 significant digits
            raise QueryRefusedError("ROUND takes a literal number of decimals from 0 to 15.")
        digits = int(dec)
        pad = 0.5 * 10.0**-digits
        return RowExpr(a.expr.round(digits), a.lo - pad, a.hi + pad, a.nullable, "num")
    if isinstance(node, exp.Least | exp.Greatest):
        parts = [go(node.this), *(go(e) for e in node.expressions)]
        least = isinstance(node, exp.Least)
        e = pl.min_horizontal if least else pl.max_horizontal
        pick = min if least else max
        return RowExpr(
            e([p.expr for p in parts]),
            pick(p.lo for p in parts),
            pick(p.hi for p in parts),
            any(p.nullable for p in parts),
            "num",
        )
    if isinstance(node, exp.Lower | exp.Upper):
        a = go(node.this)
        e = a.expr.str.to_lowercase() if isinstance(node, exp.Lower) else a.expr.str.to_uppercase()
        return RowExpr(e, -INF, INF, a.nullable, "str")
    if isinstance(node, exp.Cast):
        return _cast(node, go(node.this))
    _refuse_node(node)
    raise AssertionError  # pragma: no cover


def _kind(parts: list[RowExpr]) -> str:
    kinds = {p.kind for p in parts if p.values != (None,)}
    return kinds.pop() if len(kinds) == 1 else ("num" if kinds <= {"num", "bool"} else "other")


def _union(sets: list[tuple[Any, ...] | None]) -> tuple[Any, ...] | None:
    if any(s is None for s in sets):
        return None
    out: dict[Any, None] = {}
    for s in sets:
        for v in s or ():
            out.setdefault(v)
    return tuple(out)


def _bool(e: Any, nullable: bool) -> RowExpr:
    return RowExpr(e, 0.0, 1.0, nullable, "bool", None if nullable else (False, True))


def _arith(op: str, a: RowExpr, b: RowExpr, clamp: bool) -> RowExpr:
    nullable = a.nullable or b.nullable
    if op == "+":
        return RowExpr(a.expr + b.expr, a.lo + b.lo, a.hi + b.hi, nullable, "num")
    if op == "-":
        return RowExpr(a.expr - b.expr, a.lo - b.hi, a.hi - b.lo, nullable, "num")
    if op == "*":
        lo, hi = interval_mul((a.lo, a.hi), (b.lo, b.hi))
        return RowExpr(a.expr * b.expr, lo, hi, nullable, "num")
    if b.lo <= 0 <= b.hi:
        if clamp:
            raise QueryRefusedError(
                "a division inside an aggregate whose divisor's declared range contains 0 has "
                "unbounded sensitivity; divide by a quantity bounded away from 0, or divide "
                "the released aggregate instead (SUM(x) / 10)."
            )
        return RowExpr(a.expr / b.expr, -INF, INF, True, "num")
    inv = (1.0 / b.hi, 1.0 / b.lo) if math.isfinite(b.lo) and math.isfinite(b.hi) else (-INF, INF)
    if b.lo > 0 and not math.isfinite(b.hi):
        inv = (0.0, 1.0 / b.lo)
    if b.hi < 0 and not math.isfinite(b.lo):
        inv = (1.0 / b.hi, 0.0)
    lo, hi = interval_mul((a.lo, a.hi), inv)
    return RowExpr(a.expr / b.expr, lo, hi, nullable, "num")


def _case(node: Any, go: Callable[[Any], RowExpr]) -> RowExpr:
    exp = sqlglot().exp
    subject = node.this
    arms = []
    for arm in node.args.get("ifs") or []:
        cond = go(exp.EQ(this=subject, expression=arm.this) if subject is not None else arm.this)
        arms.append((cond, go(arm.args["true"])))
    default = node.args.get("default")
    other = go(default) if default is not None else _lit(None, arms[0][1].kind if arms else "other")
    return _branches(arms, other)


def _branches(arms: list[tuple[RowExpr, RowExpr]], other: RowExpr) -> RowExpr:
    pl = polars()
    outs = [t for _, t in arms] + [other]
    chain: Any = None
    for cond, then in arms:
        chain = pl.when(cond.expr) if chain is None else chain.when(cond.expr)
        chain = chain.then(then.expr)
    e = chain.otherwise(other.expr) if chain is not None else other.expr
    nums = [o for o in outs if o.values != (None,)]
    return RowExpr(
        e,
        min((o.lo for o in nums), default=0.0),
        max((o.hi for o in nums), default=0.0),
        any(o.nullable for o in outs),
        _kind(outs),
        _union([o.values for o in outs]),
    )


def _floor(v: float) -> float:
    # an unbounded side stays unbounded (math.floor(inf) raises instead of refusing)
    return float(math.floor(v)) if math.isfinite(v) else v


def _ceil(v: float) -> float:
    return float(math.ceil(v)) if math.isfinite(v) else v


def _cast(node: Any, a: RowExpr) -> RowExpr:
    pl = polars()
    to = node.to.this.name.upper() if hasattr(node.to.this, "name") else str(node.to.this)
    if any(w in to for w in ("INT",)):
        # never strict: a value that does not convert becomes NULL (never a refusal)
        return RowExpr(
            a.expr.cast(pl.Float64, strict=False).round(0).cast(pl.Int64, strict=False),
            _floor(a.lo),
            _ceil(a.hi),
            True,
            "num",
        )
    if any(w in to for w in ("FLOAT", "DOUBLE", "DECIMAL", "NUMERIC", "REAL")):
        return RowExpr(a.expr.cast(pl.Float64, strict=False), a.lo, a.hi, True, "num")
    if any(w in to for w in ("CHAR", "TEXT", "STRING")):
        vals = None if a.values is None else tuple(None if v is None else str(v) for v in a.values)
        return RowExpr(a.expr.cast(pl.String, strict=False), -INF, INF, a.nullable, "str", vals)
    raise QueryRefusedError("CAST is supported to integer, floating-point and text types only.")
