"""What a query can compute per group, and the exact integer "measures" each one needs.

An aggregation (count, sum, mean, …) is post-processing of a few *measures*: exact integer sums,
per group, of a per-row integer computed from one column (a fixed-point value, a bucket index, or
the constant 1). Measures are shared: ``mean("x")`` and ``var("x")`` use the same centred sum, and
every mean uses the same row count. Bounds are attached to the aggregation, not to the column, so
a column redefined by ``with_columns`` is always clamped to the bounds given where it is
aggregated (never to bounds remembered from an earlier definition).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpkit.errors import DataError

__all__ = [
    "Aggregation",
    "Measure",
    "check_output_names",
    "count",
    "count_units",
    "histogram",
    "mean",
    "output_names",
    "quantiles",
    "std",
    "sum",
    "var",
]

_builtin_sum = sum


@dataclass(frozen=True)
class Measure:
    """One exact integer sum per group.

    ``kind`` is ``"rows"`` (1 per row), ``"units"`` (1 per privacy unit in the group),
    ``"value"`` (a fixed-point image of a clamped column: ``transform`` ``"plain"`` is the value,
    ``"centred"`` is ``(x − m)/h`` in [-1, 1], ``"square"`` its square), or ``"bucket"`` (one count
    per bucket: a histogram, or the nodes of a quantile tree with ``levels`` levels).
    """

    kind: str
    column: str | None = None
    bounds: tuple[float, float] | None = None
    transform: str = "plain"
    edges: tuple[float, ...] = ()
    branching: int = 0
    levels: int = 1
    unit_total: tuple[float, float] | None = None  # each unit's sum per group clamped to it

    @property
    def name(self) -> str:
        """An internal column name, plain ASCII (engines treat dots and brackets specially)."""
        if self.kind in ("rows", "units"):
            return f"__{self.kind}"
        digest = hashlib.sha256(repr(self).encode()).hexdigest()[:12]
        what = self.transform if self.kind == "value" else ("hist" if self.edges else "tree")
        return f"__{what}_{digest}"

    def describe(self) -> str:
        """A readable description for explain()."""
        if self.kind in ("rows", "units"):
            return self.kind
        if self.kind == "value":
            each = "" if self.unit_total is None else f", each unit's total in {self.unit_total}"
            return f"{self.transform} sum of {self.column} in {self.bounds}{each}"
        if self.edges:
            return f"histogram of {self.column}, edges {list(self.edges)}"
        return f"quantile tree of {self.column} in {self.bounds}, {self.branching}^{self.levels}"

    @property
    def max_abs(self) -> float:
        """Largest |per-row value| before fixed-point scaling (1 for counts and transforms)."""
        if self.kind == "value" and self.transform == "plain":
            assert self.bounds is not None
            return max(abs(self.bounds[0]), abs(self.bounds[1]))
        return 1.0

    @property
    def buckets(self) -> int:
        """Number of coordinates per group (1 for a scalar measure)."""
        if self.kind != "bucket":
            return 1
        if self.edges:
            return len(self.edges) - 1
        return _builtin_sum(self.branching**j for j in range(1, self.levels + 1))


@dataclass(frozen=True)
class Aggregation:
    """A per-group statistic: its output name, what it computes and the measures it needs."""

    stat: str
    column: str | None
    bounds: tuple[float, float] | None
    alias: str
    edges: tuple[float, ...] = ()
    qs: tuple[float, ...] = ()
    branching: int = 16
    levels: int = 2
    unit_total: tuple[float, float] | None = None

    def measures(self) -> tuple[Measure, ...]:
        rows = Measure("rows")
        if self.stat == "count":
            return (rows,)
        if self.stat == "count_units":
            return (Measure("units"),)
        if self.stat == "sum":
            return (
                Measure("value", self.column, self.bounds, "plain", unit_total=self.unit_total),
            )
        centred = Measure("value", self.column, self.bounds, "centred")
        if self.stat == "mean":
            return (centred, rows)
        if self.stat in ("var", "std"):
            return (centred, Measure("value", self.column, self.bounds, "square"), rows)
        if self.stat == "histogram":
            return (Measure("bucket", self.column, None, edges=self.edges),)
        return (
            Measure(
                "bucket",
                self.column,
                self.bounds,
                branching=self.branching,
                levels=self.levels,
            ),
        )

    @property
    def columns(self) -> tuple[str, ...]:
        """The data columns this aggregation reads (besides the unit and keys)."""
        return () if self.column is None else (self.column,)


def _column(column: object) -> str:
    if not isinstance(column, str) or not column:
        raise DataError(f"column must be a non-empty column name (str), got {column!r}.")
    return column


def _bounds(bounds: object, what: str) -> tuple[float, float]:
    if bounds is None:
        raise DataError(
            f"{what} needs bounds=(lower, upper); dpkit never reads them from the data (that "
            "would leak it). Choose them from domain knowledge, or estimate them privately "
            "with dpkit.stats.bounds."
        )
    try:
        lo, hi = (float(b) for b in bounds)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise DataError(f"bounds for {what} must be two numbers (lower, upper).") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise DataError(f"bounds for {what} must be finite.")
    if not lo < hi:
        raise DataError(f"bounds for {what} are reversed or empty: need lower < upper.")
    if max(abs(lo), abs(hi)) > 2.0**60:
        raise DataError(f"bounds for {what} must lie within ±2^60.")
    if hi - lo < 2.0**-900:
        # the centred transform scales by 2 / (hi - lo), a quantile tree by leaves / (hi - lo):
        # an overflow there made rows ±inf or NaN, and the release fail exactly when the table
        # had a row (a refusal before any charge that told whether anyone's row was there)
        raise DataError(f"bounds for {what} are too close together (upper - lower < 2^-900).")
    return lo, hi


def _alias(alias: object, default: str) -> str:
    if alias is None:
        return default
    if not isinstance(alias, str) or not alias or alias.startswith("__"):
        raise DataError("alias must be a non-empty str not starting with '__'.")
    return alias


def count(*, alias: str | None = None) -> Aggregation:
    """Rows per group (after contribution bounding).

    Examples
    --------
    >>> count().alias
    'count'
    """
    return Aggregation("count", None, None, _alias(alias, "count"))


def count_units(*, alias: str | None = None) -> Aggregation:
    """Distinct privacy units per group (after contribution bounding; each unit counts once).

    >>> count_units().alias
    'units'
    """
    return Aggregation("count_units", None, None, _alias(alias, "units"))


def _bounded(kind: str, column: str, bounds: tuple[float, float], alias: str | None) -> Aggregation:
    """An aggregation of one column clamped to ``bounds``, named ``{kind}_{column}`` by default."""
    c = _column(column)
    return Aggregation(kind, c, _bounds(bounds, f"{kind}({c!r})"), _alias(alias, f"{kind}_{c}"))


def sum(
    column: str,
    *,
    bounds: tuple[float, float],
    unit_total: tuple[float, float] | None = None,
    alias: str | None = None,
) -> Aggregation:
    """Sum of a column clamped to ``bounds`` per group.

    With ``unit_total=(lower, upper)`` each unit's total in a group (the sum of its kept rows,
    each clamped to ``bounds``) is clamped to ``unit_total`` as well, as PipelineDP's
    ``min_sum_per_partition``/``max_sum_per_partition`` do: a unit then moves a group's sum by
    at most ``max(|lower|, |upper|)`` instead of ``max_rows`` times the row bound, so the noise
    is smaller when units have many small rows. The sensitivity is the smaller of the two.
    ``unit_total`` must contain 0 (a unit absent from a group adds 0 to it). Polars engine only.

    >>> sum("amount", bounds=(0, 100)).alias
    'sum_amount'
    >>> sum("amount", bounds=(0, 100), unit_total=(0, 250)).unit_total
    (0.0, 250.0)
    """
    agg = _bounded("sum", column, bounds, alias)
    if unit_total is None:
        return agg
    total = _bounds(unit_total, f"the unit total of sum({agg.column!r})")
    if not total[0] <= 0.0 <= total[1]:
        raise DataError(
            "unit_total must contain 0 (lower <= 0 <= upper): a unit with no rows in a group "
            "adds 0 to it."
        )
    return Aggregation("sum", agg.column, agg.bounds, agg.alias, unit_total=total)


def mean(column: str, *, bounds: tuple[float, float], alias: str | None = None) -> Aggregation:
    """Mean of a column clamped to ``bounds`` per group (a noisy centred sum over a noisy count).

    >>> mean("amount", bounds=(0, 100)).alias
    'mean_amount'
    """
    return _bounded("mean", column, bounds, alias)


def var(column: str, *, bounds: tuple[float, float], alias: str | None = None) -> Aggregation:
    """Variance (divisor n) of a column clamped to ``bounds`` per group.

    >>> var("amount", bounds=(0, 100)).alias
    'var_amount'
    """
    return _bounded("var", column, bounds, alias)


def std(column: str, *, bounds: tuple[float, float], alias: str | None = None) -> Aggregation:
    """Standard deviation (divisor n) of a column clamped to ``bounds`` per group.

    >>> std("amount", bounds=(0, 100)).alias
    'std_amount'
    """
    return _bounded("std", column, bounds, alias)


def quantiles(
    column: str,
    q: float | Sequence[float],
    *,
    bounds: tuple[float, float],
    branching: int = 16,
    levels: int = 2,
    alias: str | None = None,
) -> Aggregation:
    """Quantiles of a column per group, from a noisy bucket tree (a plain group-by).

    The range ``bounds`` is cut into ``branching**levels`` equal leaves; every row adds one to
    the node that holds it at each level, so the tree is ``levels`` histograms computed by one
    group-by (the quantile tree of Google's differential-privacy library; Cormode et al. 2019).
    A quantile is found by walking down from the root to the child where the noisy cumulative
    count crosses ``q``; it is returned at the leaf's midpoint. Output columns are named
    ``{alias}_{q}``.

    >>> quantiles("amount", [0.5], bounds=(0, 100)).qs
    (0.5,)
    """
    c = _column(column)
    qs = (q,) if isinstance(q, int | float) else tuple(q)
    if not qs or not all(isinstance(v, int | float) and 0.0 <= float(v) <= 1.0 for v in qs):
        raise DataError("q must be a probability in [0, 1] or a non-empty list of them.")
    for name, v, top in (("branching", branching, 256), ("levels", levels, 6)):
        if isinstance(v, bool) or not isinstance(v, int) or not 2 - (name == "levels") <= v <= top:
            raise DataError(f"{name} must be an int in [{2 - (name == 'levels')}, {top}].")
    if branching**levels > 1 << 20:
        raise DataError("branching**levels must be at most 2**20 leaves.")
    return Aggregation(
        "quantiles",
        c,
        _bounds(bounds, f"quantiles({c!r})"),
        _alias(alias, f"q_{c}"),
        qs=tuple(float(v) for v in qs),
        branching=branching,
        levels=levels,
    )


def histogram(column: str, *, bins: Sequence[float], alias: str | None = None) -> Aggregation:
    """Counts of a column's values in the given bins, per group (values outside are not counted).

    Bins are half-open ``[e_i, e_{i+1})`` except the last, which includes its right edge (as in
    NumPy). Output columns are ``{alias}_{i}`` for bin i.

    >>> histogram("amount", bins=[0, 10, 100]).edges
    (0.0, 10.0, 100.0)
    """
    c = _column(column)
    try:
        e = np.asarray(bins, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError("bins must be a sequence of numbers (the bin edges).") from None
    if e.ndim != 1 or e.size < 2 or not np.all(np.isfinite(e)) or not np.all(np.diff(e) > 0):
        raise DataError("bins must be at least two finite, strictly increasing edges.")
    return Aggregation(
        "histogram", c, None, _alias(alias, f"hist_{c}"), edges=tuple(float(v) for v in e)
    )


def output_names(agg: Aggregation) -> set[str]:
    """The columns ``finish`` writes for ``agg`` (an estimate and its ``_lo``/``_hi``)."""
    if agg.stat == "histogram":
        heads = [f"{agg.alias}_{i}" for i in range(len(agg.edges) - 1)]
    elif agg.stat == "quantiles":
        heads = [f"{agg.alias}_{q:g}" for q in agg.qs]
    else:
        heads = [agg.alias]
    return {f"{h}{end}" for h in heads for end in ("", "_lo", "_hi")}


def check_output_names(by: Sequence[str], aggs: Sequence[Aggregation]) -> None:
    """Refuse (before anything is charged) output columns that would overwrite one another:
    a key column named like an estimate, or an alias equal to another's ``_lo``/``_hi``."""
    seen = set(by)
    for a in aggs:
        names = output_names(a)
        if names & seen:
            raise DataError(
                f"aggregation {a.alias!r} would write column(s) {sorted(names & seen)} that "
                "another output column (a key or another aggregation) already has; use alias=."
            )
        seen |= names
