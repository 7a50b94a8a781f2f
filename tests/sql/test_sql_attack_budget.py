"""Attacks on dpkit.sql: the budget charged against the one given, failures around the charge."""

from __future__ import annotations

import pytest
from _sql_tables import make_catalog, make_tables

import dpkit.sql as dps
from dpkit.accounting import Accountant, ApproxDP
from dpkit.random import seeded

CAT = make_catalog()
T = make_tables(400)


def test_attack_huge_epsilon_gives_a_release_not_a_crash() -> None:
    """Budget: ε = 10⁴ is a valid (if foolish) parameter; the noise choice divided by a
    scale that underflows to 0 and raised ZeroDivisionError. Broken, fixed: the frame's
    default noise is used, and the whole (ε, δ) is charged once."""
    acct = Accountant(ApproxDP(epsilon=1e5, delta=1e-3))
    out = dps.query(
        "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex",
        T,
        catalog=CAT,
        epsilon=1e4,
        delta=1e-6,
        accountant=acct,
        rng=seeded(2),
    )
    assert out.height == 2
    assert acct.spent.epsilon <= 1e4 * (1 + 1e-9)


def test_attack_huge_epsilon_private_key_selection() -> None:
    """Laplace key selection took log(0) when exp(-epsilon/sensitivity) underflowed (a
    bare ValueError at epsilon = 1e4). Broken, fixed in dpkit.frame: the threshold is 2."""
    sql = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=10000, delta=1e-5, "
        "privacy_unit_column=pid) sex, COUNT(*) AS n FROM pums GROUP BY sex"
    )
    out = dps.query(sql, T, catalog=CAT, rng=seeded(2))
    assert out.height == 2


@pytest.mark.parametrize(
    "options",
    [
        "epsilon=1, epsilon=100, delta=1e-5, privacy_unit_column=pid",
        "epsilon=1, delta=1e-5, max_groups_contributed=TRUE, privacy_unit_column=pid",
        "epsilon=1, delta=1e-5, max_groups_contributed=1e400, privacy_unit_column=pid",
        "epsilon=1, delta=1e-5, max_groups_contributed='2', privacy_unit_column=pid",
    ],
)
def test_attack_bigquery_options_read_one_way(options: str) -> None:
    """OPTIONS(epsilon=1, epsilon=100): the reader sees ε = 1, the charge was 100 (the last
    one won). max_groups_contributed=TRUE or 1e400 raised ValueError or OverflowError, and a
    quoted '2' was taken as a number. Broken, fixed: refused from the text, nothing charged."""
    from dpkit.errors import QueryRefusedError

    sql = (
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS({options}) sex, COUNT(*) AS n FROM pums "
        "GROUP BY sex"
    )
    with pytest.raises(QueryRefusedError):
        dps.SQLQuery(sql, CAT)
