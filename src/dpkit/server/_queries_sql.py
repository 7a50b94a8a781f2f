"""The registry entry ``sql``: one SELECT in dpkit's or BigQuery's dialect, by :mod:`dpkit.sql`.

The table is the dataset (named as in ``GET /v1/datasets``); its metadata comes from the
registered schema: the privacy unit (an ``id`` column, or each row), each numeric column's
bounds, each categorical column's categories plus ``(other)`` as its public key set. The
contribution bounds are the request's (``max_rows`` L∞, ``max_groups`` L0, optionally
``max_rows_per_unit`` L1, default 1), public either way. The query is refused (HTTP 400) from its
text and the schema alone; its price is its plan's cost (``SQLQuery.explain`` on an empty frame
of the schema), and the dry release runs the whole query on the public dummy table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpkit.errors import DataError
from dpkit.server._numbers import integer, privacy, real
from dpkit.server._registry import Answer, Meter, Prepared, check_keys
from dpkit.server._schema import DatasetSchema, Table

__all__ = ["MAX_SQL", "prepare_sql", "warm_sql"]

MAX_SQL = 10_000
"""Longest SQL text accepted (characters)."""
_ALLOWED = {"sql", "epsilon", "delta", "alpha", "max_rows", "max_groups", "max_rows_per_unit"}
_OTHER = "(other)"


def warm_sql() -> None:
    """Import the SQL parser and build its dialects now (about a second, once per process), so
    that the first ``sql`` request is priced as fast as the next: a first pricing that paid it
    could pass ``max_pricing_seconds`` on a loaded machine where a later one would not."""
    try:
        import polars  # noqa: F401  (the engine every sql query runs on)

        from dpkit.sql._parse import parse_sql
    except ImportError:  # pragma: no cover - the server extra installs them
        return
    parse_sql("SELECT COUNT(*) FROM t GROUP BY a HAVING COUNT(*) > 1 ORDER BY 1 LIMIT 1")
    parse_sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) SUM(x, "
              "contribution_bounds_per_group => (0, 1)) FROM t")  # fmt: skip


def _catalog(schema: DatasetSchema, l_inf: int, l_0: int, l_1: int | None) -> Any:
    import dpkit.sql as dps

    cols = []
    for c in schema.columns:
        if c.type == "id":
            cols.append(dps.Column(c.name, "int"))
        elif c.type == "category":
            assert c.categories is not None
            cols.append(dps.Column(c.name, "string", keys=(*c.categories, _OTHER)))
        elif c.type in ("float", "int"):
            cols.append(dps.Column(c.name, c.type, bounds=c.bounds))
    unit = None if schema.privacy_unit == "row" else schema.privacy_unit
    table = dps.Table(
        schema.name,
        cols,
        privacy_unit=unit,
        row_privacy=unit is None,
        max_groups=l_0,
        max_rows=l_inf,
        max_rows_per_unit=l_1,
    )
    return dps.Catalog([table])


def _frame(schema: DatasetSchema, columns: Mapping[str, Any]) -> Any:
    """The dataset as Polars: category codes back to their labels, ids as Int64."""
    import polars as pl

    data: dict[str, Any] = {}
    for c in schema.columns:
        if c.type == "category":
            assert c.categories is not None
            # each code's label gathered by Polars (no Python string per row)
            labels = pl.Series(c.name, [*c.categories, _OTHER], dtype=pl.String)
            data[c.name] = labels.gather(np.asarray(columns[c.name], dtype=np.int64))
        elif c.type == "id":
            data[c.name] = pl.Series(c.name, columns[c.name]).cast(pl.Int64)
        elif c.type in ("float", "int"):
            data[c.name] = pl.Series(c.name, columns[c.name], dtype=pl.Float64)
    return pl.DataFrame(data)


def _json(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    return v


def prepare_sql(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
    """Validate, compile and price a ``sql`` request from the request and the public schema.

    Notes
    -----
    Privacy guarantee: the answer is (ε, δ)-DP for adding or removing one privacy unit of the
    schema (all of a person's rows): it is a :mod:`dpkit.sql` release (a
    :mod:`dpkit.frame` plan and post-processing of its output), charged to the meter at the
    plan's cost, which is the price.

    Examples
    --------
    >>> from dpkit.server import DatasetSchema
    >>> schema = DatasetSchema.from_dict({"name": "v", "privacy_unit": "user", "columns": [
    ...     {"name": "user", "type": "id"},
    ...     {"name": "city", "type": "category", "categories": ["a", "b"]}]})
    >>> p = prepare_sql({"sql": "SELECT city, COUNT(*) FROM v GROUP BY city", "epsilon": 1.0},
    ...                 schema)
    >>> p.statistic, p.epsilon, p.delta
    ('sql', 1.0, 0.0)
    """
    try:
        import dpkit.sql as dps
    except ImportError as exc:  # pragma: no cover - the server extra installs it
        raise DataError("sql needs sqlglot on the server: pip install 'dpkit[sql]'") from exc
    check_keys(params, _ALLOWED)
    text = params.get("sql")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_SQL:
        raise DataError(f"sql must be a non-empty string of at most {MAX_SQL} characters.")
    alpha = real(
        params.get("alpha", 0.05), "alpha", low=0, high=1, low_open=True, high_open=True,
        hint=", e.g. 0.05 for 95% intervals",
    )  # fmt: skip
    l_inf = integer(params.get("max_rows", 1), "max_rows", low=1, high=1000)
    l_0 = integer(params.get("max_groups", 1), "max_groups", low=1, high=1000)
    raw_l1 = params.get("max_rows_per_unit")
    l_1 = None if raw_l1 is None else integer(raw_l1, "max_rows_per_unit", low=1, high=1000)
    q = dps.SQLQuery(text, _catalog(schema, l_inf, l_0, l_1))  # refusals: text and schema only
    if q.bigquery:
        if "epsilon" in params or "delta" in params:
            raise DataError("a BigQuery DIFFERENTIAL_PRIVACY query gives its budget in OPTIONS.")
        eps: float | None = None
        dlt: float | None = None
    else:
        eps, dlt = privacy(params)
    empty = {c.name: np.zeros(0) for c in schema.columns}
    plan = q.explain({schema.name: _frame(schema, empty)}, epsilon=eps, delta=dlt)

    def compute(t: Table, rng: Any, meter: Meter) -> Answer:
        rel = q.release(
            {schema.name: _frame(schema, t.columns)}, epsilon=eps, delta=dlt,
            accountant=meter, rng=rng, alpha=float(alpha),
        )  # fmt: skip
        frame = rel.frame
        rows = [{k: _json(v) for k, v in rec.items()} for rec in frame.iter_rows(named=True)]
        return Answer(rows, None, tuple(frame.columns))

    return Prepared("sql", plan.epsilon, plan.delta, compute)
