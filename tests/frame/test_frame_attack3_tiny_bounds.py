"""Bounds so close together that the centred transform's scale ``2 / (hi - lo)`` overflows.

``mean("x", bounds=(5e-324, 1e-320))`` passed every check, then each row's centred value
became ±inf or NaN: the integer cast failed (Polars' InvalidOperationError, Spark's ANSI
ARITHMETIC_OVERFLOW) exactly when the table had a row, and an empty table was answered, so
the refusal (before any charge) told whether anyone's row was there. Such bounds are now
refused from the parameters alone, whatever the data (a quantile tree too: leaves / (hi - lo)).
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, PureDP
from dpkit.errors import DataError


def _quantile(column: str, *, bounds: tuple[float, float]) -> object:
    return dpf.quantiles(column, [0.5], bounds=bounds)


@pytest.mark.parametrize("make", [dpf.mean, dpf.var, dpf.std, dpf.sum, _quantile])
def test_bounds_whose_scale_overflows_are_refused_whatever_the_data(make: object) -> None:
    for rows in ([], [0.0, 5e-306]):
        df = pl.DataFrame(
            {"u": list(range(len(rows))), "x": rows}, schema={"u": pl.Int64, "x": pl.Float64}
        )
        acct = Accountant(PureDP(epsilon=5.0))
        with pytest.raises(DataError, match="too close"):
            q = dpf.Query(df, privacy_unit="u").agg(make("x", bounds=(0.0, 1e-305)), max_rows=1)  # type: ignore[operator]
            q.release(epsilon=1.0, accountant=acct, rng=0)
        assert len(acct.ledger) == 0


def test_tiny_but_representable_bounds_still_work() -> None:
    df = pl.DataFrame({"u": [1, 2, 3], "x": [1.0, 5e-324, 0.0]})
    q = dpf.Query(df, privacy_unit="u").agg(dpf.mean("x", bounds=(-1e-200, 1e-200)), max_rows=1)
    q.release(epsilon=1.0, accountant=Accountant(PureDP(epsilon=5.0)), rng=0)
