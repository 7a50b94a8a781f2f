"""The count threshold (``selection="count"``) at its edges: a wide noise scale (a tiny ε) is
planned at once, and a key that one unit alone holds, with as many rows as its bounds allow,
is released no more often than the threshold's δ (counted over many fixed-seed trials)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.sql as dps
from dpkit.audit import epsilon_lower_bound
from dpkit.frame._finish import finish
from dpkit.frame._pipeline import ALL
from dpkit.frame._selection import _FLOAT_SLACK, count_threshold
from dpkit.mechanisms._tails import discrete_laplace_upper_tail
from dpkit.random import as_generator

TRIALS = 20_000
COUNT = "SELECT g, COUNT(*) AS n FROM t GROUP BY g"


def _catalog(**bounds: int) -> dps.Catalog:
    cols = [dps.Column("pid", "int"), dps.Column("g", "string")]
    return dps.Catalog([dps.Table("t", cols, privacy_unit="pid", **bounds)])


@pytest.mark.parametrize("scale", [Fraction(10**12), Fraction(3 * 10**14), Fraction(1 << 52)])
def test_count_threshold_of_a_wide_noise_is_found_and_bounds_delta(scale: Fraction) -> None:
    # the first guess used ln r, r = e^{-1/b} rounded near 1: at b = 1e12 it was ~1e9 steps
    # off and each step is a float tail, so planning a small-epsilon query did not end
    tau = count_threshold(scale, per_key=3, keys=2, delta=1e-5)
    assert 2 * discrete_laplace_upper_tail(float(scale), tau - 3) <= 1e-5
    # within a relative 1e-12 of the continuous solution b · ln(1 / (δ_k (1 + r))) (+ c),
    # δ_k = δ / k less the float slack
    r = math.exp(-1.0 / float(scale))
    want = float(scale) * -math.log((1e-5 / 2 - _FLOAT_SLACK) * (1 + r)) + 3
    assert abs(tau - want) <= 1e-12 * want + 2


def test_sql_count_with_a_tiny_epsilon_is_planned() -> None:
    d = pl.DataFrame({"pid": [1], "g": ["a"]})
    q = dps.SQLQuery(COUNT, _catalog(max_groups=2, max_rows=3))
    ex = q.explain({"t": d}, epsilon=1e-12, delta=1e-5)
    sel = ex.frame.plan.selection
    assert sel is not None and sel.method == "count"
    (mn,) = ex.frame.plan.measures
    assert sel.threshold == count_threshold(mn.scale, per_key=3, keys=2, delta=1e-5)


@pytest.mark.parametrize(
    ("bounds", "c", "lone"),
    [
        # c = max_rows: the unit puts 3 rows in each of its 2 keys
        ({"max_groups": 2, "max_rows": 3}, 3, 2),
        # c = the L1 row cap (2 < max_rows): its 2 rows in one key, the other a candidate
        # with 0 rows (kept by L0 before the row cap)
        ({"max_groups": 2, "max_rows": 3, "max_rows_per_unit": 2}, 2, 2),
    ],
)
def test_a_key_only_the_added_unit_holds_is_released_at_most_delta_often(
    bounds: dict[str, int], c: int, lone: int
) -> None:
    """Neighbour D' = D + one unit whose rows (beyond its bounds in the raw data) fall in keys
    D lacks: over many trials those keys appear at most δ often (with a large δ, so that the
    count has power), and as often as ``P(c + Z ≥ τ)`` for the released count's own noise."""
    delta = 0.2
    cat = _catalog(**bounds)
    base = pl.DataFrame({"pid": list(range(50)), "g": ["a"] * 50})
    unit = pl.DataFrame({"pid": [999] * 12, "g": ["z", "y"] * 6})
    q = dps.SQLQuery(COUNT, cat)
    plan = q.explain({"t": base}, epsilon=1.0, delta=delta).frame.plan
    sel = plan.selection
    assert sel is not None and sel.method == "count"
    (mn,) = plan.measures
    g1 = q.frame_query({"t": pl.concat([base, unit])})
    keys = list(g1._layout().keys)
    d1 = g1._exact(plan, (11, 12, 13, 14))[0]
    new = d1.filter(pl.col("g") != "a")
    assert new.height == lone and new["__rows"].max() == c  # the bounds as the plan has them
    t = d1.join(pl.DataFrame({"trial": np.arange(TRIALS)}), how="cross")
    f: Any = finish(
        t, None, keys=["trial", *keys], aggs=g1._aggs, plan=plan, gen=as_generator(7),
        alpha=0.05, drop_keys=(ALL,),
    )  # fmt: skip
    seen = f.filter(pl.col("g") != "a")["trial"].n_unique() / TRIALS
    exact = 1.0 - math.prod(
        1.0 - discrete_laplace_upper_tail(float(mn.scale), sel.threshold - int(n))
        for n in new["__rows"]
    )
    sd = math.sqrt(delta * (1 - delta) / TRIALS)
    assert exact <= delta
    assert seen <= delta + 4 * sd  # (4 sd: a false failure about 3e-5 of the time)
    assert abs(seen - exact) <= 4 * sd  # the count thresholded is the released one, c rows


def test_audit_avg_on_a_key_only_the_added_unit_holds() -> None:
    """AVG selects keys by its own noisy count too: D' adds one unit whose 3 rows alone make
    key 'z'; the audit of 'z''s released (count, mean) pair (−1, −1 where not released) over
    fixed-seed trials stays within the claim (ε, δ), with δ large enough to be seen."""
    delta = 0.05
    cat = dps.Catalog([dps.Table(
        "t", [dps.Column("pid", "int"), dps.Column("g", "string"),
              dps.Column("x", "float", bounds=(0, 10))],
        privacy_unit="pid", max_groups=1, max_rows=3,
    )])  # fmt: skip
    sql = "SELECT g, COUNT(*) AS n, AVG(x) AS m FROM t GROUP BY g"
    base = pl.DataFrame({"pid": list(range(40)), "g": ["a"] * 40, "x": [5.0] * 40})
    unit = pl.DataFrame({"pid": [999] * 3, "g": ["z"] * 3, "x": [10.0] * 3})
    q = dps.SQLQuery(sql, cat)
    plan = q.explain({"t": base}, epsilon=1.0, delta=delta).frame.plan
    assert plan.selection is not None and plan.selection.method == "count"
    g0, g1 = q.frame_query({"t": base}), q.frame_query({"t": pl.concat([base, unit])})
    keys = list(g0._layout().keys)
    d0 = g0._exact(plan, (11, 12, 13, 14))[0]
    d1 = g1._exact(plan, (11, 12, 13, 14))[0]

    def mech(d: Any, n: int, rng: Any) -> np.ndarray[Any, Any]:
        t = d.join(pl.DataFrame({"trial": np.arange(n)}), how="cross")
        f = finish(
            t, None, keys=["trial", *keys], aggs=g0._aggs, plan=plan, gen=as_generator(rng),
            alpha=0.05, drop_keys=(ALL,),
        )  # fmt: skip
        out = np.full((n, 2), -1.0)
        z = f.filter(pl.col("g") == "z")
        n_col, m_col = (a.alias for a in g0._aggs)  # the count's and the mean's columns
        out[z["trial"].to_numpy(), 0] = z[n_col].to_numpy()
        out[z["trial"].to_numpy(), 1] = z[m_col].to_numpy()
        return out

    lb = epsilon_lower_bound(mech, d0, d1, trials=TRIALS, delta=delta, rng=9)
    assert float(lb.epsilon) <= 1.0
