"""The registry entry ``synthesize``: synthetic rows from :class:`dpkit.release.Synthesizer`.

Wasserman & Zhou (2010) ask for a private *dataset* rather than answers to queries. The request
names the columns (default: every numeric and categorical column of the schema), the number of rows
to return (at most the service's ``max_synthetic_rows``), ε and δ (> 0: the fit is one zCDP
release), the method (``aim``, ``mst`` or ``independent``) and the bins of numeric columns. The
domain of every column comes from the public schema: a numeric column's bounds cut into equal
bins (an ``int`` column gets one cell per integer where it has few), a categorical column's
categories plus ``(other)``, the code cleaning gives a missing or undeclared value. The price is
the synthesizer's event, fixed at construction, i.e. by the request and the schema alone; the
rows are post-processing of the fitted model (Wasserman & Zhou 2010).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dpkit.errors import DataError
from dpkit.server._numbers import integer, privacy
from dpkit.server._registry import Answer, Meter, Prepared, check_keys
from dpkit.server._schema import Column, DatasetSchema, Table

__all__ = ["MAX_COLUMNS", "synthesize_entry"]

MAX_COLUMNS = 32
_ALLOWED = {"columns", "rows", "epsilon", "delta", "method", "bins", "estimator"}
_OTHER = "(other)"


def _columns(params: Mapping[str, Any], schema: DatasetSchema) -> list[Column]:
    names = params.get("columns")
    if names is None:
        cols = [c for c in schema.columns if c.type in ("float", "int", "category")]
    elif isinstance(names, list) and 1 <= len(names) <= MAX_COLUMNS:
        cols = [schema.column(n) for n in names]
        if len({c.name for c in cols}) != len(cols):
            raise DataError("columns must not repeat.")
    else:
        raise DataError(f"columns must be a list of 1 to {MAX_COLUMNS} column names.")
    for c in cols:
        if c.type not in ("float", "int", "category"):
            raise DataError(f"column {c.name} is of type {c.type}; it cannot be synthesized.")
    if not 1 <= len(cols) <= MAX_COLUMNS:
        raise DataError(f"synthesize needs 1 to {MAX_COLUMNS} numeric or categorical columns.")
    return cols


def _domain_column(col: Column, bins: int) -> Any:
    from dpkit.release import Categorical, Numeric

    if col.type == "category":
        assert col.categories is not None
        return Categorical(tuple(range(len(col.categories) + 1)))  # stored codes, (other) last
    assert col.bounds is not None
    lo, hi = col.bounds
    if col.type == "int":  # cleaning clamps, then rounds: the stored integers may reach these
        return Numeric(math.floor(lo), math.ceil(hi), bins=bins, integer=True)
    return Numeric(lo, hi, bins=bins)


def _decode(col: Column, values: Any) -> list[Any]:
    if col.type == "category":
        assert col.categories is not None
        labels = (*col.categories, _OTHER)
        return [labels[int(v)] for v in values]
    if col.type == "int":
        return [int(v) for v in values]
    return [float(v) for v in values]


def synthesize_entry(max_rows: int) -> Callable[[Mapping[str, Any], DatasetSchema], Prepared]:
    """The ``synthesize`` entry, answering at most ``max_rows`` rows (the service's cap).

    Notes
    -----
    Privacy guarantee: the fit is ρ-zCDP for adding or removing one row (the largest ρ that
    converts to the request's (ε, δ), :class:`dpkit.release.Synthesizer`), hence (ε, δ)-DP; the
    rows are sampled from the fitted model (post-processing). Refused on datasets with several
    rows per person.

    Examples
    --------
    >>> from dpkit.server import DatasetSchema
    >>> schema = DatasetSchema.from_dict(
    ...     {"name": "s", "columns": [{"name": "x", "type": "float", "bounds": [0, 1]}]})
    >>> p = synthesize_entry(100)({"rows": 10, "epsilon": 1.0, "delta": 1e-6}, schema)
    >>> p.statistic, p.epsilon, p.delta
    ('synthesize', 1.0, 1e-06)
    """

    def prepare(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
        from dpkit.release import Domain, Synthesizer

        check_keys(params, _ALLOWED)
        if schema.privacy_unit != "row":
            raise DataError(
                f"dataset {schema.name} has several rows per person; the synthesizer protects "
                "one row, so it is refused here."
            )
        eps, dlt = privacy(params)
        if dlt == 0:
            raise DataError("synthesize needs delta > 0 (the fit is accounted in zCDP).")
        rows = integer(
            params.get("rows", 1000), "rows", low=1, high=max_rows, hint=" (the service's cap)"
        )
        bins = integer(params.get("bins", 16), "bins", low=2, high=64)
        method = params.get("method", "aim")
        if method not in ("aim", "mst", "independent"):
            raise DataError("method must be 'aim', 'mst' or 'independent'.")
        # The closed form by default: the joint fit (Private-PGM) is more accurate but takes
        # seconds to minutes, and every request is priced and answered within the service's
        # time limits; a caller asks for it with "estimator": "pgm".
        estimator = params.get("estimator", "closed")
        if estimator not in ("closed", "pgm"):
            raise DataError("estimator must be 'closed' or 'pgm'.")
        cols = _columns(params, schema)
        domain = Domain({c.name: _domain_column(c, bins) for c in cols})
        synth = Synthesizer(domain, epsilon=eps, delta=dlt, method=method, estimator=estimator)

        def compute(t: Table, rng: Any, meter: Meter) -> Answer:
            spark = getattr(t.columns, "frame", None)  # a Spark-backed dataset's columns
            data: Any = (spark([c.name for c in cols]) if callable(spark)
                         else {c.name: np.asarray(t.columns[c.name]) for c in cols})  # fmt: skip
            model = synth.fit(data, accountant=meter, rng=rng)
            out = model.sample(rows, rng=rng, output="dict")  # post-processing of the model
            values = [_decode(c, out[c.name]) for c in cols]
            names = [c.name for c in cols]
            table = [dict(zip(names, r, strict=True)) for r in zip(*values, strict=True)]
            return Answer(table, None, tuple(names))

        # Probed, not dry-released: a fit on the dummy costs seconds, and the answer (rows
        # sampled from the model over the public domain) has no interval and cannot overflow.
        return Prepared("synthesize", eps, dlt, compute, dry=False)

    return prepare
