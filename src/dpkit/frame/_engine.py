"""Polars as an optional dependency: lazy import with an install hint, input conversion."""

from __future__ import annotations

import importlib
import math
from decimal import Decimal
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
            if name == "data":
                return _private_pandas(data)
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


def _text(value: object) -> str | None:
    """An object column's value as text; None for a missing one (None, NaN, NA, NaT) or one
    without a text form (a ``__str__`` that fails, an int too long for ``str``)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Decimal) and value.is_nan():
        return None
    try:
        return str(value)
    except Exception:  # a value that has no text is missing, like None
        return None


def _private_pandas(data: Any) -> Any:
    """The private table from pandas, every column's Polars type chosen by its pandas dtype.

    Arrow infers an ``object`` column's type from its values: one record holding a string, a
    Decimal, a list or an int beyond 64 bits among numbers made the conversion fail (or changed
    the column's type), so whether the query could be made depended on that record. An object
    column is text here, whatever it holds (give numeric columns a numeric dtype).
    """
    pl = polars()
    objects = [c for c, t in data.dtypes.items() if str(t) == "object"]  # not pandas str
    rest = data.drop(columns=objects) if objects else data
    frame = pl.from_pandas(rest, include_index=False)
    if not objects:
        return frame.lazy()
    text = {
        str(c): pl.Series(str(c), [_text(v) for v in data[c]], dtype=pl.String) for c in objects
    }
    columns = [text[str(c)] if str(c) in text else frame[str(c)] for c in data.columns]
    return pl.DataFrame(columns).lazy()
