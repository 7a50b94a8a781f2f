"""A subnormal ε (5e-324, 1e-320) is a number the parser accepts (finite, > 0); pricing it must
end in a clear refusal (4xx), never a 500.

It gave a 500 in two places: the group_by's Laplace scale (sensitivity / ε, beyond any float)
was refused with a message that formatted the scale as a float, which overflowed; and the
synthesizer's share of ρ underflowed to 0 and was divided by.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import Server

BODIES: list[dict[str, Any]] = [
    {"query": "group_by", "by": ["sex"]},
    {"query": "group_by", "by": ["sex"], "delta": 1e-6},
    {"query": "group_by", "by": ["sex"], "aggregations": [{"stat": "mean", "column": "age"}]},
    {"query": "group_by", "by": ["sex"],
     "aggregations": [{"stat": "quantiles", "column": "age", "q": [0.5]}]},
    {"query": "synthesize", "columns": ["age"], "delta": 1e-6, "rows": 5},
    {"query": "synthesize", "columns": ["age", "sex"], "delta": 1e-6, "rows": 5},
]  # fmt: skip


@pytest.fixture(scope="module")
def key(server: Server) -> str:
    return server.analyst("tiny", 1.0, 1e-5)[1]


@pytest.mark.parametrize("epsilon", [5e-324, 1e-320])
@pytest.mark.parametrize("body", BODIES, ids=lambda b: "-".join(map(str, b.values()))[:40])
def test_a_subnormal_epsilon_is_refused_not_an_internal_error(
    server: Server, key: str, body: dict[str, Any], epsilon: float
) -> None:
    req = {"dataset": "survey", "epsilon": epsilon, "dry_run": True, **body}
    r = server.http.post("/v1/query", json=req, headers={"Authorization": f"Bearer {key}"})
    assert 400 <= r.status_code < 500, r.text
    assert r.json()["error"]["type"] == "PrivacyParameterError", r.text
