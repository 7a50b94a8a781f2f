"""Spark for the tests: one local session, and a real standalone cluster on loopback.

A Python process holds one SparkContext at a time, so :class:`Sessions` keeps the current one
and switches between local mode (``local[2]``, the fast tests) and the cluster when a test asks
for the other kind.

The cluster is what a user deploys: a master and two workers, each its own JVM started from the
pyspark distribution (``bin/spark-class org.apache.spark.deploy.master.Master`` / ``Worker``),
bound to 127.0.0.1. dpkit reaches the executors the way a user ships it, as a zip of the package
given to ``SparkContext.addPyFile`` (``--py-files``). The executors' Python runs with ``-S`` and
a ``PYTHONPATH`` of the environment's site-packages only: no ``.pth`` file is read (the test
environment installs dpkit in editable mode through one) and the worktree's ``src`` is not on
the path, so an executor can import dpkit from the shipped zip and from nowhere else (a test
checks ``dpkit.__file__`` on the executors).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def build_zip(dest: Path) -> Path:
    """``dpkit.zip``: the package's sources as ``--py-files`` ships them (no bytecode)."""
    src = Path(__file__).resolve().parents[1] / "src" / "dpkit"
    out = dest / "dpkit.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(src.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".typed"):
                z.write(p, Path("dpkit") / p.relative_to(src))
    return out


class Cluster:
    """A standalone master and two workers on 127.0.0.1, started and stopped by the tests."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="dpkit-spark-"))
        self.port, self.ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.python = self._executor_python()

    def _executor_python(self) -> str:
        """A Python for the executors that sees site-packages but no .pth and no src/."""
        site = sysconfig.get_paths()["purelib"]
        script = self.dir / "python"
        script.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" -S "$@"\n')
        script.chmod(0o755)
        return str(script)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SPARK_"))}
        env.update(
            SPARK_HOME=str(_spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_DIRS=str(self.dir / "local"),
            SPARK_WORKER_DIR=str(self.dir / "work"),
            PYSPARK_PYTHON=self.python,
        )
        return env

    def _start(self, cls: str, *args: str, log: str) -> None:
        cmd = [str(_spark_home() / "bin" / "spark-class"), cls, *args]
        with open(self.dir / log, "wb") as out:
            p = subprocess.Popen(
                cmd, env=self._env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs.append(p)

    def start(self, timeout: float = 240.0) -> None:
        self._start(
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui)),
            log="master.log",
        )
        for i in range(2):
            self._start(
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
                *("--webui-port", str(_free_port()), self.url),
                log=f"worker{i}.log",
            )
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(p.poll() is not None for p in self.procs):
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as r:
                    state = json.load(r)
                if int(state.get("aliveworkers", 0)) == 2:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        logs = {p.name: p.read_text()[-2000:] for p in self.dir.glob("*.log")}
        self.stop()
        raise RuntimeError(f"the Spark cluster did not start: {logs}")

    def stop(self) -> None:
        for p in self.procs:  # each JVM we started, by its own process group
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


class Sessions:
    """The one SparkSession of this process: local mode or the cluster, switched on demand."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.session: Any = None
        self.cluster: Cluster | None = None

    def _stop(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.session, self.kind = None, None

    def get(self, kind: str) -> Any:
        if self.kind == kind:
            return self.session
        self._stop()
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(f"dpkit-tests-{kind}")
        for k, v in _CONF.items():
            builder = builder.config(k, v)
        if kind == "local":
            os.environ["PYSPARK_PYTHON"] = sys.executable  # local workers import dpkit from src
            session = builder.master("local[2]").getOrCreate()
        else:
            if self.cluster is None:
                self.cluster = Cluster()
                self.cluster.start()
            os.environ["PYSPARK_PYTHON"] = self.cluster.python
            builder = builder.master(self.cluster.url).config("spark.driver.host", "127.0.0.1")
            builder = builder.config("spark.executor.memory", "768m")
            builder = builder.config("spark.executor.cores", "1")
            session = builder.getOrCreate()
            session.sparkContext.addPyFile(str(build_zip(self.cluster.dir)))
        session.sparkContext.setLogLevel("ERROR")
        self.session, self.kind = session, kind
        return session

    def close(self) -> None:
        self._stop()
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        os.environ.pop("PYSPARK_PYTHON", None)
