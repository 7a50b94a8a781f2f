"""What the curator does with Spark-backed datasets, in the few places it differs: registering,
loading, and running a query's computation under the service's Spark time limit.

:class:`dpkit.server._service.Curator` calls these hooks; the ledger's protocol is unchanged
(validate and price on the public dummy, charge, compute, release; a computation that fails
after its charge, a cancelled Spark job included, is refunded when no noise was drawn).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dpkit.errors import DataError
from dpkit.server._config import ServerConfig
from dpkit.server._numbers import real
from dpkit.server._schema import DatasetSchema, Table
from dpkit.server._spark_jobs import SparkJobs
from dpkit.server._spark_tables import (
    is_spark_folder,
    is_spark_table,
    load_spark_table,
    query_view,
    store_spark_source,
)

__all__ = ["SparkDatasets"]

_FIELDS = {"name", "spark", "columns", "privacy_unit", "total_epsilon", "total_delta"}


def _on_the_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class SparkDatasets:
    """The service's Spark-backed datasets (the session is made when the first one is used)."""

    def __init__(self, config: ServerConfig) -> None:
        self.data_dir = config.data_dir
        self.import_dir = config.import_dir
        self.jobs = SparkJobs(config.spark)

    @staticmethod
    def wanted(spec: object) -> bool:
        """Whether a registration asks for a Spark-backed dataset (``"spark"`` for a source)."""
        return isinstance(spec, Mapping) and "spark" in spec

    def register(
        self,
        spec: Mapping[str, Any],
        add: Callable[[str, dict[str, Any], float, float], int],
        install: Callable[[Table, int], None],
    ) -> dict[str, Any]:
        """Check and store a Spark-backed registration, record it (``add``: the ledger's
        ``add_dataset``) and load it (``install``); under the data directory's lock."""
        if set(spec) - _FIELDS:
            fields = ", ".join(sorted(_FIELDS))
            raise DataError(f"a Spark dataset registration has the fields {fields}.")
        eps = real(spec.get("total_epsilon"), "total_epsilon", low=0, high=1e6, low_open=True,
                   high_open=True)  # fmt: skip
        dlt = real(spec.get("total_delta", 0.0), "total_delta", low=0, high=1, high_open=True)
        if not self.jobs.configured:
            self.jobs.session()  # refuses, naming the missing [spark] section
        schema = store_spark_source(self.jobs, self.data_dir, self.import_dir, spec)
        version = add(schema.name, schema.to_dict(), eps, dlt)
        install(self.load(schema), version)
        return schema.to_dict()

    def backs(self, name: str) -> bool:
        """Whether the stored dataset ``name`` is Spark-backed."""
        return is_spark_folder(self.data_dir, name)

    def load(self, schema: DatasetSchema) -> Table:
        """A Spark-backed dataset's lazy table (:class:`DataError`: out of service)."""
        return load_spark_table(self.jobs, self.data_dir, schema)

    @contextmanager
    def computing(self, table: Table, statistic: str) -> Iterator[Table]:
        """The table a query computes on; on a Spark-backed one, its jobs run in a job group of
        their own, cancelled past the service's ``query_seconds``."""
        if not is_spark_table(table) or _on_the_loop():
            # On the event loop the service runs only what it judged quick (noise on a
            # remembered aggregate: no Spark job), and the loop makes no call to the JVM.
            yield table
            return
        with self.jobs.limited(statistic):
            yield query_view(table, statistic)
