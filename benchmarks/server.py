"""The curator service under load: DP mean over a registered 1,000,000-row dataset with 32
concurrent clients over loopback, against the same server's no-op endpoint (authentication and
HTTP only: the limit). Targets: mean throughput ≥ 1/3 of the no-op's, p99 ≤ 100 ms (SQLite
ledger). PostgreSQL is reported too when initdb/pg_ctl are installed.

There is no peer library (no other curator runs in-process); run it with the environment that
has the server extra: ``PYTHONPATH=src .venv/bin/python benchmarks/server.py``. Both endpoints
are driven by the same load generator (32 threads, keep-alive connections, http.client) on the
same machine as the server, so the client's CPU use is part of both numbers.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import table

CLIENTS = 32
SECONDS = 6.0
ROWS = 1_000_000


def _missing() -> str | None:
    for mod in ("fastapi", "uvicorn", "httpx", "pyarrow"):
        try:
            __import__(mod)
        except ImportError:
            return mod
    return None


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dataset(folder: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    gen = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    t = pa.table({"age": gen.uniform(18, 90, ROWS), "income": gen.lognormal(3.6, 0.5, ROWS)})
    pq.write_table(t, folder / "big.parquet")


def _start(root: Path, ledger: str) -> tuple[subprocess.Popen[bytes], int, str]:
    from dpkit.server import new_key

    port = _port()
    _, key, h = new_key("admin")
    cfg = root / f"curator-{port}.toml"
    cfg.write_text(
        f'[server]\nport = {port}\nledger = "{ledger}"\nadmin_key_hash = "{h}"\n'
        f'data_dir = "data"\nimport_dir = "imports"\n'
        '[[datasets]]\nname = "big"\nsource = "big.parquet"\ntotal_epsilon = 100000.0\n'
        'columns = [{name = "age", type = "float", bounds = [0, 100]}, '
        '{name = "income", type = "float", bounds = [0, 500]}]\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpkit.cli", "serve", "--config", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(1200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/v1/noop")
            if c.getresponse().status == 401:
                return proc, port, key
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the service did not start")


def _call(port: int, method: str, path: str, key: str, body: Any = None) -> Any:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    c.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    r = c.getresponse()
    data = json.loads(r.read())
    assert r.status == 200, data
    return data


def _load(port: int, key: str, method: str, path: str, body: Any) -> tuple[float, float, float]:
    """(requests per second, p50 ms, p99 ms) of CLIENTS threads for SECONDS."""
    lat: list[list[float]] = [[] for _ in range(CLIENTS)]
    errors: list[int] = []
    start = threading.Barrier(CLIENTS + 1)
    stop = time.perf_counter() + 1e9
    payload = None if body is None else json.dumps(body)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def worker(i: int) -> None:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            c.request(method, path, body=payload, headers=headers)
            r = c.getresponse()
            r.read()
            if r.status != 200:
                errors.append(r.status)
            lat[i].append(time.perf_counter() - t0)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    stop = time.perf_counter() + SECONDS
    t0 = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. HTTP {errors[0]}")
    import numpy as np

    all_lat = np.concatenate([np.asarray(x) for x in lat]) * 1000
    return len(all_lat) / wall, float(np.percentile(all_lat, 50)), float(np.percentile(all_lat, 99))


def _bench(root: Path, ledger: str, name: str) -> list[tuple[str, ...]]:
    proc, port, admin = _start(root, ledger)
    try:
        ana = _call(port, "POST", "/v1/admin/analysts", admin, {"name": f"bench{port}"})
        _call(port, "PUT", "/v1/admin/budgets", admin,
              {"analyst": ana["id"], "dataset": "big", "epsilon": 100000.0})  # fmt: skip
        key = ana["key"]
        query = {"dataset": "big", "query": "mean", "column": "age", "epsilon": 0.001}
        _load(port, key, "GET", "/v1/noop", None)  # warm-up (connections, caches)
        noop = _load(port, key, "GET", "/v1/noop", None)
        mean = _load(port, key, "POST", "/v1/query", query)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ratio = mean[0] / noop[0]
    ok = "yes" if ratio >= 1 / 3 and mean[2] <= 100 else "NO"
    return [
        (name, "no-op", f"{noop[0]:.0f}", f"{noop[1]:.1f}", f"{noop[2]:.1f}", "1", ""),
        (name, "DP mean, 1M rows", f"{mean[0]:.0f}", f"{mean[1]:.1f}", f"{mean[2]:.1f}",
         f"{ratio:.2f}", ok),
    ]  # fmt: skip


def _postgres(root: Path) -> tuple[str, Any] | None:
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        print("PostgreSQL: skipped (initdb/pg_ctl not installed)")
        return None
    pg = Path(tempfile.mkdtemp(prefix="dpkit-bench-pg-"))
    as_user = []
    if os.geteuid() == 0:
        shutil.chown(pg, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _port()

    def run(*a: str) -> None:
        subprocess.run([*as_user, *a], check=True, capture_output=True, cwd=pg)

    run("initdb", "-D", str(pg / "data"), "-U", "dpkit", "--auth=trust")
    run("pg_ctl", "-D", str(pg / "data"), "-l", str(pg / "log"), "-w", "start",
        "-o", f"-p {port} -k {pg} -c listen_addresses=127.0.0.1")  # fmt: skip

    def stop() -> None:
        run("pg_ctl", "-D", str(pg / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(pg, ignore_errors=True)

    return f"postgresql://dpkit@127.0.0.1:{port}/postgres", stop


def main() -> None:
    missing = _missing()
    if missing is not None:
        print(f"server benchmark skipped: {missing} is not installed (pip install 'dpkit[server]')")
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _dataset(root / "imports")
        rows = _bench(root, str(root / "ledger.db"), "SQLite")
        pg = _postgres(root)
        if pg is not None:
            try:
                shutil.rmtree(root / "data")  # registered again for the second service
                rows += _bench(root, pg[0], "PostgreSQL")
            finally:
                pg[1]()
    print(f"curator service, {CLIENTS} concurrent clients over loopback, {SECONDS:g} s each, "
          f"{os.cpu_count()} CPUs (shared: numbers move with the machine's load)")  # fmt: skip
    head = ("ledger", "endpoint", "req/s", "p50 ms", "p99 ms", "vs no-op", "target met")
    print(table(rows, head))
    print("targets (SQLite): throughput ≥ 1/3 of the no-op's and p99 ≤ 100 ms")


if __name__ == "__main__":
    main()
