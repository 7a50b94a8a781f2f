"""Differentially private SQL: SQL text compiled to :mod:`dpkit.frame` plans.

A :class:`Catalog` of public metadata declares each table's privacy unit (or row privacy), its
contribution bounds (groups per unit, rows per unit and group, rows per unit) and its columns'
types, bounds, nullability and public key sets (from Python, TOML, or SmartNoise SQL's YAML).
:class:`SQLQuery` parses one SELECT with sqlglot, refuses from the text and the metadata alone
what cannot be made private (subqueries, windows, UNION, joins of private tables except on the
unit, GROUP BY the unit, MIN/MAX, unbounded sums, ...), and compiles the rest to a frame plan,
so every guarantee of the table layer applies; expressions of released aggregates, HAVING,
ORDER BY and LIMIT are post-processing of the released table. BigQuery's
``SELECT WITH DIFFERENTIAL_PRIVACY`` is read with BigQuery's semantics. See ``docs/sql.md``.

Examples
--------
>>> import polars as pl, dpkit.sql as dps
>>> cat = dps.Catalog([dps.Table("visits", privacy_unit="user", max_groups=1, max_rows=2,
...     columns=[dps.Column("user", "int"), dps.Column("site", "string", keys=["n", "s"]),
...              dps.Column("minutes", "float", bounds=(0, 60))])])
>>> df = pl.DataFrame({"user": [1, 1, 2], "site": ["n", "n", "s"], "minutes": [5.0, 7, 30]})
>>> out = dps.query("SELECT site, COUNT(*) AS visits FROM visits GROUP BY site",
...                 {"visits": df}, catalog=cat, epsilon=1.0, rng=1)
>>> out["site"].to_list()
['n', 's']
"""

from __future__ import annotations

from dpkit.sql._catalog import Catalog, Column, Table, load_catalog
from dpkit.sql._query import SQLExplanation, SQLQuery, SQLRelease, query
from dpkit.sql._smartnoise import read_smartnoise_yaml

__all__ = [
    "Catalog",
    "Column",
    "SQLExplanation",
    "SQLQuery",
    "SQLRelease",
    "Table",
    "load_catalog",
    "query",
    "read_smartnoise_yaml",
]
