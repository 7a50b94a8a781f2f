"""Attacks on dpkit.sql: SmartNoise metadata that silently weakens the privacy unit."""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.sql as dps
from dpkit.errors import DataError
from dpkit.random import seeded

HEAD = "PUMS:\n  PUMS:\n    PUMS:\n      max_ids: 1\n"
AGE = "      age: {type: int, lower: 0, upper: 100}\n"


@pytest.mark.parametrize(
    "body",
    [
        # a unit declared, and row privacy too: the weaker (per-row) guarantee was taken
        "      row_privacy: true\n      pid: {type: int, private_id: true}\n" + AGE,
        # no unit declared: every row became its own unit without being asked
        "      pid: {type: int}\n" + AGE,
    ],
)
def test_attack_smartnoise_unit_never_guessed(body: str) -> None:
    """With either file, a person with 40 rows moved COUNT(*) by 40 while the plan claimed
    sensitivity max_ids = 1 (a 40x under-claim). Broken, fixed: such metadata is refused,
    as dpkit's own Table refuses it."""
    import yaml

    from dpkit.sql._smartnoise import smartnoise_catalog

    spec = yaml.safe_load(HEAD + body)
    with pytest.raises(DataError):
        cat = smartnoise_catalog(spec)
        # what the catalog meant before the fix: a count that one person moves by 40
        one = pl.DataFrame({"pid": [1] * 40, "age": [30] * 40})
        q = dps.SQLQuery("SELECT COUNT(*) AS n FROM PUMS", cat)
        r = q.release({"PUMS": one}, epsilon=1.0, rng=seeded(0))
        assert r.frame.height == 1


def test_smartnoise_row_privacy_alone_is_kept() -> None:
    """row_privacy: true without a private_id stays what it says."""
    import yaml

    from dpkit.sql._smartnoise import smartnoise_catalog

    cat = smartnoise_catalog(yaml.safe_load(HEAD + "      row_privacy: true\n" + AGE))
    t = cat.table("PUMS.PUMS")
    assert t.row_privacy and t.privacy_unit is None
