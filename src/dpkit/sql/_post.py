"""Post-processing of released values: expressions of aggregates, HAVING, ORDER BY, LIMIT.

Everything here reads the released table only (noisy estimates, their intervals, public keys),
so it costs no budget. An expression of aggregates gets its interval by interval arithmetic on
its parts' intervals: each part covers its exact value with probability 1 − alpha, so the
expression's interval covers with probability at least 1 − k·alpha for k parts (a union bound).
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.frame._engine import polars

__all__ = ["Post", "evaluate", "names_of"]

# A post-processing tree: ("ref", column) an aggregate's released column (with _lo/_hi);
# ("key", column) a key; ("out", name) an output column; ("const", v); ("op", op, a, b);
# ("neg", a); ("fn", name, a...); ("ratio", a, b) a mean from a noisy sum and count.
Post = tuple[Any, ...]


def names_of(p: Post) -> list[str]:
    """The released columns a tree reads."""
    if p[0] in ("ref", "key", "out"):
        return [p[1]]
    if p[0] == "const":
        return []
    return [n for a in p[1:] if isinstance(a, tuple) for n in names_of(a)]


def _mul(a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
    pl = polars()
    prods = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
    return pl.min_horizontal(prods), pl.max_horizontal(prods)


def evaluate(p: Post) -> tuple[Any, Any, Any]:
    """(value, lo, hi) as Polars expressions over the released frame."""
    pl = polars()
    kind = p[0]
    if kind == "ref":
        return pl.col(p[1]), pl.col(f"{p[1]}_lo"), pl.col(f"{p[1]}_hi")
    if kind in ("key", "out"):
        c = pl.col(p[1])
        return c, c, c
    if kind == "const":
        c = pl.lit(p[1])
        return c, c, c
    if kind == "neg":
        v, lo, hi = evaluate(p[1])
        return -v, -hi, -lo
    if kind == "ratio":  # sum / count, the count taken as at least 1 (it is noisy)
        sv, slo, shi = evaluate(p[1])
        cv, clo, chi = evaluate(p[2])
        one = pl.lit(1.0)
        v = sv / pl.max_horizontal(cv, one)
        lo, hi = _mul(
            (slo, shi), (1.0 / pl.max_horizontal(chi, one), 1.0 / pl.max_horizontal(clo, one))
        )
        return v, lo, hi
    if kind == "op":
        op, a, b = p[1], evaluate(p[2]), evaluate(p[3])
        if op == "+":
            return a[0] + b[0], a[1] + b[1], a[2] + b[2]
        if op == "-":
            return a[0] - b[0], a[1] - b[2], a[2] - b[1]
        if op == "*":
            lo, hi = _mul((a[1], a[2]), (b[1], b[2]))
            return a[0] * b[0], lo, hi
        if op == "/":
            spans_zero = (b[1] <= 0) & (b[2] >= 0)
            inv = (1.0 / b[2], 1.0 / b[1])
            lo, hi = _mul((a[1], a[2]), inv)
            lo = pl.when(spans_zero).then(pl.lit(-math.inf)).otherwise(lo)
            hi = pl.when(spans_zero).then(pl.lit(math.inf)).otherwise(hi)
            return a[0] / b[0], lo, hi
        # comparisons and logic: a boolean (its interval is itself)
        ops = {
            "eq": a[0] == b[0],
            "ne": a[0] != b[0],
            "gt": a[0] > b[0],
            "ge": a[0] >= b[0],
            "lt": a[0] < b[0],
            "le": a[0] <= b[0],
            "and": a[0] & b[0],
            "or": a[0] | b[0],
        }
        v = ops[op]
        return v, v, v
    if kind == "not":
        v = ~evaluate(p[1])[0]
        return v, v, v
    if kind == "fn":
        name, args = p[1], [evaluate(a) for a in p[2:]]
        if name == "abs":
            v, lo, hi = args[0]
            span = (lo <= 0) & (hi >= 0)
            low = pl.when(span).then(pl.lit(0.0)).otherwise(pl.min_horizontal(lo.abs(), hi.abs()))
            return v.abs(), low, pl.max_horizontal(lo.abs(), hi.abs())
        if name == "sqrt":  # of a non-negative quantity: a variance, clamped at 0
            v, lo, hi = args[0]
            z = pl.lit(0.0)
            return (
                pl.max_horizontal(v, z).sqrt(),
                pl.max_horizontal(lo, z).sqrt(),
                pl.max_horizontal(hi, z).sqrt(),
            )
        if name == "round":
            v, lo, hi = args[0]
            d = int(p[3][1]) if len(p) > 3 else 0
            return v.round(d), lo.round(d), hi.round(d)
        if name in ("least", "greatest"):
            f = pl.min_horizontal if name == "least" else pl.max_horizontal
            return f([a[0] for a in args]), f([a[1] for a in args]), f([a[2] for a in args])
    raise AssertionError(f"unknown post-processing node {kind}")  # pragma: no cover
