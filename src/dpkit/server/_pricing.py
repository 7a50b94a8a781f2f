"""Pricing queries off the event loop, with a bound on the time a request may wait for its price.

Validating and pricing a query (:meth:`QueryRegistry.prepare`: the entry's checks, then a probe
run on the dummy table) is deterministic in the request and the public schema, and remembered
per dummy table and canonical request (keyed by the request's exact JSON text, so ``-0.0`` and
``0.0``, or ``1`` and ``1.0``, are different requests). A remembered price is a lookup and may
be used anywhere, the event loop included; anything else runs here:

* in a small pool of pricing threads (``threads``), never on the event loop, so one analyst's
  expensive pricings (a mean with δ > 0 calibrates its noise in about a second) cannot hold up
  other requests, free dry runs included;
* one analyst's pricings one after the other (a queue per analyst, at most ``max_queued``
  waiting), so one analyst uses at most one pricing thread whatever they send;
* an analyst's identical requests priced at the same time share one pricing;
* a request that is not priced within ``limit`` seconds (``max_pricing_seconds``) is refused
  with :class:`PricingBusyError` (HTTP 503), before anything is charged. Its pricing still
  runs in its turn and is remembered, so the same request sent again is answered at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from dpkit.errors import DPKitError

__all__ = ["NotPriced", "PricingBusyError", "PricingGate", "here", "not_on_the_loop"]

T = TypeVar("T")


class PricingBusyError(DPKitError):
    """A query could not be priced in time, or too many are waiting (HTTP 503); nothing was
    charged."""


class NotPriced(Exception):
    """The request's price is not remembered (raised on the event loop: price it elsewhere)."""


def not_on_the_loop(make: Callable[[], T]) -> T:
    """The pricer of the event loop: only remembered prices, :class:`NotPriced` otherwise."""
    raise NotPriced


def here(make: Callable[[], T]) -> T:
    """The pricer of a pricing thread: price it now, in this thread."""
    return make()


class PricingGate:
    """Pricing threads with a queue per analyst and a time limit per request (see the module).

    Examples
    --------
    >>> gate = PricingGate(limit=5.0)
    >>> gate.price("ana", ("k", 1), lambda: 42)
    42
    >>> gate.close()
    """

    def __init__(self, *, limit: float, threads: int = 2, max_queued: int = 64) -> None:
        self._limit = limit
        self._threads = threads
        self._max_queued = max_queued
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._queues: dict[str, deque[tuple[Hashable, Callable[[], Any], Future[Any]]]] = {}
        self._flights: dict[Hashable, Future[Any]] = {}

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="dpkit-pricing")
        return self._pool

    def submit(self, analyst: str, key: Hashable, make: Callable[[], T]) -> Future[T]:
        """Queue ``make()`` (a pricing) for ``analyst``; an identical one in flight is shared."""
        key = (analyst, key)
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None:
                return flight
            queue = self._queues.setdefault(analyst, deque())
            if len(queue) >= self._max_queued:
                raise PricingBusyError(
                    "too many of your queries are waiting to be priced; nothing was charged. "
                    "Send fewer at once, or retry in a moment."
                )
            fut: Future[T] = Future()
            queue.append((key, make, fut))
            self._flights[key] = fut
            if len(queue) == 1:
                self._executor().submit(self._run, analyst)
        return fut

    def _run(self, analyst: str) -> None:
        with self._lock:
            key, make, fut = self._queues[analyst][0]
        try:
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(make())
                except BaseException as exc:
                    fut.set_exception(exc)
        finally:
            with self._lock:
                queue = self._queues[analyst]
                queue.popleft()
                if self._flights.get(key) is fut:
                    del self._flights[key]
                if queue:
                    self._executor().submit(self._run, analyst)
                else:
                    del self._queues[analyst]

    def _late(self) -> PricingBusyError:
        return PricingBusyError(
            f"this query could not be priced within {self._limit:g} s (max_pricing_seconds); "
            "nothing was charged. Try again in a moment: a price once computed is remembered."
        )

    def price(self, analyst: str, key: Hashable, make: Callable[[], T]) -> T:
        """``make()`` run by the pricing threads; :class:`PricingBusyError` past the limit."""
        fut = self.submit(analyst, key, make)
        try:
            return fut.result(timeout=self._limit)
        except TimeoutError:
            raise self._late() from None  # its pricing runs in its turn (others may share it)

    async def price_async(self, analyst: str, key: Hashable, make: Callable[[], T]) -> T:
        """:meth:`price` for a coroutine: the event loop waits, the pricing threads work."""
        fut = self.submit(analyst, key, make)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), self._limit)
        except TimeoutError:
            raise self._late() from None

    def close(self) -> None:
        """Stop the pricing threads (queued pricings are dropped)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
