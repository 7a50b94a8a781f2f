"""Regression tests from an independent review of the curator service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dpkit.errors import DataError
from dpkit.server import ServerConfig, hash_key, load_config, new_key
from dpkit.server._auth import key_id
from dpkit.server._schema import check_name
from dpkit.server._service import AuthError, Curator


def test_config_file_refuses_the_demo_seed(tmp_path: Path) -> None:
    # A seeded service draws predictable noise, and the same noise again after every restart
    # (the seed sequence starts over), so `dpkit serve` must not accept it from curator.toml.
    cfg = tmp_path / "curator.toml"
    cfg.write_text('[server]\nledger = "l.db"\ninsecure_seed = 2026\n')
    with pytest.raises(DataError, match="insecure_seed"):
        load_config(cfg)


def test_a_new_admin_key_in_the_config_revokes_the_old_one(tmp_path: Path) -> None:
    # Rotating a leaked admin key is done by putting a new hash in the configuration; the key
    # stored at the first start must stop working at the next start.
    _, old, old_hash = new_key("admin")
    _, new, new_hash = new_key("admin")
    base = {"ledger": str(tmp_path / "l.db"), "data_dir": tmp_path, "import_dir": tmp_path}
    first = Curator(ServerConfig(**base, admin_key_hash=old_hash))  # type: ignore[arg-type]
    first.start()
    assert first.authenticate(old).role == "admin"
    second = Curator(ServerConfig(**base, admin_key_hash=new_hash))  # type: ignore[arg-type]
    second.start()
    assert second.authenticate(new).role == "admin"
    with pytest.raises(AuthError):
        second.authenticate(old)
    assert hash_key(new) == new_hash


@pytest.mark.parametrize("name", ["survey\n", "age\n"])
def test_names_with_a_trailing_newline_are_refused(name: str) -> None:
    # `$` in a Python pattern also matches before a final newline.
    with pytest.raises(DataError):
        check_name(name, "name")


def test_keys_and_idempotency_keys_with_a_trailing_newline_are_refused(tmp_path: Path) -> None:
    _, key, _ = new_key("a1")
    assert key_id(key) == "a1" and key_id(key + "\n") is None
    base = {"ledger": str(tmp_path / "l.db"), "data_dir": tmp_path, "import_dir": tmp_path}
    cur = Curator(ServerConfig(**base))  # type: ignore[arg-type]
    cur.start()
    a = cur.add_analyst("ann")
    who = cur.authenticate(a["key"])
    body = {"dataset": "none", "query": "count", "epsilon": 1.0, "idempotency_key": "k1\n"}
    with pytest.raises(DataError, match="idempotency key"):
        cur.query(who, body)


def test_a_refund_takes_the_row_locks_in_the_order_charges_do(pg_db: str) -> None:
    # A charge locks the dataset row, then the budget row. A refund that updated the budget row
    # first could deadlock with a concurrent charge; PostgreSQL then aborts one of them (the
    # refund is lost and the query ends in an internal error). Here a transaction holding the
    # dataset row (as a charge does) asks for the budget row while a refund is under way.
    import threading
    import time

    import psycopg

    from dpkit.server import Ledger

    led = Ledger(pg_db)
    led.migrate()
    led.add_principal("a1", "alice", "analyst", "sha256:x")
    led.add_dataset("survey", {"name": "survey"}, 1.0, 1e-6)
    led.set_budget("a1", "survey", 1.0, 1e-6)
    cid = led.reserve("a1", "survey", {"query": "count"}, 0.25, 0.0).id
    errors: list[BaseException] = []

    def refund() -> None:
        try:
            led.fail(cid, refund=True)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    with psycopg.connect(pg_db, autocommit=True) as charge:
        charge.execute("SET lock_timeout = '20s'")
        charge.execute("BEGIN")
        charge.execute("SELECT * FROM datasets WHERE name = 'survey' FOR UPDATE")
        t = threading.Thread(target=refund)
        t.start()
        time.sleep(0.5)  # the refund is now waiting for a row lock
        try:
            charge.execute(
                "SELECT * FROM budgets WHERE analyst = 'a1' AND dataset = 'survey' FOR UPDATE"
            )
            charge.execute("COMMIT")
        except psycopg.Error as exc:
            errors.append(exc)
            charge.execute("ROLLBACK")
        t.join(timeout=30)
    assert not t.is_alive()
    assert errors == []
    assert led.budgets("a1")[0]["spent_epsilon"] == 0.0
    charge_row = led.charge(cid)
    assert charge_row is not None and charge_row.status == "refunded"
    led.close()


def test_a_lone_surrogate_in_a_request_does_not_stop_the_audit_log(make_server: Any) -> None:
    # JSON may carry "\ud800", which no database can store as text. The request audit row of
    # such a request used to fail its batch and kill the audit thread: the rows of that batch
    # (other requests' too) were lost and later requests were no longer audited on their own.
    import sqlite3
    import time

    srv = make_server()
    aid, key = srv.analyst("mallory", 10.0)
    h = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    bad = '{"dataset": "\\ud800", "query": "count", "epsilon": 0.1}'
    assert srv.http.post("/v1/query", content=bad, headers=h).status_code == 400
    time.sleep(1.0)  # the audit writer flushes every 0.2 s
    assert srv.http.get("/v1/noop?after=1", headers=h).status_code == 200
    time.sleep(1.0)
    # Read the ledger file directly: the admin's audit endpoint would flush the queue itself.
    with sqlite3.connect(srv.ledger) as conn:
        paths = [r[0] for r in conn.execute(
            "SELECT path FROM audit WHERE kind = 'request' AND principal = ?", (aid,))]  # fmt: skip
    assert "/v1/query" in paths and "/v1/noop" in paths


def test_the_pricing_probe_never_hands_out_a_seeded_generator() -> None:
    # The probe charges a (probe) accountant like a real release; with a seed it was a charged
    # release with insecure noise on every query and dry run (InsecureRandomnessWarning).
    import dpkit.stats as st
    from dpkit.server import QueryRegistry
    from dpkit.server._registry import Answer, Meter, Prepared
    from dpkit.server._schema import DatasetSchema, dummy_table

    seen: list[object] = []

    def prepare(params: Any, schema: DatasetSchema) -> Prepared:
        def compute(t: Any, rng: Any, meter: Meter) -> Answer:
            seen.append(rng)
            x = t.columns["x"]
            return Answer(st.count(x, epsilon=1.0, accountant=meter, rng=rng).value)

        return Prepared("count", 1.0, 0.0, compute)

    reg = QueryRegistry()
    reg.register("count", prepare)
    schema = DatasetSchema.from_dict({"name": "t", "columns": [{"name": "x", "bounds": [0, 1]}]})
    reg.prepare("count", {}, schema, dummy_table(schema, 10))
    assert seen == [None]


@pytest.mark.parametrize("total", [1e8, 1e300])
def test_a_total_budget_too_large_to_store_is_refused_before_the_data_are(
    tmp_path: Path, total: float
) -> None:
    # It used to reach the database as an integer beyond 64 bits (a bare OverflowError, HTTP 500)
    # after the cleaned data had been written.
    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "t.csv").write_text("x\n1\n0\n")
    cfg = ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp")  # fmt: skip
    cur = Curator(cfg)
    cur.start()
    spec = {"name": "t", "source": "t.csv", "total_epsilon": total,
            "columns": [{"name": "x", "bounds": [0, 1]}]}  # fmt: skip
    with pytest.raises(DataError, match="total_epsilon"):
        cur.register_dataset(spec)
    assert not (tmp_path / "data" / "t").exists() and cur.ledger.datasets() == []


def test_an_analysts_leaked_key_can_be_replaced(server: Any) -> None:
    # There was no way to revoke an analyst's key: whoever held a leaked key could spend the
    # analyst's budget and read their answers for good.
    aid, old = server.analyst("leaky", 1.0)
    h_old = {"Authorization": f"Bearer {old}"}
    link = server.http.post("/v1/dashboard/token", headers=h_old).json()["url"]
    login = server.http.get(link, follow_redirects=False)
    assert login.status_code == 303
    session = login.cookies["dpkit_session"]
    server.http.cookies.clear()
    server.http.cookies.set("dpkit_session", session)
    try:
        assert server.http.get("/dashboard").status_code == 200  # the session works before
    finally:
        server.http.cookies.clear()
    out = server.admin("POST", f"/v1/admin/analysts/{aid}/key")
    assert out["id"] == aid and out["key"] != old
    assert server.http.get("/v1/me", headers=h_old).status_code == 401
    me = server.http.get("/v1/me", headers={"Authorization": f"Bearer {out['key']}"})
    assert me.status_code == 200 and me.json()["id"] == aid
    server.http.cookies.set("dpkit_session", session)
    try:
        assert server.http.get("/dashboard").status_code == 401
    finally:
        server.http.cookies.clear()
    # Only the admin may do it, and only for an analyst.
    r = server.http.post(f"/v1/admin/analysts/{aid}/key", headers=h_old)
    assert r.status_code == 401
    r = server.http.post(
        f"/v1/admin/analysts/{aid}/key", headers={"Authorization": f"Bearer {out['key']}"}
    )
    assert r.status_code == 403
    r = server.http.post(
        "/v1/admin/analysts/admin/key", headers={"Authorization": f"Bearer {server.admin_key}"}
    )
    assert r.status_code == 404


def test_dashboard_pages_are_not_cached_framed_or_scripted(server: Any) -> None:
    _, key = server.analyst("framed", 1.0)
    link = server.http.post(
        "/v1/dashboard/token", headers={"Authorization": f"Bearer {key}"}
    ).json()["url"]
    try:
        login = server.http.get(link, follow_redirects=False)
        page = server.http.get("/dashboard")
    finally:
        server.http.cookies.clear()
    assert page.status_code == 200 and "framed" in page.text
    for r in (login, page):
        assert r.headers["cache-control"] == "no-store"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp


def test_a_charge_failing_after_its_writes_is_rolled_back_alone_in_a_batch(
    sqlite_group: Any, one_batch: Any
) -> None:
    # Group commit: jobs that arrive together share one transaction, each in a savepoint. A job
    # that fails after writing must leave nothing, and the others of its batch must commit.
    import sqlite3
    import threading

    group, lock, path = sqlite_group()
    errors: list[str] = []

    def job(v: int) -> None:
        def work(c: sqlite3.Connection) -> int:
            c.execute("INSERT INTO t VALUES (?)", (v,))
            if v % 3 == 0:
                raise ValueError("fails after its insert")
            return v

        try:
            assert group.run(work) == v
        except ValueError as exc:
            errors.append(str(exc))

    one_batch(group, lock, [threading.Thread(target=job, args=(v,)) for v in range(1, 10)], 9)
    check = sqlite3.connect(path)
    stored = sorted(r[0] for r in check.execute("SELECT v FROM t"))
    check.close()
    assert stored == [1, 2, 4, 5, 7, 8] and len(errors) == 3


@pytest.mark.parametrize("column", ["when", "nested"])
def test_a_parquet_column_of_the_wrong_kind_is_refused_clearly(tmp_path: Path, column: str) -> None:
    # A list column reached a bare ValueError (HTTP 500); a date column was read as nanoseconds.
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "imp").mkdir()
    when = [datetime.datetime(2020, 1, 1), datetime.datetime(2021, 1, 1)]
    pq.write_table(
        pa.table({"when": pa.array(when), "nested": pa.array([[1], [2]])}),
        tmp_path / "imp" / "t.parquet",
    )
    cfg = ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp")  # fmt: skip
    cur = Curator(cfg)
    cur.start()
    spec = {"name": "t", "source": "t.parquet", "total_epsilon": 1.0,
            "columns": [{"name": column, "bounds": [0, 1]}]}  # fmt: skip
    with pytest.raises(DataError, match=f"column {column} is stored as"):
        cur.register_dataset(spec)


@pytest.mark.parametrize("query", ["count", "sum", "mean", "var", "corr", "histogram"])
def test_an_epsilon_too_small_to_sample_is_refused_before_the_charge(
    tmp_path: Path, query: str
) -> None:
    # ε = 2e-16 passed pricing, was charged, and then the exact sampler refused the noise scale:
    # a refusal after charging ("it stays charged", HTTP 500) for a parameter known up front.
    from dpkit.errors import PrivacyParameterError

    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "t.csv").write_text(
        "x,y\n" + "".join(f"{i % 10},{i % 7}\n" for i in range(50))
    )
    cfg = ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp")  # fmt: skip
    cur = Curator(cfg)
    cur.start()
    cur.register_dataset({"name": "t", "source": "t.csv", "total_epsilon": 10.0,
                          "columns": [{"name": "x", "bounds": [0, 10]},
                                      {"name": "y", "bounds": [0, 10]}]})  # fmt: skip
    a = cur.add_analyst("ann")
    cur.ledger.set_budget(a["id"], "t", 10.0, 0.0)
    who = cur.authenticate(a["key"])
    body: dict[str, Any] = {"dataset": "t", "query": query, "epsilon": 2e-16}
    if query == "corr":
        body["columns"] = ["x", "y"]
    elif query != "count":
        body["column"] = "x"
    for dry in (True, False):
        with pytest.raises(PrivacyParameterError, match="at least 1e-12"):
            cur.query(who, {**body, "dry_run": dry})
    assert (
        cur.ledger.charges(a["id"]) == [] and cur.ledger.budgets(a["id"])[0]["spent_epsilon"] == 0
    )
    out = cur.query(who, {**body, "epsilon": 1e-12})  # the smallest price is still answered
    assert out["status"] == "released"
