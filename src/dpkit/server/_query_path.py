"""The curator's query path: validate, price, charge, answer, and replay one query.

:class:`~dpkit.server._service.Curator` holds the datasets (their lifecycle, the data lock) and
the ledger; this module holds what happens to one analyst's request, in the order of the charge
protocol of :mod:`._ledger`: a plan (validated and priced from the request alone, or the free
answer of a dry run or a dummy query), one charge, the computation, its answer stored in the
charge's row, or its failure recorded (refunded only when no noise was drawn). A request under an
idempotency key already used gets the stored answer back, and nothing new is charged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.accounting._budget import quoted
from dpkit.errors import DataError
from dpkit.noise import NoisePool
from dpkit.server._auth import Principal
from dpkit.server._fits import Refusal
from dpkit.server._ledger import Charge, StaleDatasetError
from dpkit.server._outcomes import (
    ForbiddenError,
    NotFoundError,
    QueryFailedError,
    released,
    result_json,
)
from dpkit.server._pricing import NotPriced, here, not_on_the_loop
from dpkit.server._recovery import lost, wait_for_answer, wait_for_answer_async
from dpkit.server._registry import Prepared, meter_of
from dpkit.server._rho import rho_price
from dpkit.server._schema import Table

if TYPE_CHECKING:
    from dpkit.server._service import Curator

__all__ = ["QueryPath"]

_IDEM = re.compile(r"[A-Za-z0-9_.:-]{1,100}")
_TOP = {"dataset", "query", "dry_run", "dummy", "idempotency_key"}
_STALE_RETRIES = 3


class _Failed(Exception):
    """A charged query's computation failed (its cause chained); ``refund``: no noise drawn."""

    def __init__(self, *, refund: bool) -> None:
        super().__init__("the computation failed")
        self.refund = refund


@dataclass(frozen=True)
class _Plan:
    """A validated, priced query, ready to be charged (``charge_args``: of Ledger.reserve)."""

    table: Table
    prepared: Prepared
    alpha: Any
    charge_args: tuple[str, str, dict[str, Any], float | None, float, str | None, int, float | None]


class QueryPath:
    """One curator's answering of queries (the curator's tables, ledger and pricing gate).

    The curator's attributes are read at each call (never copied), so a dataset replaced or
    reloaded meanwhile is seen at once.
    """

    def __init__(self, curator: Curator, seed: int | None) -> None:
        self._cur = curator
        self._lock = threading.Lock()
        self._local = threading.local()
        self._seeds = None if seed is None else np.random.SeedSequence(seed)

    def _rng(self) -> np.random.Generator:
        """This thread's secure generator (the default), or the next seeded one of a demo service.

        The secure generator is a :class:`dpkit.noise.NoisePool`: AES-128 in counter mode keyed
        from the operating system, one per thread for the thread's life (as unpredictable as a
        fresh one per answer, without keying one each time), which keeps the exact samplers'
        spare draws of each noise scale for later answers, each used once (see its module for
        why that is sound). A forked child is re-keyed and starts with no spare noise.
        """
        if self._seeds is None:
            gen: np.random.Generator | None = getattr(self._local, "rng", None)
            if gen is None:
                gen = self._local.rng = NoisePool()
            return gen
        with self._lock:
            return np.random.default_rng(self._seeds.spawn(1)[0])

    def query(self, who: Principal, body: Any, idem_header: str | None = None) -> dict[str, Any]:
        """Validate, price, charge, compute and store one query (see :mod:`._ledger`).

        The charge is taken only if the dataset's version in the ledger is the one loaded here;
        if another worker process replaced it, nothing is charged, the new version is loaded
        and the query is validated and priced again on it (an answer never comes from a
        replaced table).
        """
        for _ in range(_STALE_RETRIES):
            try:
                return self._query(who, body, idem_header)
            except StaleDatasetError:
                self._cur.refresh()
        raise QueryFailedError("the dataset keeps being replaced; nothing was charged, try again.")

    async def query_async(
        self, who: Principal, body: Any, idem_header: str | None = None
    ) -> dict[str, Any]:
        """:meth:`query` on the service's event loop, for requests :meth:`answers_inline` accepts.

        The same steps; the coroutine waits for the ledger's commits on futures instead of a
        worker thread waiting on locks (one thread trip less per query, and the commits' batches
        are led by one writer thread). Only entries declared ``inline`` (cheap to validate and
        price) come here; the computation runs on the loop when the prepared query says it is
        quick on this table (noise on a remembered aggregate), in a worker thread otherwise.
        """
        cur = self._cur
        for _ in range(_STALE_RETRIES):
            try:
                try:  # a remembered price is a lookup; anything else is computed off the loop
                    planned = self._plan(
                        who, body, idem_header, refresh=False, price=not_on_the_loop
                    )
                except NotPriced:
                    planned = await cur.pricing.price_async(
                        who.id, object(), lambda: self._plan(who, body, idem_header, price=here)
                    )
                except DataError:  # refused: ask again off the loop, where the dataset may be
                    # reloaded if another process replaced it (reading files, taking locks)
                    planned = await asyncio.to_thread(self._plan, who, body, idem_header)
                if isinstance(planned, dict):
                    return planned
                charge = await cur.ledger.reserve_async(*planned.charge_args)
                if charge.replayed:
                    if charge.status == "reserved":  # another request is answering it
                        wait = cur.config.idempotency_wait_seconds
                        charge = await wait_for_answer_async(cur.ledger, charge, wait)
                    return self._replay(charge)
                quick = planned.prepared.quick
                try:
                    if quick is not None and quick(planned.table):
                        result = self._computed(planned)
                    else:  # e.g. the first sum on new bounds reads the whole column
                        result = await asyncio.to_thread(self._computed, planned)
                except _Failed as failed:  # the ledger's write for it is made off the loop
                    error = await asyncio.to_thread(self._failure, charge, failed)
                    raise error from failed.__cause__
                await cur.ledger.release_async(charge.id, result)
                return released(charge, result)
            except StaleDatasetError:
                await asyncio.to_thread(cur.refresh)
        raise QueryFailedError("the dataset keeps being replaced; nothing was charged, try again.")

    def answers_inline(self, body: Any) -> bool:
        """Whether :meth:`query_async` may answer ``body`` on the event loop: an ``inline``
        query type, on a dataset loaded in this process, with the embedded SQLite ledger (whose
        reads, e.g. of a key, take microseconds)."""
        cur = self._cur
        return (
            not cur.ledger.postgres
            and isinstance(body, dict)
            and cur.registry.inline(body.get("query"))
            and isinstance(body.get("dataset"), str)
            and body["dataset"] in cur.tables
        )

    def _query(self, who: Principal, body: Any, idem_header: str | None) -> dict[str, Any]:
        planned = self._plan(who, body, idem_header)
        if isinstance(planned, dict):
            return planned
        charge = self._cur.ledger.reserve(*planned.charge_args)
        if charge.replayed:
            return self._replay(charge)
        result = self._answer(planned, charge)
        self._cur.ledger.release(charge.id, result)
        return released(charge, result)

    def _plan(
        self,
        who: Principal,
        body: Any,
        idem_header: str | None,
        *,
        refresh: bool = True,
        price: Callable[[Callable[[], Prepared]], Prepared] | None = None,
    ) -> dict[str, Any] | _Plan:
        """Validate and price a request: a plan to charge, or the answer of a free dry run or
        dummy query (nothing is charged for those). ``refresh=False``: a refusal is raised as
        it is, without first checking whether another process replaced the dataset.

        A price not remembered is computed by ``price(make)``: by default in the pricing
        threads, within ``max_pricing_seconds`` (:mod:`._pricing`)."""
        cur = self._cur
        if who.role != "analyst":
            raise ForbiddenError("queries are sent with an analyst's key, not the admin's.")
        if not isinstance(body, dict):
            raise DataError("the request body must be a JSON object.")
        dry, dummy = body.get("dry_run", False), body.get("dummy", False)
        if not isinstance(dry, bool) or not isinstance(dummy, bool):
            raise DataError("dry_run and dummy must be true or false.")
        idem = body.get("idempotency_key", idem_header)
        if idem is not None and (not isinstance(idem, str) or not _IDEM.fullmatch(idem)):
            raise DataError("an idempotency key is 1 to 100 of A-Z a-z 0-9 _ . : -")
        schema = cur.schema(body.get("dataset"))
        table, dummy_tab, version = cur.loaded(schema.name)
        schema = table.schema
        params = {k: v for k, v in body.items() if k not in _TOP}
        name = body.get("query")
        try:
            key, known = cur.registry.cached(name, params, dummy_tab)
            if known is not None:
                prepared = known
            else:

                def make() -> Prepared:
                    return cur.registry.prepare(name, params, schema, dummy_tab)

                if price is None:
                    flight = None if key is None else ("prepare", id(dummy_tab), key)
                    prepared = cur.pricing.price(who.id, flight or object(), make)
                else:
                    prepared = price(make)
        except DataError:
            if not refresh:
                raise
            # Refused on a schema that another process may have replaced since: ask again on
            # the ledger's current version if there is a newer one.
            cur.refresh()
            if cur.versions.get(schema.name) != version:
                raise StaleDatasetError("the dataset was replaced.") from None
            raise
        request = {k: v for k, v in body.items() if k not in ("idempotency_key", "dry_run")}
        # the price in ρ paid by budgets declared in ρ (None: an (ε, δ > 0) price, which they
        # refuse), and the (ε, δ) price paid by the others (None: asked in ρ without a δ)
        rho = rho_price(prepared.epsilon, prepared.delta, prepared.rho)
        eps_price = None if prepared.rho_only else prepared.epsilon
        if dry:
            # the quote is what the ledger would charge: the price in its units, shown back
            eps = None if eps_price is None else quoted(eps_price)
            quote = {"dry_run": True, "query": name, "dataset": schema.name,
                     "epsilon": eps, "delta": quoted(prepared.delta),
                     "rho": None if rho is None else quoted(rho)}  # fmt: skip
            if prepared.half_width is not None:
                # the noise half-width at the request's alpha, from public parameters only
                quote["accuracy"] = {"alpha": params.get("alpha", 0.05),
                                     "half_width": prepared.half_width}  # fmt: skip
            # what a real request would meet now, by the charge's own arithmetic (nothing is
            # charged; the analyst's own budget, and only whether the shared total would run out)
            refused = cur.ledger.refusal(who.id, schema.name, eps_price, prepared.delta, rho)
            if refused is not None:
                quote["would_be_refused"] = _would(refused)
            return quote
        if dummy:
            answer = prepared.compute(dummy_tab, None, meter_of(prepared))
            return {"dummy": True, "query": name, "dataset": schema.name, "epsilon": 0.0,
                    "delta": 0.0, "value": answer.value, "ci": answer.ci,
                    "alpha": params.get("alpha", 0.05), "labels": answer.labels}  # fmt: skip
        args = (who.id, schema.name, request, eps_price, prepared.delta, idem, version, rho)
        return _Plan(table, prepared, params.get("alpha", 0.05), args)

    def _answer(self, planned: _Plan, charge: Charge) -> dict[str, Any]:
        """Compute a charged query; if it fails, mark the charge failed (refunded if no noise
        was drawn) and raise :class:`QueryFailedError`."""
        try:
            return self._computed(planned)
        except _Failed as failed:
            raise self._failure(charge, failed) from failed.__cause__

    def _computed(self, planned: _Plan) -> dict[str, Any]:
        """The answer of a charged query, or :class:`_Failed` (no ledger write here)."""
        prepared = planned.prepared
        meter = meter_of(prepared)
        try:
            # (a Spark-backed table: the computation's jobs in a group of their own, cancelled
            # past the service's limit; any other table is handed over as it is)
            with self._cur.spark.computing(planned.table, prepared.statistic) as table:
                answer = prepared.compute(table, self._rng(), meter)
        except Exception as exc:
            raise _Failed(refund=not meter.charged) from exc
        return {"value": answer.value, "ci": answer.ci, "alpha": planned.alpha,
                "labels": None if answer.labels is None else list(answer.labels)}  # fmt: skip

    def _failure(self, charge: Charge, failed: _Failed) -> QueryFailedError:
        """Record a computation that failed after its charge; the error to raise."""
        self._cur.ledger.fail(charge.id, refund=failed.refund)
        how = "no noise was drawn, so it was refunded." if failed.refund else "it stays charged."
        return QueryFailedError(
            f"the query failed after it was charged (charge {charge.id}); {how}"
        )

    def _replay(self, charge: Charge) -> dict[str, Any]:
        """The stored answer of an idempotency key's charge (nothing new is charged).

        A charge still ``reserved`` is being answered by another request: this one waits for
        its answer, at most ``idempotency_wait_seconds`` (then HTTP 409, :mod:`._recovery`).
        """
        cur = self._cur
        if charge.status == "reserved":
            charge = wait_for_answer(cur.ledger, charge, cur.config.idempotency_wait_seconds)
        if charge.status == "released":
            return result_json(dataclasses.replace(charge, replayed=True))
        if charge.status == "lost":
            raise lost(charge)
        raise QueryFailedError(
            f"this idempotency key's query (charge {charge.id}) is {charge.status}: "
            "it has no answer."
        )

    def result(self, who: Principal, cid: object) -> dict[str, Any]:
        """One past answer: analysts see only their own (others' look like missing ones)."""
        if not isinstance(cid, str) or not re.fullmatch(r"[0-9a-f]{24}", cid):
            raise NotFoundError("no result with that id.")
        charge = self._cur.ledger.charge(cid)
        if charge is None or (who.role != "admin" and charge.analyst != who.id):
            raise NotFoundError("no result with that id.")
        return result_json(charge)


def _would(refused: Refusal) -> dict[str, Any]:
    """A dry run's warning: the line to show and the resources that run out."""
    out: dict[str, Any] = {"message": refused.would()}
    if refused.short:
        out["exhausted"] = [r for r, _, _ in refused.short]
        out["remaining"] = {r: left for r, _, left in refused.short}
        out["price"] = {r: p for r, p, _ in refused.short}
    else:
        out["exhausted"] = [] if refused.shared is None else [f"dataset total {refused.shared}"]
    return out
