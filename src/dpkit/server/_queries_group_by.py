"""The registry entry ``group_by``: per-group counts, sums, means… with :mod:`dpkit.frame`.

A request names key columns (categorical or integer columns of the public schema), the
aggregations, the contribution bounds L∞ (``max_rows``, rows per person and group), L0
(``max_groups``, groups per person) and optionally L1 (``max_rows_per_unit``), and which keys to
release. The privacy unit is the dataset's (``privacy_unit`` of the schema: an ``id`` column, or
each row); the bounds of every column come from the schema unless the request gives its own
(public either way). Kamath 2020 ("whether an individual does or does not include their data") is
the guarantee protected: (ε, δ)-DP for adding or removing one unit with all its rows.

Keys are public and data-independent by default: every combination of the key columns' domains
(the categories plus ``(other)`` for a categorical column, the integers within the bounds for an
``int`` column), so a key absent from the data is released too, as a noisy zero. ``"keys":
"private"`` selects the keys privately instead (needs δ > 0; ``docs/frame.md``, "Keys").

The price is the plan's cost from :meth:`dpkit.frame.GroupedQuery.explain` on an empty frame
with the dataset's column types, i.e. from the request and the public schema alone.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dpkit.errors import DataError
from dpkit.server._numbers import integer, privacy, real
from dpkit.server._registry import Answer, Meter, Prepared, check_keys
from dpkit.server._schema import Column, DatasetSchema, Table

__all__ = ["MAX_AGGREGATIONS", "MAX_BOUND", "MAX_GROUPS", "prepare_group_by"]

MAX_GROUPS = 10_000
"""Most keys a query may release (the size of its answer)."""
MAX_AGGREGATIONS = 16
MAX_BOUND = 1000
"""Largest L∞, L0 or L1: beyond it the noise swamps any answer anyway."""
_BY = 4
_ALLOWED = {"by", "aggregations", "keys", "max_rows", "max_groups", "max_rows_per_unit",
            "epsilon", "delta", "alpha"}  # fmt: skip
_STATS = ("count", "count_units", "sum", "mean", "var", "std", "quantiles")
_OTHER = "(other)"
_MAX_INT_KEY = 2.0**53


def _int_domain(col: Column) -> list[int]:
    """Every value a cleaned ``int`` column can hold (clamped to the bounds, then rounded)."""
    assert col.bounds is not None
    lo, hi = math.floor(col.bounds[0]), math.ceil(col.bounds[1])
    if hi - lo + 1 > MAX_GROUPS:
        raise DataError(
            f"column {col.name} has more than {MAX_GROUPS} integer values within its bounds; "
            "it cannot be a group-by key."
        )
    return list(range(lo, hi + 1))


def _key_columns(params: Mapping[str, Any], schema: DatasetSchema) -> list[Column]:
    by = params.get("by")
    by = [by] if isinstance(by, str) else by
    if not isinstance(by, list) or not 1 <= len(by) <= _BY:
        raise DataError(f"by must be a list of 1 to {_BY} key columns.")
    cols = [schema.column(b) for b in by]
    if len({c.name for c in cols}) != len(cols):
        raise DataError("by must not repeat a column.")
    for c in cols:
        if c.type not in ("category", "int"):
            raise DataError(
                f"column {c.name} is of type {c.type}; group by categorical or int columns."
            )
        if c.bounds is not None and max(abs(b) for b in c.bounds) > _MAX_INT_KEY:
            # Keys are cast to Int64: a value past 2^63 fails the cast, and only if the data
            # hold one (a private fact); within ±2^53 every cleaned value is an exact integer.
            raise DataError(
                f"column {c.name} has bounds beyond ±2^53; it cannot be a group-by key."
            )
    return cols


def _domain(col: Column) -> list[int]:
    """Codes of a key column as stored: category codes (``(other)`` last), or the integers."""
    if col.type == "category":
        assert col.categories is not None
        return list(range(len(col.categories) + 1))
    return _int_domain(col)


def _code(col: Column, value: object) -> int:
    """A public key value from the request (a category label, or an int) as its stored code."""
    if col.type == "category":
        assert col.categories is not None
        labels = (*col.categories, _OTHER)
        if not isinstance(value, str) or value not in labels:
            raise DataError(f"a key of column {col.name} is not one of its categories.")
        return labels.index(value)
    assert col.bounds is not None
    lo, hi = math.floor(col.bounds[0]), math.ceil(col.bounds[1])
    return integer(value, f"a key of column {col.name}", low=lo, high=hi)


def _label(col: Column, code: int) -> Any:
    if col.type == "category":
        assert col.categories is not None
        return col.categories[code] if code < len(col.categories) else _OTHER
    return int(code)


def _public_keys(params: Mapping[str, Any], cols: list[Column]) -> list[tuple[int, ...]] | None:
    keys = params.get("keys")
    if keys == "private":
        return None
    if keys is None:
        size = math.prod(len(_domain(c)) for c in cols)
        if size > MAX_GROUPS:
            raise DataError(
                f"the key columns have {size} combinations, more than {MAX_GROUPS}; list the "
                'keys to release, or use "keys": "private".'
            )
        return list(itertools.product(*(_domain(c) for c in cols)))
    if not isinstance(keys, list) or not 1 <= len(keys) <= MAX_GROUPS:
        raise DataError(f'keys must be a list of 1 to {MAX_GROUPS} keys, or "private".')
    out = []
    for k in keys:
        parts = [k] if len(cols) == 1 and not isinstance(k, list) else k
        if not isinstance(parts, list) or len(parts) != len(cols):
            raise DataError("each key must give one value per key column (a list for several).")
        out.append(tuple(_code(c, v) for c, v in zip(cols, parts, strict=True)))
    if len(set(out)) != len(out):
        raise DataError("keys must not repeat.")
    return out


def _bound(params: Mapping[str, Any], name: str, default: int = 1) -> int:
    return integer(params.get(name, default), name, low=1, high=MAX_BOUND)


def _chosen(params: Mapping[str, Any], unit: str | None) -> tuple[int, int]:
    """``max_rows`` and ``max_groups`` as the request chose them (each given one checked first):
    required where the dataset has a privacy unit (1 where each row is its own unit, which
    contributes one row to one group)."""
    given = {n: _bound(params, n) for n in ("max_rows", "max_groups") if n in params}
    missing = [n for n in ("max_rows", "max_groups") if n not in given]
    if missing and unit is not None:
        raise DataError(
            f"choose {' and '.join(missing)}: the service does not choose contribution bounds "
            "(max_rows: rows one person may add to each group; max_groups: groups one person "
            "may add to). Rows beyond the bounds are dropped (bias); larger bounds add noise: "
            "compare them with a dry run."
        )
    return given.get("max_rows", 1), given.get("max_groups", 1)


def _aggregations(params: Mapping[str, Any], schema: DatasetSchema) -> list[Any]:
    import dpkit.frame as dpf

    aggs = params.get("aggregations", [{"stat": "count"}])
    if not isinstance(aggs, list) or not 1 <= len(aggs) <= MAX_AGGREGATIONS:
        raise DataError(f"aggregations must be a list of 1 to {MAX_AGGREGATIONS} objects.")
    out = []
    for a in aggs:
        if not isinstance(a, dict) or a.get("stat") not in _STATS:
            raise DataError(f"each aggregation is an object with stat in {', '.join(_STATS)}.")
        stat = a["stat"]
        if stat in ("count", "count_units"):
            check_keys(a, {"stat"})
            out.append(dpf.count() if stat == "count" else dpf.count_units())
            continue
        extra = {"q"} if stat == "quantiles" else ({"unit_total"} if stat == "sum" else set())
        check_keys(a, {"stat", "column", "bounds"} | extra)
        col = schema.column(a.get("column"))
        if col.bounds is None:
            raise DataError(
                f"column {col.name} is of type {col.type}; {stat} needs a numeric column."
            )
        bounds = a.get("bounds", list(col.bounds))
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise DataError("an aggregation's bounds must be [low, high].")
        bounds = [real(b, "an aggregation's bounds") for b in bounds]
        if stat == "quantiles":
            q = a.get("q", [0.5])
            if not isinstance(q, list) or not 1 <= len(q) <= 20:
                raise DataError("q must be a list of 1 to 20 probabilities.")
            qs = [real(v, "q", low=0, high=1) for v in q]
            out.append(dpf.quantiles(col.name, qs, bounds=tuple(bounds)))
        elif "unit_total" in a:  # each person's total per group clamped too
            total = a["unit_total"]
            if not isinstance(total, list) or len(total) != 2:
                raise DataError("an aggregation's unit_total must be [low, high].")
            ends = (real(total[0], "unit_total"), real(total[1], "unit_total"))
            out.append(dpf.sum(col.name, bounds=tuple(bounds), unit_total=ends))
        else:
            out.append(getattr(dpf, stat)(col.name, bounds=tuple(bounds)))
    return out


def _frame(schema: DatasetSchema, columns: Mapping[str, Any], keys: list[Column]) -> Any:
    """A Polars frame of the columns a query reads: keys and the unit as Int64, values float
    (on a Spark-backed dataset, the same columns of its cleaned Spark table)."""
    import polars as pl

    if callable(spark := getattr(columns, "frame", None)):  # dpkit.server._spark_tables
        return _spark_frame(spark, schema, keys)

    data: dict[str, Any] = {}
    for c in schema.columns:
        if c.type in ("float", "int") and c not in keys:
            data[c.name] = pl.Series(c.name, columns[c.name], dtype=pl.Float64)
        elif c in keys or c.name == schema.privacy_unit:
            # codes are stored as int64: the mapped column itself, not a copy (docs/server.md)
            data[c.name] = pl.Series(c.name, columns[c.name]).cast(pl.Int64)
    return pl.DataFrame(data)


def _spark_frame(frame: Callable[[list[str]], Any], schema: DatasetSchema,
                 keys: list[Column]) -> Any:  # fmt: skip
    """The Spark columns of :func:`_frame`: keys as ``bigint`` (int columns are cleaned to
    doubles), values ``double``, the unit as the source's value."""
    from pyspark.sql import functions as f

    unit = schema.privacy_unit
    names = [c.name for c in schema.columns
             if c.type in ("float", "int") or c in keys or c.name == unit]  # fmt: skip
    out = frame(names)
    for c in keys:
        if c.type == "int":
            out = out.withColumn(c.name, f.col(c.name).cast("long"))
    return out


def _json_float(v: Any) -> float | int | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return v  # a released count stays an integer
    f = float(v)
    return f if math.isfinite(f) else None


def prepare_group_by(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
    """Validate and price a ``group_by`` request from the request and the public schema.

    Notes
    -----
    Privacy guarantee: the answer is (ε, δ)-DP for adding or removing one privacy unit of the
    schema (all of a person's rows), by :meth:`dpkit.frame.GroupedQuery.release` with the
    request's public contribution bounds; the price is that release's plan, so the meter that
    holds it refuses anything more.

    Examples
    --------
    >>> from dpkit.server import DatasetSchema
    >>> schema = DatasetSchema.from_dict({"name": "v", "privacy_unit": "user", "columns": [
    ...     {"name": "user", "type": "id"},
    ...     {"name": "city", "type": "category", "categories": ["a", "b"]}]})
    >>> p = prepare_group_by({"by": ["city"], "max_rows": 2, "max_groups": 1, "epsilon": 1.0},
    ...                      schema)
    >>> p.statistic, p.epsilon, p.delta
    ('group_by', 1.0, 0.0)
    """
    try:
        import polars as pl

        import dpkit.frame as dpf
    except ImportError as exc:  # pragma: no cover - the server extra installs polars
        raise DataError("group_by needs polars on the server: pip install 'dpkit[server]'") from exc
    check_keys(params, _ALLOWED)
    eps, dlt = privacy(params)
    alpha = real(
        params.get("alpha", 0.05), "alpha", low=0, high=1, low_open=True, high_open=True,
        hint=", e.g. 0.05 for 95% intervals",
    )  # fmt: skip
    cols = _key_columns(params, schema)
    keys = _public_keys(params, cols)
    if keys is None and dlt == 0:
        raise DataError('private key selection ("keys": "private") needs delta > 0.')
    aggs = _aggregations(params, schema)
    unit = None if schema.privacy_unit == "row" else schema.privacy_unit
    l_inf, l_0 = _chosen(params, unit)
    l_1 = None if params.get("max_rows_per_unit") is None else _bound(params, "max_rows_per_unit")
    names = [c.name for c in cols]

    def grouped(frame: Any) -> Any:
        public: Any = None
        if keys is not None:
            public = pl.DataFrame(keys, schema=dict.fromkeys(names, pl.Int64), orient="row")
        q = dpf.Query(frame, privacy_unit=unit).group_by(
            *names, public_keys=public, max_rows=l_inf, max_groups=l_0, max_rows_per_unit=l_1
        )
        return q.agg(*aggs)

    empty = {c.name: np.zeros(0) for c in schema.columns}
    plan = grouped(_frame(schema, empty, cols)).explain(epsilon=eps, delta=dlt)

    def compute(t: Table, rng: Any, meter: Meter) -> Answer:
        rel = grouped(_frame(schema, t.columns, cols)).release(
            epsilon=eps, delta=dlt, accountant=meter, rng=rng, alpha=float(alpha)
        )
        frame = rel.frame
        rows = []
        for rec in frame.iter_rows(named=True):
            row: dict[str, Any] = {c.name: _label(c, rec[c.name]) for c in cols}
            row.update({k: _json_float(v) for k, v in rec.items() if k not in row})
            rows.append(row)
        return Answer(rows, None, tuple(frame.columns))

    def accuracy() -> dict[str, float]:
        # each released key's noise half-width per column, from the plan (public parameters)
        cells: dict[str, float] = plan.accuracy(float(alpha))
        return cells

    return Prepared("group_by", plan.epsilon, plan.delta, compute, accuracy=accuracy)
