"""The synthesize registry entry against a real service: synthetic rows on the schema's public
domain, close to the real marginals, the cost charged once, the row cap, free refusals, dry
runs, retries and other analysts' results hidden; and the configuration's cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.client import Curator, RemoteTable
from dpkit.errors import DataError
from dpkit.server import DatasetSchema, default_registry, load_config
from dpkit.server._ingest import read_source
from dpkit.server._schema import dummy_table


@pytest.fixture(scope="module")
def truth(server: Any, survey_spec: dict[str, Any]) -> Any:
    return read_source(
        server.root / "imports" / "survey.csv", DatasetSchema.from_dict(survey_spec)
    ).columns


@pytest.fixture(scope="module")
def key(server: Any) -> str:
    return str(server.analyst("sam", 20.0, 1e-4)[1])


@pytest.fixture(scope="module")
def client(server: Any, key: str) -> Any:
    with Curator(server.url, key) as c:
        yield c


def _spent(c: Curator) -> tuple[float, float]:
    b = c.budget()[0]
    return float(b["spent_epsilon"]), float(b["spent_delta"])


def test_synthetic_rows_follow_the_real_marginals(client: Curator, truth: Any) -> None:
    before = _spent(client)
    t = client.synthesize("survey", rows=2000, epsilon=1.0, delta=1e-6)
    assert isinstance(t, RemoteTable) and len(t) == 2000
    assert t.columns == ("age", "income", "sex") and t.statistic == "synthesize"
    after = _spent(client)
    assert after == pytest.approx((before[0] + 1.0, before[1] + 1e-6))
    frame = t.frame
    assert frame["age"].min() >= 0 and frame["age"].max() <= 100
    assert set(frame["sex"].to_list()) <= {"f", "m", "(other)"}
    # Shares of "f": real about 0.49; the synthetic share differs by the marginal's noise
    # (σ below 30 on a count of 2000 at ρ ≈ 0.024) plus sampling (sd 0.011): 0.1 is > 5 sd.
    real_f = float(np.mean(truth["sex"] == 0))
    assert abs(float((frame["sex"] == "f").mean()) - real_f) < 0.1
    # Mean age: the bins are 6.25 wide and sampling adds sd 0.5; 8 years is far outside both.
    assert abs(float(frame["age"].mean()) - float(truth["age"].mean())) < 8


def test_columns_method_and_bins(client: Curator) -> None:
    t = client.synthesize("survey", ["sex"], rows=5, epsilon=0.5, delta=1e-6,
                          method="independent", bins=4)  # fmt: skip
    assert t.columns == ("sex",) and len(t.rows) == 5


def test_dry_run_retry_and_other_analysts(server: Any, client: Curator) -> None:
    before = _spent(client)
    price = client.query("survey", "synthesize", rows=10, epsilon=0.7, delta=1e-7, dry_run=True)
    assert price["epsilon"] == 0.7 and price["delta"] == 1e-7
    assert _spent(client) == before
    a = client.synthesize("survey", rows=50, epsilon=0.5, delta=1e-7, idempotency_key="syn-1")
    b = client.synthesize("survey", rows=50, epsilon=0.5, delta=1e-7, idempotency_key="syn-1")
    assert a.id == b.id and a.rows == b.rows and b.raw["replayed"]
    assert _spent(client)[0] == pytest.approx(before[0] + 0.5)
    assert client.result(a.id or "").rows == a.rows
    _, other = server.analyst("tess", 1.0)
    r = server.http.get(f"/v1/results/{a.id}", headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 404


BAD: list[tuple[dict[str, Any], str]] = [
    ({"rows": 10_001}, "rows must be"),
    ({"rows": 0}, "rows must be"),
    ({"rows": 1.5}, "rows must be"),
    ({"delta": 0.0}, "delta > 0"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"columns": ["age", "nope"]}, "no column"),
    ({"columns": ["age", "age"]}, "repeat"),
    ({"columns": []}, "columns must be"),
    ({"method": "gan"}, "method"),
    ({"bins": 1}, "bins"),
    ({"bins": 10_000}, "bins"),
    ({"rowz": 5}, "unknown parameter"),
]


@pytest.mark.parametrize(("change", "words"), BAD)
def test_refusals_charge_nothing(
    server: Any, client: Curator, key: str, change: dict[str, Any], words: str
) -> None:
    before = _spent(client)
    body = {"dataset": "survey", "query": "synthesize", "rows": 10, "epsilon": 1.0,
            "delta": 1e-6, **change}  # fmt: skip
    r = server.http.post("/v1/query", json=body, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 400, r.text
    assert words in r.json()["error"]["message"]
    assert _spent(client) == before


def test_the_row_cap_comes_from_the_configuration(tmp_path: Path) -> None:
    cfg = tmp_path / "curator.toml"
    cfg.write_text("[server]\nmax_synthetic_rows = 50\n")
    assert load_config(cfg).max_synthetic_rows == 50
    cfg.write_text('[server]\nmax_synthetic_rows = "many"\n')
    with pytest.raises(DataError, match="max_synthetic_rows"):
        load_config(cfg)
    reg = default_registry(max_synthetic_rows=50)
    schema = DatasetSchema.from_dict(
        {"name": "t", "columns": [{"name": "x", "type": "float", "bounds": [0, 1]}]}
    )
    dummy = dummy_table(schema, 100)
    params = {"rows": 50, "epsilon": 1.0, "delta": 1e-6}
    assert reg.prepare("synthesize", params, schema, dummy).epsilon == 1.0
    with pytest.raises(DataError, match="from 1 to 50"):
        reg.prepare("synthesize", {**params, "rows": 51}, schema, dummy)


def test_only_row_datasets_and_plain_columns_are_synthesized() -> None:
    reg = default_registry()
    users = DatasetSchema.from_dict({
        "name": "u", "privacy_unit": "user",
        "columns": [{"name": "user", "type": "id"},
                    {"name": "x", "type": "float", "bounds": [0, 1]}],
    })  # fmt: skip
    params = {"rows": 5, "epsilon": 1.0, "delta": 1e-6}
    with pytest.raises(DataError, match="several rows per person"):
        reg.prepare("synthesize", params, users, dummy_table(users, 50))
    reports = DatasetSchema.from_dict({
        "name": "r",
        "columns": [{"name": "x", "type": "float", "bounds": [0, 1]},
                    {"name": "page", "type": "local", "protocol": "GRR", "epsilon": 1.0,
                     "categories": ["a", "b"]}],
    })  # fmt: skip
    with pytest.raises(DataError, match="cannot be synthesized"):
        reg.prepare("synthesize", {**params, "columns": ["page"]}, reports, dummy_table(reports))
    out = reg.prepare("synthesize", params, reports, dummy_table(reports, 50))
    assert out.epsilon == 1.0  # by default, the local column is left out


def test_an_underpriced_synthesizer_is_refused_before_any_charge() -> None:
    """Negative control: an entry that prices the fit at half its zCDP event is caught by the
    registry's probe (the meter holding the price refuses the fit's charge) and refused."""
    from dataclasses import replace

    from dpkit.errors import PrivacyParameterError
    from dpkit.server import QueryRegistry
    from dpkit.server._queries_synthesize import synthesize_entry

    honest = synthesize_entry(100)

    def cheap(params: Any, schema: DatasetSchema) -> Any:
        p = honest(params, schema)
        return replace(p, epsilon=p.epsilon / 2)

    reg = QueryRegistry()
    reg.register("cheap", cheap)
    schema = DatasetSchema.from_dict(
        {"name": "t", "columns": [{"name": "x", "type": "float", "bounds": [0, 1]}]}
    )
    with pytest.raises(PrivacyParameterError, match="does not fit the price"):
        reg.prepare("cheap", {"rows": 5, "epsilon": 1.0, "delta": 1e-6}, schema,
                    dummy_table(schema, 50))  # fmt: skip


def test_the_joint_fit_is_asked_for_and_a_bad_estimator_is_refused(
    survey_spec: dict[str, Any],
) -> None:
    reg = default_registry()
    schema = DatasetSchema.from_dict(survey_spec)
    params = {"rows": 5, "epsilon": 1.0, "delta": 1e-6, "columns": ["age", "sex"]}
    with pytest.raises(DataError, match="estimator must be"):
        reg.prepare("synthesize", {**params, "estimator": "best"}, schema, dummy_table(schema))
    closed = reg.prepare("synthesize", params, schema, dummy_table(schema, 50))
    joint = reg.prepare("synthesize", {**params, "estimator": "pgm"}, schema, dummy_table(schema))
    assert closed.epsilon == joint.epsilon == 1.0  # the same price, either way
