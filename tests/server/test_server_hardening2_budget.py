"""Decimal budgets in the service: the ledger adds what analysts wrote, as the library does.

An analyst with ε = 1.0 gets 20 answers of ε = 0.05 (not 19), a budget of 0.3 pays a query of
0.3, and the dry run's quote is what the ledger charges (0.05, not 0.050000000001), on SQLite and
on a real PostgreSQL, through the ledger and through the running service. The definition is the
library's (``dpkit.accounting._budget``): the same sequences are accepted by an ``Accountant``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dpkit.accounting import Accountant, PureDP, PureDPEvent
from dpkit.errors import BudgetExceededError
from dpkit.server import Ledger


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        led = Ledger(str(tmp_path / "ledger.db"))
    else:
        led = Ledger(request.getfixturevalue("pg_db"))
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_dataset("survey", {"name": "survey"}, 1.0, 1e-6)
    yield led
    led.close()


def _fits(ledger: Ledger, analyst: str, eps: float, n: int) -> int:
    """How many of ``n`` charges of ``eps`` the ledger accepts."""
    for i in range(n):
        try:
            ledger.reserve(analyst, "survey", {"query": "count", "i": i}, eps, 0.0)
        except BudgetExceededError:
            return i
    return n


def _library_fits(budget: float, eps: float, n: int) -> int:
    acct = Accountant(PureDP(epsilon=budget))
    for i in range(n):
        try:
            acct.charge(PureDPEvent(epsilon=eps))
        except BudgetExceededError:
            return i
    return n


@pytest.mark.parametrize("eps, n", [(0.05, 20), (0.1, 10), (0.01, 100)])
def test_an_analyst_with_one_gets_every_decimal_share(ledger: Ledger, eps: float, n: int) -> None:
    ledger.set_budget("a1", "survey", 1.0, 0.0)
    assert _fits(ledger, "a1", eps, n + 1) == n == _library_fits(1.0, eps, n + 1)
    b = ledger.budgets("a1")[0]
    assert b["spent_epsilon"] == 1.0 and b["remaining_epsilon"] == 0.0
    assert ledger.datasets()[0]["spent_epsilon"] == 1.0  # the dataset's total was exactly used
    assert ledger.check_consistency() == []


def test_a_budget_of_0_3_pays_a_query_of_0_3(ledger: Ledger) -> None:
    ledger.set_budget("a1", "survey", 0.3, 3e-7)
    charge = ledger.reserve("a1", "survey", {"query": "mean"}, 0.3, 3e-7)
    assert (charge.epsilon, charge.delta) == (0.3, 3e-7)
    with pytest.raises(BudgetExceededError):
        ledger.reserve("a1", "survey", {"query": "mean"}, 1e-12, 0.0)
    # 0.1 + 0.2 pays 0.3 as well (the floats sum to 0.30000000000000004)
    ledger.add_principal("a2", "bob", "analyst", "sha256:y")
    ledger.set_budget("a2", "survey", 0.3, 0.0)
    ledger.reserve("a2", "survey", {"query": "count"}, 0.1, 0.0)
    ledger.reserve("a2", "survey", {"query": "count"}, 0.2, 0.0)


def test_the_ledger_never_charges_below_the_cost(ledger: Ledger) -> None:
    # a computed cost is rounded up to the ledger's unit, never down
    ledger.set_budget("a1", "survey", 1.0, 0.0)
    charge = ledger.reserve("a1", "survey", {"query": "count"}, 0.7499999999993179, 0.0)
    assert charge.epsilon == 0.75
    charge = ledger.reserve("a1", "survey", {"query": "count"}, 0.1000000000004, 0.0)
    assert charge.epsilon == 0.100000000001
    with pytest.raises(BudgetExceededError):
        ledger.reserve("a1", "survey", {"query": "count"}, 0.15, 0.0)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_service_quotes_what_it_charges_and_answers_twenty_of_0_05(
    make_server: Any, request: pytest.FixtureRequest, backend: str
) -> None:
    ledger = None if backend == "sqlite" else request.getfixturevalue("pg_db")
    srv = make_server(ledger=ledger)
    _, key = srv.analyst("carol", 1.0)
    h = {"Authorization": f"Bearer {key}"}
    body = {"dataset": "survey", "query": "count", "epsilon": 0.05}
    quote = srv.http.post("/v1/query", json={**body, "dry_run": True}, headers=h).json()
    assert quote["epsilon"] == 0.05
    for _ in range(20):
        r = srv.http.post("/v1/query", json=body, headers=h)
        assert r.status_code == 200, r.text
        assert r.json()["epsilon"] == quote["epsilon"]
    r = srv.http.post("/v1/query", json=body, headers=h)
    assert r.status_code == 402 and r.json()["error"]["type"] == "BudgetExceededError"
    me = srv.http.get("/v1/me", headers=h).json()
    assert me["budgets"][0]["spent_epsilon"] == 1.0
    # a quote of an amount with more places than the ledger's unit shows what will be charged
    _, key2 = srv.analyst("dave", 1.0)
    h2 = {"Authorization": f"Bearer {key2}"}
    odd = {**body, "epsilon": 0.1000000000004}
    quote = srv.http.post("/v1/query", json={**odd, "dry_run": True}, headers=h2).json()
    charged = srv.http.post("/v1/query", json=odd, headers=h2).json()
    assert quote["epsilon"] == charged["epsilon"] == 0.100000000001


def test_the_dry_runs_warning_decides_as_the_charge_does(ledger: Ledger) -> None:
    """``refusal`` (the dry run's read) and ``reserve`` (the charge) share ``check_fits``: at
    the exact edge of a budget they agree, and the warning names the resource that runs out."""
    ledger.set_budget("a1", "survey", 0.3, 1e-7)
    assert ledger.refusal("a1", "survey", 0.1, 0.0, None) is None
    ledger.reserve("a1", "survey", {"query": "count"}, 0.1, 0.0)
    assert ledger.refusal("a1", "survey", 0.2, 0.0, None) is None  # 0.1 + 0.2 fits 0.3
    ledger.reserve("a1", "survey", {"query": "count"}, 0.2, 0.0)
    over = ledger.refusal("a1", "survey", 1e-12, 0.0, None)
    assert over is not None and over.short == (("epsilon", 1e-12, 0.0),)
    with pytest.raises(BudgetExceededError, match="epsilon="):
        ledger.reserve("a1", "survey", {"query": "count"}, 1e-12, 0.0)
    ledger.add_principal("a2", "bob", "analyst", "sha256:y")
    ledger.set_budget("a2", "survey", 1.0, 1e-7)
    short = ledger.refusal("a2", "survey", 0.1, 1e-6, None)
    assert short is not None and [r for r, _, _ in short.short] == ["delta"]
    assert "remaining delta 1e-07 < price 1e-06" in short.would()
    ledger.set_budget("a2", "survey", 0.0, 0.0, rho=0.5)  # a budget in ρ refuses δ > 0
    assert "no lossless conversion" in ledger.refusal("a2", "survey", 0.1, 1e-6, None).would()
    assert ledger.refusal("nobody", "survey", 0.1, 0.0, None) is not None
