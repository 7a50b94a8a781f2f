"""Aggregating reports stored in Spark: support counts summed where the reports are.

An aggregator reads a batch of reports only through its support counts ``(C, n)``, which add up
over batches (:class:`~dpkit.local._oracle.Aggregator`). For reports in a PySpark DataFrame (one
column: an integer per report, or an array of integers per report for the protocols whose
reports are vectors), each partition's Arrow batches are checked and counted on the executors by
the protocol's own ``_validate`` and ``_support`` (dpkit's code, shipped to them), and the
per-partition integer counts are added on the driver: the same counts, hence the same estimate,
as the in-memory path. Nothing is randomized here: the reports are already private.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError

if TYPE_CHECKING:
    from dpkit.local._oracle import FrequencyOracle

__all__ = ["is_spark", "spark_support_counts"]

IntArray = npt.NDArray[np.int64]


def is_spark(data: object) -> bool:
    """Whether ``data`` is a PySpark DataFrame (by type name: pyspark is not imported)."""
    cls = type(data)
    return cls.__name__ == "DataFrame" and cls.__module__.startswith("pyspark.")


def _values(column: Any) -> npt.NDArray[Any]:
    """A batch's reports as the array the in-memory path gets: 1-d, or one row per report."""
    pa = importlib.import_module("pyarrow")
    if column.null_count:
        raise DataError("a report is null.")
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        lengths = np.diff(column.offsets.to_numpy())
        width = int(lengths[0]) if lengths.size else 0
        if np.any(lengths != width):
            raise DataError("vector reports must all have the same length.")
        flat = column.flatten().to_numpy(zero_copy_only=False)
        return np.asarray(flat).reshape(len(column), width)
    return np.asarray(column.to_numpy(zero_copy_only=False))


def _count_partition(oracle: FrequencyOracle) -> Any:  # a picklable closure for the executors
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        pa = importlib.import_module("pyarrow")
        support = np.zeros(oracle.k, dtype=np.int64)
        n = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            values = oracle._validate(_values(batch.column(0)))
            support += oracle._support(values)
            n += int(values.shape[0])
        yield pa.RecordBatch.from_pydict(
            {"support": [support.tolist()], "n": [n]},
            schema=pa.schema([("support", pa.list_(pa.int64())), ("n", pa.int64())]),
        )

    return run


def spark_support_counts(oracle: FrequencyOracle, df: Any) -> tuple[IntArray, int]:
    """``(C, n)`` of the reports in ``df`` (one column), counted by the executors."""
    fields = df.schema.fields
    if len(fields) != 1:
        raise DataError(f"reports in Spark must be one column, not {len(fields)}.")
    try:
        parts = df.mapInArrow(_count_partition(oracle), "support array<long>, n long").collect()
    except Exception as exc:
        raise DataError(
            f"the Spark job counting the reports failed ({type(exc).__name__}): a report is "
            "malformed, or the input cannot be read; nothing was added (Spark's own message "
            "is not repeated)."
        ) from None
    support = np.zeros(oracle.k, dtype=np.int64)
    n = 0
    for r in parts:
        support += np.asarray(r["support"], dtype=np.int64)
        n += int(r["n"])
    return support, n
