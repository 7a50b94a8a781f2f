"""Polars as an optional dependency: lazy import with an install hint, input conversion."""

from __future__ import annotations

import importlib
from typing import Any

from dpkit.errors import DataError

__all__ = ["as_lazy", "is_spark", "polars"]

_HINT = "dpkit.frame needs Polars: pip install 'dpkit[frame]'"


def polars() -> Any:
    """The ``polars`` module, or an ImportError that says how to install it."""
    try:
        return importlib.import_module("polars")
    except ImportError as exc:  # pragma: no cover - the test environment has polars
        raise ImportError(_HINT) from exc


def is_spark(data: object) -> bool:
    """Whether ``data`` is a PySpark DataFrame (checked by type name: pyspark is not imported)."""
    cls = type(data)
    return cls.__name__ == "DataFrame" and cls.__module__.startswith("pyspark.")


def as_lazy(data: object, name: str = "data") -> Any:
    """A Polars LazyFrame from a Polars LazyFrame/DataFrame or a pandas DataFrame."""
    pl = polars()
    if isinstance(data, pl.LazyFrame):
        return data
    if isinstance(data, pl.DataFrame):
        return data.lazy()
    mod = type(data).__module__
    if mod.split(".")[0] == "pandas" and type(data).__name__ == "DataFrame":
        # Converted once; the index is not data (a privacy unit must be a column).
        try:
            return pl.from_pandas(data, include_index=False).lazy()
        except Exception as exc:  # Arrow's message quotes the offending value: not echoed
            raise DataError(
                f"{name} (pandas) could not be converted to Polars ({type(exc).__name__}): a "
                "column mixes types (e.g. str and numbers in an object column); give each "
                "column one type."
            ) from None
    raise DataError(
        f"{name} must be a Polars LazyFrame or DataFrame, a pandas DataFrame or (for the Spark "
        f"engine) a PySpark DataFrame; got {type(data).__name__}."
    )
