"""Error messages about data that never quote the data.

A conversion error from NumPy or Python quotes the offending value ("could not convert string to
float: 'salary=91234.5 (alice)'"); passed on, it would put a private record into a log or an
analyst's screen. dpkit re-raises such errors with a message that names the kind of problem only.
"""

from __future__ import annotations

__all__ = ["not_numeric"]


def not_numeric(name: str, exc: BaseException, wanted: str = "numeric") -> str:
    """A message for a failed numeric conversion of ``name``, naming the problem, not the value.

    >>> "alice" in not_numeric("value", ValueError("could not convert string to float: 'alice'"))
    False
    """
    return (
        f"{name} must be {wanted}: an entry could not be converted to a number "
        f"({type(exc).__name__}: a string or other non-number?); clean the data first."
    )
