"""The service's default query registry: :mod:`dpkit.stats`, then the entries built on
:mod:`dpkit.frame` (group-by), :mod:`dpkit.release` (synthetic data) and :mod:`dpkit.local`
(local-model aggregation) and :mod:`dpkit.sql` (SQL), each one registration call."""

from __future__ import annotations

from dpkit.server._queries import stats_registry
from dpkit.server._queries_group_by import prepare_group_by
from dpkit.server._queries_local import prepare_local_frequencies
from dpkit.server._queries_sql import prepare_sql, warm_sql
from dpkit.server._queries_synthesize import synthesize_entry
from dpkit.server._registry import QueryRegistry

__all__ = ["default_registry"]


def default_registry(*, max_synthetic_rows: int = 10_000) -> QueryRegistry:
    """Every query type the service answers by default.

    Parameters
    ----------
    max_synthetic_rows : int
        Most rows a ``synthesize`` query may ask for (``max_synthetic_rows`` in the
        configuration): the answer is stored in the ledger with its charge.

    Examples
    --------
    >>> from dpkit.server import default_registry
    >>> default_registry().names()[:4]
    ['corr', 'count', 'cov', 'group_by']
    >>> names = default_registry().names()
    >>> "synthesize" in names, "local_frequencies" in names, "sql" in names
    (True, True, True)
    """
    reg = stats_registry()
    reg.register("group_by", prepare_group_by)
    reg.register("synthesize", synthesize_entry(max_synthetic_rows))
    reg.register("local_frequencies", prepare_local_frequencies)
    reg.register("sql", prepare_sql)
    warm_sql()
    return reg
