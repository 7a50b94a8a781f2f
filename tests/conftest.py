"""Fixtures shared by every test directory: Spark sessions (see ``spark_sessions.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark_sessions() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from spark_sessions import Sessions

    sessions = Sessions()
    yield sessions
    sessions.close()


@pytest.fixture
def spark(spark_sessions: Any) -> Any:
    """A local-mode SparkSession (``local[2]``), shared by the whole test run."""
    return spark_sessions.get("local")


@pytest.fixture
def spark_cluster(spark_sessions: Any) -> Any:
    """A SparkSession on a real standalone cluster (a master and two workers on loopback),
    started once for the run, with dpkit shipped to the executors as a zip (``addPyFile``)."""
    return spark_sessions.get("cluster")
