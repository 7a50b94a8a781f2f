"""Contribution bounds suggested from private quantiles of each unit's contributions.

For those who cannot guess ``max_groups`` and ``max_rows``: each unit contributes one number to
each of two lists (how many groups it has rows in, and its most rows in one group); a private
quantile of each list (the exponential mechanism of :func:`dpkit.stats.quantile`, Smith 2011)
is a bound that about that fraction of the units fit. Adding or removing one unit adds or
removes one number from each list, so the two quantiles, at ε/2 each, are ε-DP together; the
suggestion is paid for (charged once, through :func:`dpkit.accounting._charge.charge_release`,
before any data are read) and may be shown to anyone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit._checks import check_epsilon, check_probability
from dpkit.accounting import PureDPEvent
from dpkit.accounting._charge import SupportsCharge, charge_release
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.frame._engine import polars
from dpkit.frame._table import UNIT_ID, Table, check_unreserved, payer, schema_names
from dpkit.random import RNGLike, as_generator
from dpkit.stats import quantile

__all__ = ["SuggestedBounds", "suggest_bounds"]


@dataclass(frozen=True)
class SuggestedBounds:
    """Contribution bounds from private quantiles of the units' contributions.

    ``max_groups`` and ``max_rows`` are integers; pass them on with
    ``q.group_by(*by, **s.bounds)``. ``quantile`` is the fraction of units meant to fit each
    bound; ``epsilon`` what the suggestion cost.
    """

    max_groups: int
    max_rows: int
    quantile: float
    epsilon: float

    @property
    def bounds(self) -> dict[str, int]:
        """``{"max_groups": ..., "max_rows": ...}``, for ``group_by(**bounds)``."""
        return {"max_groups": self.max_groups, "max_rows": self.max_rows}


def _limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 1_000_000:
        raise PrivacyParameterError("upper must be an int from 2 to 1,000,000 (a public cap).")
    return value


def suggest_bounds(
    table: Table,
    by: tuple[str, ...],
    *,
    epsilon: float,
    upper: int,
    quantile_: float,
    accountant: SupportsCharge | None,
    rng: RNGLike,
) -> SuggestedBounds:
    """See :meth:`dpkit.frame.Query.suggest_bounds`."""
    if table.unit is None:
        raise DataError(
            "each row is its own unit here (privacy_unit=None): it adds one row to one group, "
            "so max_groups = max_rows = 1; nothing to suggest."
        )
    if table.spark:
        raise DataError("suggest_bounds runs on Polars frames.")
    for b in by:
        if not isinstance(b, str):
            raise DataError("suggest_bounds keys must be column names (str).")
    check_unreserved(by, "suggest_bounds")
    names = schema_names(table.data, "suggest_bounds")
    if any(b not in names for b in by):
        raise DataError("suggest_bounds names a key column the table does not have.")
    eps = check_epsilon(epsilon)
    q = check_probability(quantile_, "quantile")
    if not 0.0 < q < 1.0:
        raise PrivacyParameterError("quantile must be in (0, 1), e.g. 0.9.")
    cap = _limit(upper)
    if eps / 2.0 <= 0.0:  # each quantile's half is 0 in floating point: refuse before the charge
        raise PrivacyParameterError("epsilon is too small to be split between two quantiles.")
    who = payer(table, accountant)  # a part of a parallel composition pays from its budget
    # two quantiles under the table's relation (passed to them below): the event declares it
    event = PureDPEvent(epsilon=eps, neighbouring=table.neighbouring)
    charge_release(who, event, "suggest_bounds", rng=rng)  # before reading
    gen = as_generator(rng)
    pl = polars()
    lf = table.data.filter(pl.col(UNIT_ID).is_not_null())
    pairs = lf.group_by([UNIT_ID, *by]).agg(pl.len().alias("__rows"))
    per_unit: Any = (
        pairs.group_by(UNIT_ID)
        .agg(pl.len().alias("__groups"), pl.col("__rows").max().alias("__most"))
        .collect()
    )
    # Each count spread uniformly over [k, k + 1) (a random function of the unit's own number):
    # on integers the quantile would fall in a zero-width atom, which the exponential
    # mechanism's interval weights all but ignore; the bound is then the floor of the output.
    # Sorted first: a group-by returns units in an order that varies from run to run, and the
    # spread below must not depend on it (a seeded call gives the same bounds every time).
    groups = np.sort(np.asarray(per_unit["__groups"].to_numpy(), dtype=np.float64))
    most = np.sort(np.asarray(per_unit["__most"].to_numpy(), dtype=np.float64))
    groups = np.minimum(groups, cap) + gen.random(groups.size)
    most = np.minimum(most, cap) + gen.random(most.size)
    half = eps / 2.0
    kw: dict[str, Any] = {"bounds": (1.0, float(cap) + 1.0), "epsilon": half, "rng": gen}
    kw["neighbouring"] = table.neighbouring
    l0 = quantile(groups, q, **kw).value if by else 1.0
    linf = quantile(most, q, **kw).value
    return SuggestedBounds(
        max_groups=_rounded(l0, cap), max_rows=_rounded(linf, cap), quantile=q, epsilon=eps
    )


def _rounded(value: float, cap: int) -> int:
    return int(min(max(math.floor(float(value)), 1), cap))
