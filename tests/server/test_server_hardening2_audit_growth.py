"""The request audit log stays bounded: requests without a valid key are sampled (a few rows per
minute) and all counted, and request rows older than the retention period are deleted, while
charges and their audit rows are kept forever. Both ledgers behave the same."""

from __future__ import annotations

import gc
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpkit.server import Ledger, ServerConfig, create_app
from dpkit.server._auth import new_key

with warnings.catch_warnings():  # this starlette asks for the httpx2 package; httpx still works
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = [
    pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning"),
]

DAY = 86400.0


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    url = request.getfixturevalue("pg_db") if request.param == "postgres" else None
    yield url or str(tmp_path / "l.db")
    gc.collect()  # a connection left open fails this test (ResourceWarning), not a later one


SURVEY = {"name": "survey", "source": "t.csv", "total_epsilon": 10.0,
          "columns": [{"name": "x", "type": "float", "bounds": [0, 10]}]}  # fmt: skip


def _app(tmp_path: Path, url: str, **kw: Any) -> tuple[Any, str]:
    (tmp_path / "imp").mkdir(exist_ok=True)
    (tmp_path / "imp" / "t.csv").write_text("x\n" + "\n".join(str(i % 10) for i in range(50)))
    _, admin_key, h = new_key("admin")
    cfg = ServerConfig(ledger=url, data_dir=tmp_path / "data", import_dir=tmp_path / "imp",
                       admin_key_hash=h, datasets=(SURVEY,), **kw)  # fmt: skip
    return create_app(cfg), admin_key


def test_requests_without_a_key_are_sampled_and_counted(tmp_path: Path, ledger_url: str) -> None:
    app, admin_key = _app(tmp_path, ledger_url)  # the default: 60 rows a minute
    n = 300
    admin = {"Authorization": f"Bearer {admin_key}"}
    with TestClient(app) as client:
        assert client.get("/v1/noop", headers=admin).status_code == 200
        for i in range(n):
            headers = {"X-API-Key": f"guess-{i}"} if i % 2 else {}
            assert client.get("/v1/noop", headers=headers).status_code == 401
        rows = client.get("/v1/admin/audit?limit=10000", headers=admin).json()["audit"]
        anonymous = [r for r in rows if r["kind"] == "request" and r["principal"] is None]
        # 60 rows per minute: the 300 requests span at most two minutes here (a few seconds)
        assert 1 <= len(anonymous) <= 120, f"{len(anonymous)} rows for {n} requests without a key"
        counts = client.get("/v1/admin/audit/anonymous", headers=admin).json()["counts"]
    assert sum(c["count"] for c in counts if c["status"] == 401) == n
    assert all(c["minute"] % 60 == 0 for c in counts)
    # requests with a valid key are all written
    assert any(r["principal"] == "admin" for r in rows)


def test_old_request_rows_are_deleted_and_charges_kept(tmp_path: Path, ledger_url: str) -> None:
    app, _ = _app(tmp_path, ledger_url)
    with TestClient(app):  # a service that registered its dataset, then stopped
        pass
    led = Ledger(ledger_url)
    now = time.time()
    led.add_principal("a1", "ada", "analyst", "sha256:x")
    led.set_budget("a1", "survey", 5.0, 0.0)
    with led._tx() as conn:  # this test's rows only
        conn.execute("DELETE FROM audit")
    charge = led.reserve("a1", "survey", {"query": "count"}, 0.5, 0.0)
    led.release(charge.id, {"value": 1.0})
    old, recent = now - 40 * DAY, now - 10 * DAY
    led.write_audit([(old, "a1", "GET", "/v1/me", None, None, 200, None)] * 3
                    + [(recent, "a1", "GET", "/v1/me", None, None, 200, None)] * 2)  # fmt: skip
    with led._tx() as conn:  # the charge's own audit row, made long ago
        conn.execute(led._sql("UPDATE audit SET ts = ? WHERE kind = 'charge'"), (old,))
        conn.execute(led._sql("UPDATE charges SET created = ?"), (old,))
    led.close()
    app, admin_key = _app(tmp_path, ledger_url, audit_retention_days=30)
    admin = {"Authorization": f"Bearer {admin_key}"}
    with TestClient(app) as client:
        deadline = time.monotonic() + 60
        while True:  # the writer deletes old rows when it starts (in its own thread)
            rows = client.get("/v1/admin/audit?limit=10000", headers=admin).json()["audit"]
            if not any(r["ts"] == old and r["kind"] == "request" for r in rows):
                break
            assert time.monotonic() < deadline, "old request rows were not deleted"
            time.sleep(0.05)
        charges = client.get("/v1/admin/ledger", headers=admin).json()["charges"]
    assert sum(r["ts"] == recent for r in rows) == 2  # within the retention period: kept
    assert sum(r["ts"] == old for r in rows) == 1  # the charge's row
    assert [r["outcome"] for r in rows if r["kind"] == "charge"] == [f"reserved {charge.id}"]
    assert [c["id"] for c in charges] == [charge.id] and charges[0]["status"] == "released"


def test_retention_zero_keeps_request_rows(tmp_path: Path) -> None:
    from dpkit.server._config import load_config

    (tmp_path / "curator.toml").write_text("[server]\naudit_retention_days = 0\n")
    assert load_config(tmp_path / "curator.toml").audit_retention_days is None
    (tmp_path / "curator.toml").write_text("[server]\naudit_retention_days = -1\n")
    with pytest.raises(Exception, match="audit_retention_days"):
        load_config(tmp_path / "curator.toml")
