"""Private queries over tables: privacy units, contribution bounding and grouped releases.

Real sensitive tables have many rows per person; ``dpkit.frame`` protects *units* (a user id
column, or each row), not rows. A :class:`Query` declares the privacy unit and the neighbouring
relation, applies row-wise filters, derived columns and joins with public tables, then groups by
keys with public contribution bounds (rows per (unit, key) L∞, keys per unit L0, optionally rows
per unit L1; values clamped to the bounds given with each aggregation) and releases per-key
counts, distinct units, sums, means, variances, quantiles and histograms with exact noise from
:mod:`dpkit.noise`, over public keys or privately selected ones. Polars is the default engine;
a PySpark DataFrame runs the same query on Spark. See ``docs/frame.md``.

Examples
--------
>>> import polars as pl, dpkit.frame as dpf
>>> df = pl.DataFrame({"user": [1, 1, 2], "day": ["mon", "tue", "mon"], "x": [1.0, 2.0, 3.0]})
>>> q = dpf.Query(df, privacy_unit="user").group_by("day", public_keys=["mon", "tue"],
...                                                  max_groups=2, max_rows=1)
>>> print(q.agg(dpf.count()).explain(epsilon=1.0).plan.measures[0].l1)
2
"""

from __future__ import annotations

from dpkit.frame._aggs import (
    Aggregation,
    count,
    count_units,
    histogram,
    mean,
    quantiles,
    std,
    sum,
    var,
)
from dpkit.frame._explain import Explanation, FrameRelease
from dpkit.frame._grouped import GroupBy, GroupedQuery
from dpkit.frame._parts import Partitions
from dpkit.frame._query import Query
from dpkit.frame._selection import truncated_geometric_probabilities
from dpkit.frame._suggest import SuggestedBounds

__all__ = [
    "Aggregation",
    "Explanation",
    "FrameRelease",
    "GroupBy",
    "GroupedQuery",
    "Partitions",
    "Query",
    "SuggestedBounds",
    "count",
    "count_units",
    "histogram",
    "mean",
    "quantiles",
    "std",
    "sum",
    "truncated_geometric_probabilities",
    "var",
]
