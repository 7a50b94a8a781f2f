"""Real servers for the curator tests: uvicorn subprocesses on loopback, SQLite files in temporary
folders, and one PostgreSQL 15 cluster started with initdb/pg_ctl for the session."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from dpkit.server import new_key
from dpkit.server._group import GroupCommit

ROWS = 2000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_survey(folder: Path, rows: int = ROWS, seed: int = 0) -> Path:
    """A CSV with dirty cells: empty, NaN, text in a numeric column, out-of-range, unknown
    category, so that ingestion's cleaning is exercised."""
    gen = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "survey.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["age", "income", "sex", "extra"])
        for i in range(rows):
            age: object = round(float(gen.uniform(18, 90)), 2)
            income: object = round(float(gen.uniform(0, 200)), 1)
            sex: object = ("f", "m")[int(gen.integers(0, 2))]
            if i % 97 == 0:
                age = ""
            if i % 89 == 0:
                age = "NaN"
            if i % 83 == 0:
                income = "not a number"
            if i % 79 == 0:
                income = 1e9
            if i % 71 == 0:
                sex = "unknown"
            w.writerow([age, income, sex, "x"])
    return path


SURVEY = {
    "name": "survey",
    "source": "survey.csv",
    "total_epsilon": 1000.0,
    "total_delta": 1e-3,
    "columns": [
        {"name": "age", "type": "float", "bounds": [0, 100]},
        {"name": "income", "type": "float", "bounds": [0, 200], "fill": 0},
        {"name": "sex", "type": "category", "categories": ["f", "m"]},
    ],
}


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(t) for t in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(t)}" for k, t in v.items()) + "}"
    return repr(v)


class Server:
    """A curator service in a subprocess, with its admin key; restartable after a kill."""

    def __init__(
        self,
        root: Path,
        ledger: str | None = None,
        datasets: list[dict[str, Any]] | None = None,
        workers: int = 1,
    ) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        write_survey(root / "imports")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        _, self.admin_key, h = new_key("admin")
        self.ledger = ledger or str(root / "ledger.db")
        lines = [
            "[server]",
            f"port = {self.port}",
            f"ledger = {_toml_value(self.ledger)}",
            f'admin_key_hash = "{h}"',
            "max_body_bytes = 8192",
            "dummy_rows = 200",
            f"workers = {workers}",
        ]
        for ds in [SURVEY] if datasets is None else datasets:
            lines.append("[[datasets]]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in ds.items()]
        self.config = root / "curator.toml"
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None
        # One client for the tests' calls: a new httpx client per call builds an SSL context.
        self.http = httpx.Client(base_url=self.url, timeout=60)
        self.log = root / "server.log"
        self.start()

    def start(self, timeout: float = 150.0) -> None:
        env = dict(os.environ)
        env.pop("DPKIT_ADMIN_KEY_HASH", None)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dpkit.cli", "serve", "--config", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: the master and its workers
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc.wait()
                raise RuntimeError("server exited:\n" + self.log.read_text()[-3000:])
            try:
                if self.http.get("/v1/noop", timeout=1.0).status_code == 401:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("server did not start:\n" + self.log.read_text()[-3000:])

    def kill(self) -> None:
        """SIGKILL to every process of the service: no clean-up, no flush."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        self.http.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        r = self.http.request(
            method, path, json=body, headers={"Authorization": f"Bearer {self.admin_key}"}
        )
        assert r.status_code == 200, r.text
        return r.json()

    def analyst(self, name: str, epsilon: float, delta: float = 0.0) -> tuple[str, str]:
        """A new analyst with a budget on the survey; returns (id, key)."""
        a = self.admin("POST", "/v1/admin/analysts", {"name": name})
        self.admin(
            "PUT",
            "/v1/admin/budgets",
            {"analyst": a["id"], "dataset": "survey", "epsilon": epsilon, "delta": delta},
        )
        return a["id"], a["key"]


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def make(**kw: Any) -> Server:
        s = Server(tmp_path / f"srv{len(servers)}", **kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One SQLite-backed service shared by a module's tests."""
    s = Server(tmp_path_factory.mktemp("curator"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A PostgreSQL 15 cluster on 127.0.0.1 and a free port; yields a database URL."""
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) are required for these tests")
    # Not under pytest's temporary folder: that one is private to the user running the tests,
    # and the cluster may have to run as another user (initdb refuses root).
    root = Path(tempfile.mkdtemp(prefix="dpkit-pg-"))
    data = root / "data"
    port = free_port()
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: run the cluster as 'postgres'
        shutil.chown(root, "postgres")
        os.chmod(root, 0o755)
        as_user = ["runuser", "-u", "postgres", "--"]

    def run(*a: str) -> None:
        subprocess.run([*as_user, *a], check=True, capture_output=True, cwd=root)

    run("initdb", "-D", str(data), "-U", "dpkit", "--auth=trust", "-E", "UTF8")
    run(
        "pg_ctl", "-D", str(data), "-l", str(root / "pg.log"), "-w", "-t", "60", "start",
        "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=300 "
        "-c fsync=on -c shared_buffers=32MB",
    )  # fmt: skip
    try:
        import psycopg

        with psycopg.connect(
            f"postgresql://dpkit@127.0.0.1:{port}/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE curator")
        yield f"postgresql://dpkit@127.0.0.1:{port}/curator"
    finally:
        run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")  # a throwaway cluster
        shutil.rmtree(root, ignore_errors=True)


_DB_COUNTER = iter(range(1_000_000))


@pytest.fixture
def pg_db(postgres: str) -> str:
    """A new empty database on the session's cluster."""
    import psycopg

    base = postgres.rsplit("/", 1)[0]
    name = f"db{next(_DB_COUNTER)}"
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{base}/{name}"


@pytest.fixture(scope="session")
def survey_spec() -> dict[str, Any]:
    """The registration of the survey dataset the test services load."""
    return SURVEY


@pytest.fixture
def sqlite_group(tmp_path: Path) -> Callable[..., tuple[GroupCommit, threading.Lock, Path]]:
    """Make a GroupCommit over a new SQLite file with a table ``t (v INTEGER)`` and one
    connection per thread; keyword arguments go to GroupCommit. Returns (group, lock, path)."""

    def make(**kw: Any) -> tuple[GroupCommit, threading.Lock, Path]:
        path = tmp_path / "g.db"
        setup = sqlite3.connect(path, isolation_level=None)
        setup.execute("CREATE TABLE t (v INTEGER)")
        setup.close()
        local = threading.local()

        def conn() -> sqlite3.Connection:
            if getattr(local, "c", None) is None:
                local.c = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            c: sqlite3.Connection = local.c
            return c

        lock = threading.Lock()
        return GroupCommit(lock, conn, **kw), lock, path

    return make


@pytest.fixture
def one_batch() -> Callable[[GroupCommit, threading.Lock, list[threading.Thread], int], None]:
    """Start ``threads`` while the group's ``lock`` is held, wait until ``jobs`` writes are
    queued, then release it, so that they run as one batch; join the threads (30 s at most)."""

    def run(
        group: GroupCommit, lock: threading.Lock, threads: list[threading.Thread], jobs: int
    ) -> None:
        with lock:
            for t in threads:
                t.start()
            while len(group._queue) < jobs:
                threading.Event().wait(0.005)
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads), "a write of the batch never returned"

    return run
