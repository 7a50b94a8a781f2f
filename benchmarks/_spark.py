"""The local Spark session the benchmarks share (``local[2]``, no UI, quiet logs)."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_spark() -> Any:
    """A ``local[2]`` SparkSession for timing, or None (with a line saying so) without pyspark."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("skip Spark: pyspark is not installed")
        return None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import this dpkit
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", "4g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
