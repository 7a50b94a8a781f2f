"""Per-table memos of deterministic, noise-free results (exact aggregates, verified prices).

A curator answers many queries on the same data. The part of an answer that draws no noise (the
exact clamped sum and record count of a column, say) is a deterministic function of the table and
of public parameters, so computing it once and re-using it changes no guarantee: every answer
still draws its own fresh noise and is charged as before (Dwork, McSherry, Nissim & Smith 2006; the
privacy of a release comes from its noise, not from recomputing the statistic). A memo belongs to
one :class:`~dpkit.server._schema.Table` object, so a re-registered dataset (a new table) starts
with an empty memo and can never be answered from an old one's aggregates.

What a memo changes is *time*: an answer from a memo is faster than the first one, whose time
grows with the number of rows (documented in ``docs/server.md``, threat model).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["Memo"]

T = TypeVar("T")


class Memo:
    """A bounded, thread-safe least-recently-used map from public keys to computed values.

    Only values that are deterministic functions of the table and the key may be stored: the
    memo never holds noise. ``size`` bounds the memory an analyst can make it use by sending
    many different public parameters (e.g. bounds).

    Examples
    --------
    >>> from dpkit.server._memo import Memo
    >>> m = Memo(size=2)
    >>> m.get(("sum", "age"), lambda: 42)
    42
    >>> m.get(("sum", "age"), lambda: 0)   # computed once
    42
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value stored under ``key``, computing it with ``make()`` on a miss.

        ``make`` runs outside the lock (two threads may both compute a missing value; both get
        the same deterministic result). An exception from ``make`` stores nothing.
        """
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                out: T = self._items[key]
                return out
        value = make()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value

    def peek(self, key: Hashable) -> Any:
        """The value stored under ``key``, or ``None`` (does not compute anything)."""
        with self._lock:
            return self._items.get(key)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
