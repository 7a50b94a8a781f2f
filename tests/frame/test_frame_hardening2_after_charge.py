"""Nothing fails after a frame release is charged: a tiny alpha or a tiny ε used to raise
(``ceil(inf)`` in the Gaussian tail quantile below alpha ≈ 1e-16; an overflow warning in the
mean's division, an error under ``-W error``) with the budget already spent."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.accounting import Accountant, ApproxDP
from dpkit.mechanisms._tails import discrete_gaussian_quantile
from dpkit.random import seeded


def _table() -> pl.DataFrame:
    g = np.random.default_rng(3)
    return pl.DataFrame({"user": np.arange(200), "k": g.integers(0, 3, 200), "x": g.random(200)})


@pytest.mark.parametrize("sigma", [0.5, 3.0, 2000.0, 1e6])
def test_gaussian_tail_quantile_is_finite_for_tiny_alpha(sigma: float) -> None:
    m = discrete_gaussian_quantile(sigma, 1e-300)
    # P(|Z| > m) <= 1e-300 needs m of about sigma * 37.1 (the normal tail at 1e-300)
    assert math.isfinite(m) and 35.0 * sigma <= m <= 38.0 * sigma + 2


@pytest.mark.parametrize(("alpha", "epsilon"), [(1e-300, 1.0), (1e-300, 1e-3), (1e-17, 1e-3)])
def test_a_charged_release_always_completes(alpha: float, epsilon: float) -> None:
    acct = Accountant(ApproxDP(epsilon=2.0, delta=1e-5))
    aggs = (dpf.count(), dpf.mean("x", bounds=(0, 1)), dpf.std("x", bounds=(-(2.0**60), 2.0**60)))
    q = dpf.Query(_table(), privacy_unit="user").group_by(
        "k", public_keys=[0, 1, 2], max_groups=1, max_rows=1
    )
    r = q.agg(*aggs).release(
        epsilon=epsilon, delta=1e-6, accountant=acct, alpha=alpha, rng=seeded(1)
    )
    assert r.frame.height == 3 and len(acct.ledger) == 1
    lo, hi = r.frame["count_lo"].to_numpy(), r.frame["count_hi"].to_numpy()
    assert np.all(lo <= r.frame["count"].to_numpy()) and np.all(hi >= r.frame["count"].to_numpy())
