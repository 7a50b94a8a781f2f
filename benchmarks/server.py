"""The curator service under load: DP mean over a registered 1,000,000-row dataset with 32
concurrent clients over loopback, against the same server's no-op endpoint (authentication and
HTTP only: the limit). Targets: mean throughput ≥ 1/3 of the no-op's, p99 ≤ 100 ms (SQLite
ledger). PostgreSQL is reported too when initdb/pg_ctl are installed.

There is no peer library (no other curator runs in-process); run it with the environment that
has the server extra: ``PYTHONPATH=src .venv/bin/python benchmarks/server.py [--client asyncio|
threads] [--ledger sqlite|postgres|both] [--workers N [N ...]]``; ``--workers 1 2`` runs the
service with one worker process, then with two (the same count for its no-op and its DP mean).
Both endpoints are driven by the same load generator on the same machine as the server, so the
client's CPU use is part of both numbers:

* ``asyncio`` (default): one process, one event loop (uvloop when installed), 32 keep-alive
  HTTP/1.1 connections writing prepared requests and reading Content-Length bodies; light, so
  that the numbers are mostly the server's;
* ``threads``: 32 threads with ``http.client`` keep-alive connections (the first version of this
  benchmark); its GIL hand-offs between threads add tens of ms to the tail of both endpoints.

The endpoints take turns: after a warm-up of each, three 2-second windows of the no-op and three
of the mean alternate, and each endpoint's figures pool its three windows. On a shared machine
whose speed drifts by tens of percent from one minute to the next, back-to-back runs of 6 s each
compared a fast minute with a slow one as often as not; turns weigh the drift on both alike.
The server's own CPU time per request (from ``/proc``, Linux; all its processes) is printed too.
"""

from __future__ import annotations

import argparse
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
from _timing import print_targets, table, target

CLIENTS = 32
CLIENT = "asyncio"
ROUNDS = 3  # windows per endpoint, taken in turns
SECONDS = 2.0  # per window: 6 s per endpoint in all
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


def _start(root: Path, ledger: str, workers: int) -> tuple[subprocess.Popen[bytes], int, str]:
    from dpkit.server import new_key

    port = _port()
    _, key, h = new_key("admin")
    cfg = root / f"curator-{port}.toml"
    cfg.write_text(
        f'[server]\nport = {port}\nledger = "{ledger}"\nadmin_key_hash = "{h}"\n'
        f'data_dir = "data"\nimport_dir = "imports"\nworkers = {workers}\n'
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


def _threads(port: int, key: str, method: str, path: str, body: Any) -> list[float]:
    """Latencies (s) of CLIENTS threads with http.client keep-alive connections for SECONDS."""
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
    start.wait()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. HTTP {errors[0]}")
    return [x for per in lat for x in per]


def _asyncio(port: int, key: str, method: str, path: str, body: Any) -> list[float]:
    """Latencies (s) of CLIENTS keep-alive connections on one event loop for SECONDS."""
    import asyncio

    payload = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    request = head.encode() + payload
    lat: list[float] = []
    errors: list[bytes] = []

    async def one(stop: float) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        clock = time.perf_counter
        while clock() < stop:
            t0 = clock()
            writer.write(request)
            header = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in header.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            if header[9:12] != b"200":
                errors.append(header[9:12])
            lat.append(clock() - t0)
        writer.close()

    async def main() -> None:
        stop = time.perf_counter() + SECONDS
        await asyncio.gather(*(one(stop) for _ in range(CLIENTS)))

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. HTTP {errors[0]!r}")
    return lat


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and its descendants (Linux /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += _cpu_seconds(int(child)) or 0.0
        return total
    except (OSError, ValueError, IndexError):
        return None


class _Window:
    """Latencies, wall time and server CPU time gathered over one or more load windows."""

    def __init__(self) -> None:
        self.lat: list[float] = []
        self.wall = 0.0
        self.cpu: float | None = 0.0

    def run(self, proc: subprocess.Popen[bytes], port: int, key: str, method: str, path: str,
            body: Any) -> None:  # fmt: skip
        cpu0, t0 = _cpu_seconds(proc.pid), time.perf_counter()
        self.lat += (_asyncio if CLIENT == "asyncio" else _threads)(port, key, method, path, body)
        self.wall += time.perf_counter() - t0
        cpu1 = _cpu_seconds(proc.pid)
        self.cpu = None if None in (cpu0, cpu1, self.cpu) else self.cpu + cpu1 - cpu0  # type: ignore[operator]

    def result(self) -> tuple[float, float, float, float | None]:
        """(requests per second, p50 ms, p99 ms, server CPU ms per request)."""
        import numpy as np

        ms = np.asarray(self.lat) * 1000
        cpu = None if self.cpu is None else self.cpu * 1000 / len(ms)
        return len(ms) / self.wall, float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), cpu


def _bench(root: Path, ledger: str, name: str, workers: int) -> list[tuple[str, ...]]:
    proc, port, admin = _start(root, ledger, workers)
    try:
        ana = _call(port, "POST", "/v1/admin/analysts", admin, {"name": f"bench{port}"})
        _call(port, "PUT", "/v1/admin/budgets", admin,
              {"analyst": ana["id"], "dataset": "big", "epsilon": 100000.0})  # fmt: skip
        key = ana["key"]
        query = {"dataset": "big", "query": "mean", "column": "age", "epsilon": 0.001}
        warm = _Window()  # warm-up (connections, caches, the remembered aggregate)
        warm.run(proc, port, key, "GET", "/v1/noop", None)
        warm.run(proc, port, key, "POST", "/v1/query", query)
        # The two endpoints take turns (ROUNDS windows each), so that the shared machine's
        # drifting speed weighs on both alike rather than on whichever ran in a slow minute.
        windows = (_Window(), _Window())
        for _ in range(ROUNDS):
            windows[0].run(proc, port, key, "GET", "/v1/noop", None)
            windows[1].run(proc, port, key, "POST", "/v1/query", query)
        noop, mean = windows[0].result(), windows[1].result()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ratio = mean[0] / noop[0]
    ok = "yes" if ratio >= 1 / 3 and mean[2] <= 100 else "NO"

    def cpu(r: tuple[float, float, float, float | None]) -> str:
        return "-" if r[3] is None else f"{r[3]:.2f}"

    w = str(workers)
    return [
        (name, w, "no-op", f"{noop[0]:.0f}", f"{noop[1]:.1f}", f"{noop[2]:.1f}", cpu(noop), "1",
         ""),
        (name, w, "DP mean, 1M rows", f"{mean[0]:.0f}", f"{mean[1]:.1f}", f"{mean[2]:.1f}",
         cpu(mean), f"{ratio:.2f}", ok),
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


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--client", choices=("asyncio", "threads"), default="asyncio")
    p.add_argument("--ledger", choices=("sqlite", "postgres", "both"), default="both")
    p.add_argument("--workers", type=int, nargs="+", default=[1], help="worker processes")
    return p.parse_args()


def main() -> None:
    missing = _missing()
    if missing is not None:
        print(f"server benchmark skipped: {missing} is not installed (pip install 'dpkit[server]')")
        return
    global CLIENT
    args = _args()
    CLIENT = args.client
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _dataset(root / "imports")
        rows: list[tuple[str, ...]] = []
        if args.ledger in ("sqlite", "both"):
            for n in args.workers:
                rows += _bench(root, str(root / f"ledger-{n}.db"), "SQLite", n)
        pg = _postgres(root) if args.ledger in ("postgres", "both") else None
        if pg is not None:
            try:
                shutil.rmtree(root / "data", ignore_errors=True)  # registered again
                for n in args.workers:
                    rows += _bench(root, pg[0], "PostgreSQL", n)
            finally:
                pg[1]()
    print(f"curator service, {CLIENTS} concurrent clients over loopback ({CLIENT} client), "
          f"{ROUNDS} windows of {SECONDS:g} s each in turns, {os.cpu_count()} CPUs (shared: "
          f"numbers move with the machine's load; load average before {load[0]:.2f}, after "
          f"{os.getloadavg()[0]:.2f})")  # fmt: skip
    head = ("ledger", "workers", "endpoint", "req/s", "p50 ms", "p99 ms", "server CPU ms/req",
            "vs no-op", "target met")  # fmt: skip
    print(table(rows, head))
    print("targets (SQLite): throughput ≥ 1/3 of the no-op's and p99 ≤ 100 ms")
    sqlite = [float(r[7]) for r in rows if r[0] == "SQLite" and r[2] != "no-op"]
    print_targets(
        [target("curator DP mean vs no-op endpoint (SQLite)", min(sqlite), at_least=1 / 3)]
        if sqlite
        else []
    )


if __name__ == "__main__":
    main()
