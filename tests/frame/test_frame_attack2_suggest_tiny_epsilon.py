"""``suggest_bounds`` at the smallest positive ε charged, then refused.

ε = 5e-324 passed the ε check, was charged, and then each quantile's ε/2, which is 0 in
floating point, was refused by the quantile: a charge for nothing, against "validate before
charge". The half is now checked before the charge.
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit as dp
import dpkit.frame as dpf
from dpkit.errors import PrivacyParameterError


def test_an_epsilon_whose_half_is_zero_is_refused_before_the_charge() -> None:
    df = pl.DataFrame({"u": [1, 2], "k": ["a", "b"]})
    acct = dp.Accountant(dp.PureDP(epsilon=1.0))
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        dpf.Query(df, privacy_unit="u").suggest_bounds(
            "k", epsilon=5e-324, accountant=acct, rng=dp.random.seeded(1)
        )
    assert not acct.ledger
