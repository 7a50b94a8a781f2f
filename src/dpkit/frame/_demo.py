"""Demo section: a per-user group-by over a table with many rows per person."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from dpkit.accounting import Accountant

SEED = 2024  # reproducible demo; real releases use rng=None (secure)


def demo() -> None:
    """Print a private per-user group-by: purchases per store, with bounds and error bars."""
    import polars as pl

    import dpkit.frame as dpf
    from dpkit.accounting import Accountant, ApproxDP
    from dpkit.random import seeded

    print("== Tables: a per-user group-by (dpkit.frame) ==")
    g = np.random.default_rng(SEED)
    n = 200_000
    shops = np.array(["bakery", "books", "cafe", "garden", "toys"])
    buys = pl.DataFrame(
        {
            "user": g.integers(0, 20_000, n),
            "shop": shops[np.minimum(g.zipf(1.6, n), 5) - 1],
            "amount": np.round(g.lognormal(3.0, 0.8, n), 2),
        }
    )
    print(f"{n:,} purchases by {buys['user'].n_unique():,} users; one user has many rows.")
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    q = (
        dpf.Query(buys, privacy_unit="user")
        .filter(pl.col("amount") > 0)
        .group_by("shop", max_groups=2, max_rows=3)
        .agg(dpf.count_units(alias="buyers"), dpf.mean("amount", bounds=(0, 100)))
    )
    explained = q.explain(epsilon=0.5, delta=1e-6)
    print(explained)
    cells = explained.accuracy(expected_n=2000)  # a public guess of the buyers per shop
    shown = ", ".join(f"{k} +/- {v:.3g}" for k, v in cells.items())
    print(f"planned before the charge (95%): {shown} (the mean at 2,000 rows per shop)")
    r = q.release(epsilon=0.5, delta=1e-6, accountant=acct, rng=seeded(SEED))
    exact = buys.group_by("shop").agg(pl.col("amount").mean().alias("exact_mean")).sort("shop")
    out = r.frame.join(exact, on="shop").sort("shop")
    with pl.Config(tbl_rows=10, tbl_cols=8, float_precision=2):
        print(
            out.select(
                "shop", "buyers", "mean_amount", "mean_amount_lo", "mean_amount_hi", "exact_mean"
            )
        )
    print(f"spent {acct.spent!r} (keys chosen privately, no list given)")
    _bounds_and_parts(buys, acct)


def _bounds_and_parts(buys: object, acct: Accountant) -> None:
    """Bounds suggested privately, unit totals clamped, and parallel composition."""
    import dpkit.frame as dpf
    from dpkit.accounting import PureDP
    from dpkit.random import seeded

    shops = ["bakery", "books", "cafe", "garden", "toys"]
    q = dpf.Query(buys, privacy_unit="user")
    s = q.suggest_bounds("shop", epsilon=0.1, accountant=acct, rng=seeded(SEED))
    print(f"bounds suggested by private 90% quantiles (epsilon 0.1): {s.bounds}")
    per_row = q.group_by("shop", public_keys=shops, **s.bounds)
    plain = per_row.agg(dpf.sum("amount", bounds=(0, 100))).explain(epsilon=0.1)
    total = per_row.agg(dpf.sum("amount", bounds=(0, 100), unit_total=(0, 150)))
    sens = [
        m.l1 * m.unit for m in (plain.plan.measures[0], total.explain(epsilon=0.1).plan.measures[0])
    ]
    print(f"sum's sensitivity: {sens[0]:g} clamping rows, {sens[1]:g} clamping each user's total")
    parts = acct.parallel(q.partition_by("shop", keys=shops), budget=PureDP(epsilon=0.2))
    for part in parts.values():
        part.agg(dpf.count_units(), max_rows=1).release(epsilon=0.2, rng=seeded(SEED))
    print(f"five shops' user counts over disjoint users at epsilon 0.2 each: spent {acct.spent!r}")
