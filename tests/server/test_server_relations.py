"""The service's ledger keeps each dataset's charges to one neighbouring relation.

The library's accountants refuse to compose guarantees under add/remove of one unit with
guarantees under replacement of one unit; the ledger summed any (ε, δ) it was given, so a
replace-one charge and the service's add/remove charges made a total on one dataset (and one
analyst's budget) that holds under neither. It now records the relation of a dataset's charges
(persisted across restarts) and refuses the other one before charging, like an Accountant.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dpkit.accounting import Neighbouring
from dpkit.errors import PrivacyParameterError
from dpkit.server import Ledger

ADD, REP = Neighbouring.ADD_REMOVE, Neighbouring.REPLACE


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        led = Ledger(str(tmp_path / "ledger.db"))
    else:
        led = Ledger(request.getfixturevalue("pg_db"))
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_principal("a2", "bob", "analyst", "sha256:y")
    for name in ("survey", "other"):
        led.add_dataset(name, {"name": name}, 10.0, 1e-6)
        for who in ("a1", "a2"):
            led.set_budget(who, name, 5.0, 1e-7)
    yield led
    led.close()


def _spent(led: Ledger, who: str, name: str) -> float:
    return next(b["spent_epsilon"] for b in led.budgets(who) if b["dataset"] == name)  # type: ignore[no-any-return]


def test_a_replace_one_charge_after_add_remove_ones_is_refused_before_charging(
    ledger: Ledger,
) -> None:
    ledger.reserve("a1", "survey", {"query": "count"}, 0.5, 0.0)  # the service's: add/remove
    secret = "the-analyst's-label-7f3a"
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations") as e:
        ledger.reserve("a1", "survey", {"query": secret}, 0.5, 0.0, neighbouring=REP)
    assert secret not in str(e.value)
    # and for another analyst on the same dataset: its total composes their charges
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        ledger.reserve("a2", "survey", {"query": "mean"}, 0.5, 0.0, neighbouring=REP)
    assert _spent(ledger, "a1", "survey") == 0.5 and _spent(ledger, "a2", "survey") == 0.0
    assert [c.epsilon for c in ledger.charges("a1")] == [0.5]
    # a charge holding under either relation, the same relation, or another dataset are fine
    ledger.reserve("a1", "survey", {"query": "any"}, 0.5, 0.0, neighbouring=None)
    ledger.reserve("a2", "survey", {"query": "sum"}, 0.5, 0.0, neighbouring=ADD)
    ledger.reserve("a1", "other", {"query": "sum"}, 0.5, 0.0, neighbouring=REP)
    with pytest.raises(PrivacyParameterError):
        ledger.reserve("a1", "other", {"query": "count"}, 0.5, 0.0)


def test_the_relation_is_kept_across_restarts_and_in_one_batch(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.db")
    led = Ledger(path)
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_dataset("survey", {"name": "survey"}, 10.0, 1e-6)
    led.set_budget("a1", "survey", 5.0, 1e-7)
    led.reserve("a1", "survey", {"query": "count"}, 0.5, 0.0, neighbouring=REP)
    led.close()
    again = Ledger(path)
    assert again.migrate() >= 3
    with pytest.raises(PrivacyParameterError):
        again.reserve("a1", "survey", {"query": "mean"}, 0.5, 0.0)
    # two asks of one batch: the second is decided after the first, as if alone
    from dpkit.server._charges import ask

    with again._tx() as conn:
        out = again._reserve_many(
            conn,
            [
                ask("a1", "survey", {"query": "x"}, 0.5, 0.0, None, None, neighbouring=REP),
                ask("a1", "survey", {"query": "y"}, 0.5, 0.0, None, None, neighbouring=ADD),
            ],
        )
    assert not isinstance(out[0], Exception) and isinstance(out[1], PrivacyParameterError)
    assert _spent(again, "a1", "survey") == 1.0
    again.close()
    rows = sqlite3.connect(path).execute("SELECT * FROM dataset_relations").fetchall()
    assert rows == [("survey", "replace")]


def test_an_old_ledger_gains_the_relation_table_and_treats_past_charges_as_add_remove(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "ledger.db")
    led = Ledger(path)
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_dataset("survey", {"name": "survey"}, 10.0, 1e-6)
    led.set_budget("a1", "survey", 5.0, 1e-7)
    led.reserve("a1", "survey", {"query": "count"}, 0.5, 0.0)
    led.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE dataset_relations")  # as a ledger written before the table existed
    db.commit()
    db.close()
    again = Ledger(path)
    again.migrate()
    again.reserve("a1", "survey", {"query": "mean"}, 0.5, 0.0)  # the service's relation
    with pytest.raises(PrivacyParameterError):
        again.reserve("a1", "survey", {"query": "sum"}, 0.5, 0.0, neighbouring=REP)
    again.close()


def test_an_old_ledger_refuses_a_replace_one_charge_first_after_the_upgrade(
    tmp_path: Path,
) -> None:
    # A ledger written before the table existed has add/remove charges and no relation row:
    # the first charge after the upgrade must not set the dataset's relation to replacement.
    path = str(tmp_path / "ledger.db")
    led = Ledger(path)
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    for name in ("survey", "fresh"):
        led.add_dataset(name, {"name": name}, 10.0, 1e-6)
        led.set_budget("a1", name, 5.0, 1e-7)
    led.reserve("a1", "survey", {"query": "count"}, 0.5, 0.0)
    led.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE dataset_relations")  # as a ledger written before the table existed
    db.commit()
    db.close()
    again = Ledger(path)
    again.migrate()
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        again.reserve("a1", "survey", {"query": "sum"}, 0.5, 0.0, neighbouring=REP)
    assert _spent(again, "a1", "survey") == 0.5
    # a dataset never charged has no relation yet; a later restart changes nothing
    again.reserve("a1", "fresh", {"query": "sum"}, 0.5, 0.0, neighbouring=REP)
    again.close()
    third = Ledger(path)
    third.migrate()
    third.reserve("a1", "fresh", {"query": "sum"}, 0.5, 0.0, neighbouring=REP)
    third.close()


def test_a_query_meter_refuses_a_replace_one_release_the_ledger_charged_as_add_remove() -> None:
    # Ledger.reserve charges every query under add/remove; a registered entry whose statistic
    # declared replacement was metered anyway, and its (ε, δ) summed with the dataset's
    # add/remove charges. The meter now refuses it before anything is released.
    import numpy as np

    import dpkit as dp
    import dpkit.stats as st
    from dpkit.server._registry import Meter

    meter = Meter(1.0, 0.0)
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        st.sum(np.ones(10), bounds=(0.0, 1.0), epsilon=1.0, accountant=meter,
               rng=dp.random.seeded(1), neighbouring=REP)  # fmt: skip
    assert not meter.charged and meter.ledger == ()
    st.sum(np.ones(10), bounds=(0.0, 1.0), epsilon=1.0, accountant=meter, rng=dp.random.seeded(2))
    assert meter.charged
