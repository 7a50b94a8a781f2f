"""The registry entry ``local_frequencies``: frequency estimates from local-model reports.

In the local model (Kamath 2020, "Local vs central"; ``docs/local.md``) each person randomizes
their own value on their own device, ε-LDP, and only the report leaves it. A dataset may hold
such reports in a column of type ``local``, declared by the admin with the protocol (``GRR``:
generalized randomized response; ``HR``: Hadamard response), the ε each report was made with,
and the categories the true values are coded by. Estimating the frequency of every category is
then *post-processing* of reports that are already private: it costs no central budget. The
entry is free (price (0, 0)), still recorded in the ledger, so its answer is stored, audited and
fetched again like any other.

What the answer reveals beyond the estimates: the number ``n`` of valid reports, exactly (the
local model protects values, not participation). The answer says so, and so does
``docs/server.md``. Missing or malformed reports (stored as ``-1``) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpkit.errors import DataError
from dpkit.server._numbers import real
from dpkit.server._registry import Answer, Meter, Prepared, check_keys
from dpkit.server._schema import MISSING, DatasetSchema, Table

__all__ = ["prepare_local_frequencies"]

_ALLOWED = {"column", "alpha"}


def prepare_local_frequencies(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
    """Validate a ``local_frequencies`` request: a ``local`` column, and ``alpha``.

    Notes
    -----
    Privacy guarantee: none is spent centrally. Each report is ε-LDP for its user's value (the
    column's declared protocol and ε, :mod:`dpkit.local`), and the estimate is a function of the
    reports only (post-processing). The number of valid reports is released exactly.

    Examples
    --------
    >>> from dpkit.server import DatasetSchema
    >>> schema = DatasetSchema.from_dict({"name": "t", "columns": [
    ...     {"name": "page", "type": "local", "protocol": "GRR", "epsilon": 1.0,
    ...      "categories": ["a", "b", "c"]}]})
    >>> p = prepare_local_frequencies({"column": "page"}, schema)
    >>> p.free, p.epsilon
    (True, 0.0)
    """
    if "epsilon" in params or "delta" in params:
        raise DataError(
            "local_frequencies costs no budget (post-processing of reports randomized on "
            "users' devices); leave epsilon and delta out."
        )
    check_keys(params, _ALLOWED)
    col = schema.column(params.get("column"))
    if col.type != "local":
        raise DataError(
            f"column {col.name} is of type {col.type}; this query needs a local column."
        )
    alpha = real(
        params.get("alpha", 0.05), "alpha", low=0, high=1, low_open=True, high_open=True,
        hint=", e.g. 0.05 for 95% intervals",
    )  # fmt: skip
    oracle = col.oracle()
    assert col.categories is not None
    labels = tuple(col.categories)

    def compute(t: Table, rng: Any, meter: Meter) -> Answer:
        del rng, meter  # no noise is drawn and nothing is charged: the reports are private
        reports = t.columns[col.name]
        valid = reports[reports != MISSING]
        if valid.size == 0:
            # No report, no estimate: every count is unknown (the local model does not hide n).
            none = [None] * len(labels)
            return Answer({"counts": none, "n": 0, **_meta(col)}, (none, none), labels)
        est = oracle.estimate(oracle.reports(valid))
        lo, hi = est.interval(float(alpha))
        value = {"counts": _floats(est.counts), "n": int(valid.size), **_meta(col)}
        return Answer(value, (_floats(lo), _floats(hi)), labels)

    return Prepared("local_frequencies", 0.0, 0.0, compute, free=True)


def _meta(col: Any) -> dict[str, Any]:
    return {
        "protocol": col.protocol,
        "local_epsilon": col.epsilon,
        "central_cost": "none: post-processing of ε-LDP reports; n is revealed exactly",
    }


def _floats(a: Any) -> list[float]:
    return [float(v) for v in np.asarray(a, dtype=np.float64)]
