"""No query fails after its charge on public parameters: every request is validated by a dry
release on the public dummy table (noise scale, error bars at the requested alpha, fixed-point
range of the bounds), so one whose answer would overflow is refused first, nothing charged."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import DPKitError
from dpkit.server import ServerConfig
from dpkit.server._service import Curator, QueryFailedError

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning")

COLUMNS = [
    {"name": "user", "type": "id"},
    {"name": "city", "type": "category", "categories": ["a", "b"]},
    {"name": "x", "type": "float", "bounds": [-(2**60), 2**60]},
]
ROWS = "".join(f"u{i % 20},{'ab'[i % 2]},{(i % 10) * 1e17}\n" for i in range(60))


def _service(
    tmp_path: Path, columns: list[dict[str, Any]], rows: str, unit: str, ledger: str | None = None
) -> Any:
    (tmp_path / "imp").mkdir()
    header = ",".join(c["name"] for c in columns)
    (tmp_path / "imp" / "t.csv").write_text(header + "\n" + rows)
    cfg = ServerConfig(
        ledger=ledger or str(tmp_path / "l.db"),
        data_dir=tmp_path / "data",
        import_dir=tmp_path / "imp",
        insecure_seed=7,
    )
    cur = Curator(cfg)
    cur.start()
    spec = {"name": "t", "source": "t.csv", "total_epsilon": 1e5, "total_delta": 0.5,
            "privacy_unit": unit, "columns": columns}  # fmt: skip
    cur.register_dataset(spec)
    a = cur.add_analyst("ann")
    cur.ledger.set_budget(a["id"], "t", 1e5, 0.5)
    return cur, a["id"], cur.authenticate(a["key"])


def _outcome(cur: Any, who: Any, body: dict[str, Any]) -> str:
    try:
        out = cur.query(who, body)
    except QueryFailedError:  # the failure these tests exist to catch
        return "failed after the charge"
    except DPKitError as exc:
        return type(exc).__name__
    assert out["status"] == "released"
    return "released"


@pytest.mark.parametrize("stat", ["sum", "mean", "var", "std"])
def test_group_by_error_bars_at_a_tiny_alpha_never_fail_after_the_charge(
    tmp_path: Path, stat: str
) -> None:
    # With δ > 0 the noise is Gaussian; its interval at alpha = 1e-300 once came from the normal
    # quantile of 1 - 5e-301, which is 1.0 in floating point: infinity, cast to an integer after
    # the charge (OverflowError, HTTP 500, the budget lost). The quantile is now computed from
    # the lower tail (finite), so the query is answered, with one charge; any other failure of
    # the error bars would be refused by the dry release before the charge.
    cur, aid, who = _service(tmp_path, COLUMNS, ROWS, "user")
    agg = {"stat": stat, "column": "x"}
    body = {"dataset": "t", "query": "group_by", "by": ["city"], "epsilon": 1.0, "delta": 1e-6,
            "alpha": 1e-300, "aggregations": [agg], "max_rows": 1, "max_groups": 1}  # fmt: skip
    priced = cur.query(who, {**body, "dry_run": True})  # priced, not answered, not charged
    assert "value" not in priced and cur.ledger.charges(aid) == []
    assert _outcome(cur, who, body) == "released"
    assert len(cur.ledger.charges(aid)) == 1
    assert _outcome(cur, who, {**body, "alpha": 0.05}) == "released"


def test_no_query_fails_after_its_charge_on_extreme_public_parameters(tmp_path: Path) -> None:
    cols = [
        {"name": "c", "type": "category", "categories": ["a", "b"]},
        {"name": "k", "type": "int", "bounds": [0, 5]},
        {"name": "x", "type": "float", "bounds": [-(2**60), 2**60]},
    ]
    rows = "".join(f"{'ab'[i % 2]},{i % 6},{(i % 10) * 1e17}\n" for i in range(60))
    cur, aid, who = _service(tmp_path, cols, rows, "row")
    base = {"dataset": "t"}
    kinds: list[dict[str, Any]] = [
        {"query": "count"},
        {"query": "sum", "column": "x"},
        {"query": "mean", "column": "x"},
        {"query": "var", "column": "x"},
        {"query": "std", "column": "x"},
        {"query": "cov", "columns": ["x", "x"]},
        {"query": "corr", "columns": ["x", "k"]},
        {"query": "histogram", "column": "x"},
        {"query": "group_by", "by": ["k"], "aggregations": [{"stat": "var", "column": "x"}]},
        {"query": "group_by", "by": ["c"], "aggregations": [{"stat": "std", "column": "x"}]},
    ]
    outcomes = {}
    for kind, eps, dlt, alpha in itertools.product(
        kinds, [1e-9, 1e-3, 10.0], [0.0, 1e-6], [1e-300, 1e-17, 0.05]
    ):
        body = {**base, **kind, "epsilon": eps, "delta": dlt, "alpha": alpha}
        outcomes[str(body)] = _outcome(cur, who, body)
    failed = [k for k, v in outcomes.items() if v == "failed after the charge"]
    assert failed == []
    released = sum(v == "released" for v in outcomes.values())
    assert released > 0
    charges = cur.ledger.charges(aid, 10_000)
    assert len(charges) == released and all(c.status == "released" for c in charges)
