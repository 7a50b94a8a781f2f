"""One request priced a discrete event with a huge sensitivity by listing every atom.

A mean with ε = 2⁵³ and δ > 0 made the pricing thread ask NumPy for a 50 GiB array: an HTTP 500
and a dropped connection (and, on a machine that overcommits memory, a worker killed by the
kernel). Pricing such a request is now ordinary arithmetic: a dry run answers with its price, a
real run is refused by the budget, and the connection stays open.
"""

from __future__ import annotations

from tests.server.conftest import Server


def test_a_huge_epsilon_with_delta_is_priced_without_a_huge_array(server: Server) -> None:
    _, key = server.analyst("mallory", 1.0, 1e-5)
    h = {"Authorization": f"Bearer {key}"}
    body = {"dataset": "survey", "query": "mean", "column": "age", "epsilon": 2.0**53,
            "delta": 1e-6}  # fmt: skip
    dry = server.http.post("/v1/query", json={**body, "dry_run": True}, headers=h)
    assert dry.status_code == 200, dry.text
    real = server.http.post("/v1/query", json=body, headers=h)
    assert 400 <= real.status_code < 500, real.text
    assert real.json()["error"]["type"] == "BudgetExceededError"
    assert server.http.get("/v1/noop", headers=h).status_code == 200
    me = server.http.get("/v1/me", headers=h).json()
    assert all(b["spent_epsilon"] == 0 for b in me["budgets"]), me
