"""BigQuery's ``SELECT WITH DIFFERENTIAL_PRIVACY`` semantics on :mod:`dpkit.frame`.

BigQuery aggregates each privacy unit's rows within a group first (its count, sum or average
there), clamps that per-unit value to ``contribution_bounds_per_group``, and then adds the
per-unit values of at most ``max_groups_contributed`` groups per unit; groups are released when
a noisy count of their units passes a threshold (a hidden count, paid from the budget). Here
the per-unit value is a window over (unit, keys) computed before the frame query, which keeps
one row per (unit, group) (``max_rows=1``) and clamps the value to the bounds, and key
selection is the thresholded noisy unit count (``selection="laplace"``), paid ``1/(n+1)`` of ε
for ``n`` aggregate calls as in BigQuery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpkit.errors import QueryRefusedError
from dpkit.frame import mean, quantiles
from dpkit.frame import sum as fsum
from dpkit.frame._engine import polars
from dpkit.sql._parse import sqlglot
from dpkit.sql._post import Post

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.sql._compile import _Compiler

__all__ = ["Window", "bq_aggregate", "bq_options", "bq_percentile"]


@dataclass(frozen=True)
class Window:
    """A per-unit value in each group, kept in an engine-neutral form: ``kind`` is ``"rows"``
    (the unit's rows in the group), ``"nn"`` (its rows where ``expr`` is not null), ``"sum"`` or
    ``"mean"`` (of ``expr``, a Float64 row-wise Polars expression) over the rows sharing the
    columns ``part`` (the unit and the keys), or ``"row"`` (``expr`` itself, row-wise)."""

    kind: str
    expr: Any
    part: tuple[str, ...] = ()

    def polars(self) -> Any:
        """The window as one Polars expression (the Polars engine's plan)."""
        pl = polars()
        part = [pl.col(c) for c in self.part]
        if self.kind == "rows":
            return pl.len().over(part).cast(pl.Float64)
        if self.kind == "nn":
            return self.expr.is_not_null().sum().over(part).cast(pl.Float64)
        if self.kind == "sum":
            return self.expr.sum().over(part)
        if self.kind == "mean":
            return self.expr.mean().over(part)
        return self.expr


def _part(comp: _Compiler) -> tuple[str, ...]:
    if comp.scope.unit is None:
        raise QueryRefusedError(
            "BigQuery's DIFFERENTIAL_PRIVACY clause needs a privacy unit column; this table has "
            "row privacy. Use dpkit's dialect (no WITH DIFFERENTIAL_PRIVACY) instead."
        )
    return (comp.scope.unit, *comp.c.keys)


def bq_aggregate(comp: _Compiler, kind: str, arg: Any, bounds: tuple[float, float] | None) -> Post:
    """A BigQuery DP aggregate: per-unit value in the group (a window), clamped by the frame."""
    exp = sqlglot().exp
    pl = polars()
    part = _part(comp)
    c = comp.c
    if kind == "count":
        if isinstance(arg, exp.Star):
            per_unit, note = Window("rows", None, part), "rows"
        else:
            r = comp._row(arg, clamp=False)
            per_unit, note = Window("nn", r.expr, part), "non-null rows"
        lo, hi = bounds if bounds is not None else (0.0, float(comp.scope.private.max_rows))
        col = comp._fresh("u")
        c.windows[col] = per_unit
        return (
            "ref",
            comp._register(
                ("bq", col),
                lambda a: fsum(col, bounds=(lo, hi), alias=a),
                f"sum over units of each unit's {note} in the group, clamped to ({lo:g}, {hi:g})",
            ),
        )
    if kind in ("sum", "avg"):
        r = comp._row(arg, clamp=False)
        if r.kind not in ("num", "bool"):
            raise QueryRefusedError(f"{kind.upper()} needs a numeric expression.")
        if bounds is None:
            if kind == "sum":
                raise QueryRefusedError(
                    "SUM needs contribution_bounds_per_group => (lower, upper): BigQuery would "
                    "estimate them from the data, which dpkit never does."
                )
            rb = comp._row(arg, clamp=True)
            if not rb.bounded:
                raise QueryRefusedError(
                    "AVG needs contribution_bounds_per_group => (lower, upper) or declared "
                    "bounds on the columns it reads."
                )
            bounds = (rb.lo, rb.hi)
        lo, hi = bounds
        if not lo < hi:
            raise QueryRefusedError("contribution bounds need lower < upper.")
        e = r.expr.cast(pl.Float64)
        col = comp._fresh("u")
        c.windows[col] = Window("sum" if kind == "sum" else "mean", e, part)
        make = fsum if kind == "sum" else mean
        what = "sum" if kind == "sum" else "average"
        return (
            "ref",
            comp._register(
                ("bq", col),
                lambda a: make(col, bounds=(lo, hi), alias=a),
                f"{'sum' if kind == 'sum' else 'mean'} over units of each "
                f"unit's {what} in the group, clamped to ({lo:g}, {hi:g})",
            ),
        )
    raise QueryRefusedError(
        f"{kind.upper()} is not one of BigQuery's differentially private aggregates here "
        "(COUNT, SUM, AVG, PERCENTILE_CONT); use dpkit's dialect for VAR and STDDEV."
    )


def bq_percentile(comp: _Compiler, arg: Any, q: float, bounds: tuple[float, float] | None) -> Post:
    """PERCENTILE_CONT(x, p, contribution_bounds_per_row => (lo, hi)): per-row clamping; one
    row per unit and group (chosen by keyed hash) enters the quantile tree."""
    pl = polars()
    _part(comp)
    r = comp._row(arg, clamp=False)
    if bounds is None:
        rb = comp._row(arg, clamp=True)
        if not rb.bounded:
            raise QueryRefusedError(
                "PERCENTILE_CONT needs contribution_bounds_per_row => (lower, upper) or declared "
                "bounds on the columns it reads."
            )
        bounds = (rb.lo, rb.hi)
    lo, hi = bounds
    col = comp._fresh("u")
    comp.c.windows[col] = Window("row", r.expr.cast(pl.Float64))
    alias = comp._register(
        ("bq", col, q),
        lambda a: quantiles(col, [q], bounds=(lo, hi), alias=a),
        f"quantile {q:g} of one row per unit and group, in ({lo:g}, {hi:g})",
    )
    return ("ref", f"{alias}_{q:g}")


def bq_options(comp: _Compiler) -> None:
    """Read OPTIONS(...): ε, δ, max_groups_contributed, privacy_unit_column."""
    opts = comp.c.options
    known = {"epsilon", "delta", "max_groups_contributed", "privacy_unit_column"}
    unknown = sorted(set(opts) - known)
    if unknown:
        raise QueryRefusedError(
            f"unknown DIFFERENTIAL_PRIVACY option(s) ({len(unknown)}); known: {sorted(known)}."
        )
    if "epsilon" not in opts:
        raise QueryRefusedError("OPTIONS needs epsilon = ... (and delta = ... to select groups).")
    t = comp.scope.private
    unit = opts.get("privacy_unit_column")
    if unit is not None and (t.privacy_unit is None or str(unit).lower() != t.privacy_unit.lower()):
        raise QueryRefusedError(
            "privacy_unit_column must be the privacy unit declared in the table's metadata."
        )
    if "max_groups_contributed" in opts:
        g = opts["max_groups_contributed"]
        if g is None:
            raise QueryRefusedError(
                "max_groups_contributed = NULL removes the bound and with it the guarantee; "
                "give a positive integer."
            )
        if not isinstance(g, float) or not math.isfinite(g) or g != int(g) or g < 1:
            raise QueryRefusedError("max_groups_contributed must be a positive integer.")
        comp.c.max_groups = int(g)
    else:
        comp.c.max_groups = 1  # BigQuery's default
    comp.c.max_rows = 1  # one row per (unit, group): the windows hold the unit's aggregate
    comp.c.max_rows_per_unit = None
