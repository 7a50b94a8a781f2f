"""A PUMS-like catalog and small tables shared by the SQL tests (fixed seeds)."""

from __future__ import annotations

import numpy as np
import polars as pl

import dpkit.sql as dps


def make_catalog() -> dps.Catalog:
    cols = [
        dps.Column("pid", "int"),
        dps.Column("age", "int", bounds=(0, 100)),
        dps.Column("sex", "string", keys=["0", "1"]),
        dps.Column("educ", "string"),
        dps.Column("income", "float", bounds=(0, 100_000), nullable=True),
        dps.Column("married", "boolean"),
        dps.Column("note", "string", nullable=True),
        dps.Column("score", "float"),  # numeric, no bounds: countable, not summable
    ]
    return dps.Catalog(
        [
            dps.Table("pums", cols, privacy_unit="pid", max_groups=2, max_rows=2),
            dps.Table("pums_rows", cols[1:], row_privacy=True),
            dps.Table(
                "visits",
                [dps.Column("pid", "int"), dps.Column("minutes", "float", bounds=(0, 60))],
                privacy_unit="pid",
            ),
            dps.Table(
                "regions",
                [dps.Column("educ", "string"), dps.Column("region", "string")],
                public=True,
            ),
        ]
    )


def make_tables(n: int = 3000, seed: int = 0) -> dict[str, pl.DataFrame]:
    g = np.random.default_rng(seed)
    pums = pl.DataFrame(
        {
            "pid": g.integers(0, n // 2, n),
            "age": g.integers(0, 100, n),
            "sex": g.choice(["0", "1"], n),
            "educ": g.choice([str(i) for i in range(1, 6)], n),
            "income": g.uniform(0, 100_000, n),
            "married": g.integers(0, 2, n).astype(bool),
            "note": g.choice(["a", "b"], n),
            "score": g.normal(0, 1, n),
        }
    )
    visits = pl.DataFrame({"pid": g.integers(0, n // 2, n), "minutes": g.uniform(0, 60, n)})
    regions = pl.DataFrame({"educ": ["1", "2", "3", "4", "5"], "region": ["n", "n", "s", "s", "e"]})
    return {"pums": pums, "pums_rows": pums.drop("pid"), "visits": visits, "regions": regions}
