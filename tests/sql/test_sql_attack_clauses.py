"""Attacks on dpkit.sql: SQL clauses that the compiler would drop silently."""

from __future__ import annotations

import pytest
from _sql_tables import make_catalog, make_tables

import dpkit.sql as dps
from dpkit.errors import QueryRefusedError

CAT = make_catalog()
T = make_tables(400)


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("SELECT COUNT(*) AS n FROM pums TABLESAMPLE (1 PERCENT)", None),
        ("SELECT COUNT(*) AS n FROM pums PREWHERE age > 50", "clickhouse"),
    ],
)
def test_attack_clauses_dropped_silently_are_refused(sql: str, dialect: str | None) -> None:
    """A clause the compiler does not read ran as if absent: TABLESAMPLE released the whole
    table's count, ClickHouse's PREWHERE released an unfiltered count. Broken, fixed: refused
    from the text, before any data are read."""
    with pytest.raises(QueryRefusedError):
        dps.SQLQuery(sql, CAT, dialect=dialect)
