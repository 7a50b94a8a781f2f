"""The service's Spark: one SparkSession per service process, and each query's jobs under a
time limit.

The admin configures it in ``curator.toml`` (``docs/server.md``, "Datasets on Spark")::

    [spark]
    master = "spark://head:7077"      # or "local[4]", "yarn"; absent: the process's session
    app_name = "dpkit-curator"
    query_seconds = 300               # a query's Spark jobs are cancelled after this
    [spark.conf]
    "spark.executor.memory" = "4g"

Every query on a Spark-backed dataset runs its Spark jobs in a job group of its own
(``SparkContext.setJobGroup(..., interruptOnCancel=True)``), set on the thread that answers it.
When the query runs past ``query_seconds`` a watchdog cancels the group (``cancelJobGroup``),
again every 200 ms until the computation returns, since a query may start another job after
the first is cancelled. The cancelled job raises in the query's thread, and the service treats
it as any computation that failed after its charge: refunded when no noise was drawn (the
exact aggregates of :mod:`dpkit.stats` and :mod:`dpkit.frame` are computed before their
charge, so a cancelled aggregate is always refunded), kept charged otherwise.

The time limit is a resource guard. Whether it fires depends on the size of the data, the
query and the cluster's load, never on the value of a record (every cell of a Spark-backed
dataset is cleaned into its declared domain by Spark SQL expressions, with no Python code on
the executors); an analyst only learns, as from any answer's latency, roughly how long the
query took.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dpkit.errors import DataError

__all__ = ["QueryTimeoutError", "SparkJobs", "SparkSettings", "spark_settings"]

_log = logging.getLogger("dpkit.server")
_RECANCEL_SECONDS = 0.2
_KEYS = {"master", "app_name", "query_seconds", "conf"}


class QueryTimeoutError(DataError):
    """A query's Spark jobs ran past the service's ``query_seconds`` and were cancelled."""


@dataclass(frozen=True)
class SparkSettings:
    """The ``[spark]`` section of ``curator.toml``: the session the service owns."""

    master: str | None = None
    """The master URL; ``None``: the session already running in this process, or one made
    from Spark's own defaults (``spark-defaults.conf``, a platform's settings), as a service
    built in code (tests, a notebook) shares its session."""
    app_name: str = "dpkit-curator"
    query_seconds: float = 300.0
    """The longest a query's Spark jobs may run; then they are cancelled (and refunded)."""
    conf: tuple[tuple[str, str], ...] = field(default=())
    """Spark settings (``spark.executor.memory``…), applied when the session is made."""


def spark_settings(raw: object) -> SparkSettings | None:
    """Validate a ``[spark]`` table (``None``: the service has no Spark).

    Examples
    --------
    >>> s = spark_settings({"master": "local[2]", "query_seconds": 60,
    ...                     "conf": {"spark.ui.enabled": False}})
    >>> s.master, s.query_seconds, s.conf
    ('local[2]', 60.0, (('spark.ui.enabled', 'false'),))
    >>> spark_settings(None) is None
    True
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - _KEYS:
        raise DataError(f"[spark] has the keys {', '.join(sorted(_KEYS))}.")
    master = raw.get("master")
    if master is not None and (not isinstance(master, str) or not master):
        raise DataError("[spark] master must be a Spark master URL, e.g. 'local[4]'.")
    app = raw.get("app_name", "dpkit-curator")
    if not isinstance(app, str) or not app:
        raise DataError("[spark] app_name must be a non-empty string.")
    seconds = raw.get("query_seconds", 300.0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise DataError("[spark] query_seconds must be a number of seconds in (0, 86400].")
    if not 0 < seconds <= 86400:
        raise DataError("[spark] query_seconds must be a number of seconds in (0, 86400].")
    conf = raw.get("conf", {})
    if not isinstance(conf, Mapping) or not all(isinstance(k, str) for k in conf):
        raise DataError("[spark.conf] must be a table of Spark settings.")
    pairs = tuple(sorted((str(k), str(v).lower() if isinstance(v, bool) else str(v))
                         for k, v in conf.items()))  # fmt: skip
    return SparkSettings(master, app, float(seconds), pairs)


class SparkJobs:
    """The service process's SparkSession (made on first use) and its queries' job groups."""

    def __init__(self, settings: SparkSettings | None) -> None:
        self.settings = settings
        self._session: Any = None
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        """Whether the service was configured with a ``[spark]`` section."""
        return self.settings is not None

    def session(self) -> Any:
        """The SparkSession, made once per process from the settings."""
        if self.settings is None:
            raise DataError(
                "this service has no [spark] section in its configuration: Spark-backed "
                "datasets cannot be registered or loaded."
            )
        with self._lock:
            if self._session is None:
                try:
                    from pyspark.sql import SparkSession
                except ImportError as exc:  # pragma: no cover - the spark extra installs it
                    raise ImportError(
                        "Spark-backed datasets need PySpark: pip install 'dpkit[spark]'"
                    ) from exc
                builder = SparkSession.builder
                s = self.settings
                # with neither: the process's session as it is (a platform's, a notebook's),
                # or one from spark-defaults.conf and spark-submit's settings
                if s.master is not None:
                    builder = builder.master(s.master).appName(s.app_name)
                for key, value in s.conf:
                    builder = builder.config(key, value)
                self._session = builder.getOrCreate()
            return self._session

    @contextmanager
    def limited(self, what: str) -> Iterator[None]:
        """Run the block's Spark jobs in a job group of their own, cancelled past the limit.

        Raises :class:`QueryTimeoutError` (chaining Spark's error) when the block failed after
        its jobs were cancelled.
        """
        assert self.settings is not None
        limit = self.settings.query_seconds
        sc = self.session().sparkContext
        group = f"dpkit-{uuid.uuid4().hex}"
        sc.setJobGroup(group, f"dpkit query: {what}", interruptOnCancel=True)
        done, fired = threading.Event(), threading.Event()

        def watchdog() -> None:
            if done.wait(limit):
                return
            fired.set()
            _log.warning("a %s query ran past %g s: its Spark jobs are cancelled", what, limit)
            while not done.is_set():  # a query may start a new job after one is cancelled
                sc.cancelJobGroup(group)
                done.wait(_RECANCEL_SECONDS)

        watcher = threading.Thread(target=watchdog, name="dpkit-spark-watchdog", daemon=True)
        watcher.start()
        try:
            yield
        except Exception as exc:
            if fired.is_set():
                raise QueryTimeoutError(
                    f"the query ran past the service's limit of {limit:g} s; its Spark jobs "
                    "were cancelled."
                ) from exc
            raise
        finally:
            done.set()
            watcher.join()
            # this thread's later jobs (another query) are not in this group
            for key in (
                "spark.jobGroup.id",
                "spark.job.description",
                "spark.job.interruptOnCancel",
            ):
                sc.setLocalProperty(key, None)
