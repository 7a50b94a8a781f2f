"""An empirical audit (dpkit.audit) of a grouped SQL query, compiled and bounded by dpkit.sql.

As in the frame audits: the exact bounded totals of both neighbouring tables come from the SQL
query's own frame plan (one fixed hash key: the guarantee holds for every key), then the real
release code (:func:`dpkit.frame._finish.finish`) noises many stacked copies, one per trial.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

import dpkit.sql as dps
from dpkit.audit import epsilon_lower_bound
from dpkit.frame._finish import finish, public_totals
from dpkit.frame._pipeline import ALL
from dpkit.random import as_generator

TRIALS = 10_000
EPS = 1.0

CATALOG = dps.Catalog(
    [
        dps.Table(
            "t",
            [dps.Column("pid", "int"), dps.Column("g", "string", keys=["a", "b"]),
             dps.Column("x", "float", bounds=(0, 10))],
            privacy_unit="pid",
            max_groups=1,
            max_rows=3,
        )
    ]
)  # fmt: skip
SQL = "SELECT g, COUNT(*) AS n FROM t WHERE x >= 0 GROUP BY g"
BASE = pl.DataFrame({"pid": range(20), "g": ["a", "b"] * 10, "x": [1.0] * 20})
# the extra unit has 100 rows in group 'a' (and a value far outside the bounds)
EXTRA = pl.DataFrame({"pid": [99] * 100, "g": ["a"] * 100, "x": [1e9] * 100})


def test_audit_grouped_sql_count_is_within_its_claim() -> None:
    q = dps.SQLQuery(SQL, CATALOG)
    g0 = q.frame_query({"t": BASE})
    g1 = q.frame_query({"t": pl.concat([BASE, EXTRA])})
    plan = g0.explain(epsilon=EPS).plan

    def exact(g: Any) -> Any:
        totals, buckets = g._exact(plan, (11, 12, 13, 14))
        return public_totals(totals, buckets, g._public, list(g._layout().keys))

    d0, d1 = exact(g0), exact(g1)
    keys = list(g0._layout().keys)

    def mech(d: tuple[Any, Any], n: int, rng: Any) -> np.ndarray[Any, Any]:
        trials = pl.DataFrame({"trial": np.arange(n)})
        t = d[0].join(trials, how="cross")
        f = finish(
            t, None, keys=["trial", *keys], aggs=g0._aggs, plan=plan, gen=as_generator(rng),
            alpha=0.05, drop_keys=(ALL,),
        )  # fmt: skip
        f = f.filter(pl.col("g") == "a").sort("trial")
        return np.asarray(f["sqlagg1"].to_numpy(), dtype=float)

    eps_lb = float(epsilon_lower_bound(mech, d0, d1, trials=TRIALS, rng=3).epsilon)
    # the extra unit moves the count of 'a' by max_rows = 3 (sensitivity 3, noise scale 3/ε):
    # a correct mechanism gives a lower bound below ε; the audit has power (well above 0)
    assert 0.3 < eps_lb <= EPS
