"""Several worker processes over one ledger and data directory (``workers`` in curator.toml).

Two :class:`Curator` objects over the same files stand for two workers, deterministically: a
dataset registered or replaced through one is answered by the other from the new version only,
and nothing is charged for an attempt on the replaced one. A real ``dpkit serve`` with
``workers = 2`` answers a dataset registered through the API on every connection, and its
workers end with a master killed by SIGKILL. (The race for exactly k queries and the SIGKILL
storm with two workers are in test_server_concurrency.py and test_server_crash.py.)
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpkit.errors import DataError
from dpkit.server import ServerConfig
from dpkit.server._config import load_config
from dpkit.server._service import Curator, NotFoundError

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning")


def _csv(folder: Path, name: str, header: str, rows: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(header + "\n" + "".join(f"{i % 10}\n" for i in range(rows)))


def _spec(source: str, column: str) -> dict[str, Any]:
    return {"name": "d", "source": source, "total_epsilon": 1000.0,
            "columns": [{"name": column, "type": "float", "bounds": [0, 10]}]}  # fmt: skip


def _two_workers(tmp_path: Path) -> tuple[Curator, Curator]:
    cfg = ServerConfig(
        ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data", import_dir=tmp_path / "imp"
    )
    one, two = Curator(cfg), Curator(cfg)
    one.start()
    two.start()
    return one, two


def test_a_dataset_registered_or_replaced_through_one_worker_is_answered_by_the_other(
    tmp_path: Path,
) -> None:
    one, two = _two_workers(tmp_path)
    _csv(tmp_path / "imp", "small.csv", "x", 200)
    _csv(tmp_path / "imp", "large.csv", "x", 4000)
    _csv(tmp_path / "imp", "renamed.csv", "y", 4000)
    one.register_dataset(_spec("small.csv", "x"))
    a = one.add_analyst("ann")
    one.ledger.set_budget(a["id"], "d", 1000.0, 0.0)
    who = two.authenticate(a["key"])
    # epsilon 20: the count's noise has scale 1/20, so |noise| > 50 has probability < e^-1000.
    count = {"dataset": "d", "query": "count", "epsilon": 20.0}
    assert abs(two.query(who, count)["value"] - 200) < 50  # unknown to `two` until asked
    one.register_dataset(_spec("large.csv", "x"))  # same schema, new data: version 2
    assert one.versions["d"] == 2 and two.versions["d"] == 1
    spent = two.ledger.budgets(a["id"])[0]["spent_epsilon"]
    # `two` still holds version 1: the ledger refuses that charge, `two` reloads, asks again.
    assert abs(two.query(who, count)["value"] - 4000) < 50
    assert two.versions["d"] == 2
    assert two.ledger.budgets(a["id"])[0]["spent_epsilon"] == spent + 20.0  # charged once
    assert all(c.status == "released" for c in two.ledger.charges(a["id"]))
    one.register_dataset(_spec("renamed.csv", "y"))  # a new schema: column x is gone
    mean_y = {"dataset": "d", "query": "mean", "column": "y", "epsilon": 1.0}
    assert two.query(who, mean_y)["status"] == "released"  # refused on v2, asked again on v3
    before = len(two.ledger.charges(a["id"]))
    with pytest.raises(DataError):
        one.query(one.authenticate(a["key"]), {**mean_y, "column": "x"})
    assert len(two.ledger.charges(a["id"])) == before  # refused, nothing charged
    with pytest.raises(NotFoundError):
        two.schema("missing")


def test_workers_start_at_once_register_the_configured_datasets_once(tmp_path: Path) -> None:
    _csv(tmp_path / "imp", "small.csv", "x", 50)
    cfg = ServerConfig(
        ledger=str(tmp_path / "l.db"),
        data_dir=tmp_path / "data",
        import_dir=tmp_path / "imp",
        datasets=(_spec("small.csv", "x"),),
    )
    workers = [Curator(cfg) for _ in range(4)]
    threads = [threading.Thread(target=w.start) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [w.versions for w in workers] == [{"d": 1}] * 4  # registered once, loaded by all


def test_workers_setting_is_checked(tmp_path: Path) -> None:
    p = tmp_path / "curator.toml"
    p.write_text("[server]\nworkers = 3\n")
    assert load_config(p).workers == 3
    for bad in ("0", "65", "true", '"2"', "1.5"):
        p.write_text(f"[server]\nworkers = {bad}\n")
        with pytest.raises(DataError, match="workers"):
            load_config(p)


def _workers(pid: int) -> set[int]:
    """The worker processes of a master (not, e.g., multiprocessing's resource tracker)."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for c in (task / "children").read_text().split():
            if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes():
                out.add(int(c))
    return out


def test_dpkit_serve_with_two_workers(make_server: Any) -> None:
    server = make_server(workers=2)
    workers = _workers(server.proc.pid)
    assert len(workers) == 2
    _csv(server.root / "imports", "later.csv", "x", 300)
    server.admin("POST", "/v1/admin/datasets", {**_spec("later.csv", "x"), "name": "later"})
    aid, key = server.analyst("ann", 100.0)
    server.admin("PUT", "/v1/admin/budgets",
                 {"analyst": aid, "dataset": "later", "epsilon": 100.0, "delta": 0.0})  # fmt: skip
    body = {"dataset": "later", "query": "count", "epsilon": 1.0}
    # A new connection each time: the kernel hands them to either worker.
    for _ in range(16):
        r = httpx.post(f"{server.url}/v1/query", json=body, headers={"X-API-Key": key})
        assert r.status_code == 200, r.text
    # SIGKILL of the master alone: its workers die with it (they would keep the port).
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{w}").exists() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{w}").exists() for w in workers)
    server.start()  # the port is free again; the datasets and the budget are still there
    r = server.http.post("/v1/query", json=body, headers={"X-API-Key": key})
    assert r.status_code == 200, r.text


def test_the_ledger_file_lock_excludes_another_process_writer(tmp_path: Path) -> None:
    """Each process has its own descriptor, so a second one (as another worker would) cannot
    take the lock while the first holds it, and can once it is released."""
    import fcntl

    from dpkit.server._locks import FileLock

    lock = FileLock(str(tmp_path / "ledger.db.lock"))
    other = os.open(tmp_path / "ledger.db.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with lock, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
        fcntl.flock(other, fcntl.LOCK_UN)
    finally:
        os.close(other)


def test_a_registration_killed_between_its_files_and_its_ledger_row_does_not_block_restart(
    tmp_path: Path,
) -> None:
    # A worker killed (SIGKILL) inside a registration leaves the new files without the ledger's
    # new row, or, between store_table's two renames, no dataset folder at all; the restarted
    # service must start, and answer only on files that the ledger's schema describes.
    from dpkit.server._ingest import read_source, store_table
    from dpkit.server._schema import DatasetSchema

    one, _ = _two_workers(tmp_path)
    _csv(tmp_path / "imp", "x.csv", "x", 200)
    _csv(tmp_path / "imp", "y.csv", "y", 400)
    one.register_dataset(_spec("x.csv", "x"))
    a = one.add_analyst("ann")
    one.ledger.set_budget(a["id"], "d", 1000.0, 0.0)
    new = _spec("y.csv", "y")
    table = read_source(tmp_path / "imp" / "y.csv", DatasetSchema.from_dict({
        k: v for k, v in new.items() if k not in ("source", "total_epsilon")}))  # fmt: skip
    store_table(tmp_path / "data", table)  # ... and killed before ledger.add_dataset
    cfg = one.config
    again = Curator(cfg)
    again.start()  # was: FileNotFoundError (x.npy) on every restart
    assert again.versions["d"] == 2 and again.tables["d"].schema.columns[0].name == "y"
    who = again.authenticate(a["key"])
    mean_y = {"dataset": "d", "query": "count", "epsilon": 20.0}
    assert abs(again.query(who, mean_y)["value"] - 400) < 50
    # Killed between store_table's two renames: the old folder is aside, the new one complete.
    data = tmp_path / "data"
    store_table(data, table)
    os.replace(data / "d", data / ".d.old")
    (data / ".d.tmp").mkdir()
    for f in (data / ".d.old").iterdir():
        os.link(f, data / ".d.tmp" / f.name)
    Curator(cfg).start()
    assert (data / "d" / "schema.json").exists() and not (data / ".d.old").exists()
    again.register_dataset(_spec("x.csv", "x"))  # the name can be registered again


def test_a_worker_whose_master_died_before_it_asked_for_the_death_signal_ends_itself() -> None:
    # PR_SET_PDEATHSIG fires only on a death after the call: a worker still starting when its
    # master was killed would keep serving on the port; it compares its parent with the master.
    import subprocess
    import sys

    from dpkit.server._app import MASTER_ENV

    code = "from dpkit.server._app import _die_with_parent as d; d(); print('alive')"
    env = {**os.environ, MASTER_ENV: str(os.getpid() + 1_000_000)}  # not this process
    gone = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert gone.returncode == -signal.SIGKILL and b"alive" not in gone.stdout
    env[MASTER_ENV] = str(os.getpid())  # its real parent: it lives
    kept = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)
    assert kept.returncode == 0 and kept.stdout.strip() == b"alive"


def test_a_worker_started_after_curator_toml_was_edited_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # uvicorn replaces a dead worker with a new one, which reads curator.toml again: after an
    # edit (another ledger, say) it would spend budgets that the other workers do not see.
    import hashlib

    from dpkit.server._app import CONFIG_DIGEST_ENV, CONFIG_ENV, worker_app

    cfg = tmp_path / "curator.toml"
    cfg.write_text('[server]\nledger = "a.db"\nworkers = 2\n')
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    monkeypatch.setenv(CONFIG_DIGEST_ENV, hashlib.sha256(cfg.read_bytes()).hexdigest())
    cfg.write_text('[server]\nledger = "b.db"\nworkers = 2\n')
    with pytest.raises(DataError, match="changed since the service started"):
        worker_app()
