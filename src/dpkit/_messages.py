"""Error messages about data that never quote the data.

A conversion error from NumPy or Python quotes the offending value ("could not convert string to
float: 'salary=91234.5 (alice)'"); passed on, it would put a private record into a log or an
analyst's screen. dpkit re-raises such errors with a message that names the kind of problem only.
"""

from __future__ import annotations

__all__ = ["dtype_name", "not_numeric"]


def not_numeric(name: str, exc: BaseException, wanted: str = "numeric") -> str:
    """A message for a failed numeric conversion of ``name``, naming the problem, not the value.

    >>> "alice" in not_numeric("value", ValueError("could not convert string to float: 'alice'"))
    False
    """
    return (
        f"{name} must be {wanted}: an entry could not be converted to a number "
        f"({type(exc).__name__}: a string or other non-number?); clean the data first."
    )


def dtype_name(dtype: object) -> str:
    """A dtype's name without the sizes of fixed-width text (``<U22`` is the longest record's
    length, a fact about the data): ``str`` and ``bytes`` instead.

    >>> import numpy as np
    >>> dtype_name(np.array(["salary=91234.5 (alice)"]).dtype), dtype_name(np.dtype("f8"))
    ('str', 'float64')
    """
    kind = getattr(dtype, "kind", "")
    return {"U": "str", "S": "bytes"}.get(kind, str(dtype))
