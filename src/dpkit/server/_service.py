"""The curator (Dwork, McSherry, Nissim & Smith 2006): datasets, people, and answering queries under
budgets.

HTTP-free, so that the protocol can be read in one place; :mod:`dpkit.server._app` exposes it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit.accounting._budget import quoted
from dpkit.errors import DataError
from dpkit.noise import NoisePool
from dpkit.server._auth import Principal, key_id, new_key, verify_key
from dpkit.server._config import ServerConfig
from dpkit.server._default import default_registry
from dpkit.server._files import private_dir, tighten
from dpkit.server._ingest import read_source, resolve_source
from dpkit.server._ledger import Charge, Ledger, StaleDatasetError
from dpkit.server._locks import flocked
from dpkit.server._numbers import real
from dpkit.server._outcomes import (
    AuthError,
    ForbiddenError,
    NotFoundError,
    QueryFailedError,
    released,
    result_json,
)
from dpkit.server._pricing import NotPriced, PricingGate, here, not_on_the_loop
from dpkit.server._queries import clamped
from dpkit.server._recovery import Liveness, lost, recover, wait_for_answer, wait_for_answer_async
from dpkit.server._registry import Meter, Prepared, QueryRegistry
from dpkit.server._schema import DatasetSchema, Table, check_name, dummy_table
from dpkit.server._spark_service import SparkDatasets
from dpkit.server._spark_tables import is_spark_table
from dpkit.server._store import DATA_FILE, load_table, store_table, upgrade_stored

__all__ = ["AuthError", "Curator", "ForbiddenError", "NotFoundError", "QueryFailedError"]

_IDEM = re.compile(r"[A-Za-z0-9_.:-]{1,100}")
_TOP = {"dataset", "query", "dry_run", "dummy", "idempotency_key"}
_STALE_RETRIES = 3
_log = logging.getLogger("dpkit.server")


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
    charge_args: tuple[str, str, dict[str, Any], float, float, str | None, int]


class Curator:
    """The service's state: ledger, registry, cleaned tables and their dummies."""

    def __init__(self, config: ServerConfig, registry: QueryRegistry | None = None) -> None:
        self.config = config
        self.registry = registry or default_registry(max_synthetic_rows=config.max_synthetic_rows)
        self.ledger = Ledger(config.ledger, background_checkpoints=True)
        self.tables: dict[str, Table] = {}
        self.dummies: dict[str, Table] = {}
        self.versions: dict[str, int] = {}
        self.refused: dict[str, int] = {}
        """Datasets whose stored file failed its check when mapped, with the ledger's version."""
        self._lock = threading.Lock()
        self._local = threading.local()
        self.liveness = Liveness(config.data_dir)
        self.ledger.owner = self.liveness.owner  # recorded in each charge (see _recovery)
        self.pricing = PricingGate(limit=config.max_pricing_seconds)
        seed = config.insecure_seed
        self._seeds = None if seed is None else np.random.SeedSequence(seed)
        self.spark = SparkDatasets(config)

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

    @contextmanager
    def _data_lock(self, exclusive: bool) -> Iterator[None]:
        """The data directory's lock, shared by every process of the service (``workers``).

        Registering (writing a dataset's files, then its ledger row) holds it exclusively;
        loading (reading the ledger's row, then the files) holds it shared, so a worker never
        loads files of one version under the ledger's version of another.
        """
        private_dir(self.config.data_dir)
        with flocked(self.config.data_dir / ".dpkit.lock", exclusive=exclusive):
            yield

    def start(self) -> None:
        """Migrate the ledger, install the admin key, register configured datasets, load all.

        Safe when several worker processes start at once over the same ledger and data: the
        migrations take the ledger's write lock, and the configured datasets are registered
        under the data directory's lock by whichever worker comes first (once). The charges a
        crash left ``reserved`` by processes that are gone are marked ``lost`` first
        (:mod:`._recovery`): all of them if no other process of the service runs.
        """
        self.ledger.migrate()
        recover(self.liveness, self.ledger, lambda: self._data_lock(exclusive=True))
        h = self.config.admin_key_hash
        if h is not None:
            # The configured hash is the admin's key: a new one replaces (revokes) the stored one.
            stored = self.ledger.principal("admin")
            if stored is None:
                try:
                    self.ledger.add_principal("admin", "admin", "admin", h)
                except DataError:  # another worker of this service added it first
                    if (row := self.ledger.principal("admin")) is None or row[3] != h:
                        raise
            elif stored[3] != h:
                self.ledger.set_key_hash("admin", h)
        with self._data_lock(exclusive=True):
            # the files of an older installation (made under a umask of 022) become private too
            tighten(self.config.data_dir, read_only={DATA_FILE})
            self._finish_interrupted_registrations()
            for ds in self.ledger.datasets():  # stored by an older version: one file now
                upgrade_stored(self.config.data_dir, DatasetSchema.from_dict(ds["schema"]))
        if self.config.datasets:
            with self._data_lock(exclusive=True):
                known = {ds["name"] for ds in self.ledger.datasets()}
                for spec in self.config.datasets:
                    name = spec.get("name")
                    if (
                        name not in known
                        or not (self.config.data_dir / str(name) / "schema.json").exists()
                    ):
                        self._register(dict(spec))
        self.refresh()

    def close(self) -> None:
        """Stop serving: the ledger's background checkpoints (after a last one), this process's
        liveness lock, the pricing threads, and every ledger connection. Call it when no request
        is in flight (the service does, when it stops)."""
        self.ledger.stop_checkpoints()
        self.liveness.close()
        self.pricing.close()
        self.ledger.close()

    def _finish_interrupted_registrations(self) -> None:
        """Complete a registration whose process was killed between its steps (under the lock).

        :func:`store_table` writes ``.name.tmp``, moves the folder aside to ``.name.old``, moves
        the new one in, deletes the old; then the ledger row is updated. A process killed in
        between leaves no folder, a stale ``.old`` (which would refuse every later registration
        of the name), or new files under the ledger's old schema (which no worker could load,
        or would load under the wrong schema). The new files are complete once they are moved
        (``schema.json`` is written last), so the registration is rolled forward: the ledger
        takes their schema and a new version, and every worker reloads.
        """
        data = self.config.data_dir
        for ds in self.ledger.datasets():
            name = ds["name"]
            folder, tmp, old = data / name, data / f".{name}.tmp", data / f".{name}.old"
            if not folder.exists():
                if (tmp / "schema.json").exists():
                    os.replace(tmp, folder)
                elif (old / "schema.json").exists():
                    os.replace(old, folder)
            for leftover in (tmp, old):
                if leftover.exists():
                    shutil.rmtree(leftover)
            stored = folder / "schema.json"
            if stored.exists():
                schema = json.loads(stored.read_text())
                if schema != ds["schema"]:
                    self.ledger.add_dataset(name, schema, ds["total_epsilon"], ds["total_delta"])

    def refresh(self) -> None:
        """Load every dataset whose ledger version differs from the one loaded here.

        Another worker process may have registered or replaced a dataset; this process learns
        of it here (called on a miss, on a version conflict, and when datasets are listed).
        """
        with self._data_lock(exclusive=False):
            for ds in self.ledger.datasets():
                name, version = ds["name"], ds["version"]
                if self.versions.get(name) == version or self.refused.get(name) == version:
                    continue
                schema = DatasetSchema.from_dict(ds["schema"])
                try:
                    if self.spark.backs(name):
                        table = self.spark.load(schema)
                    else:
                        table = load_table(self.config.data_dir, schema)
                except DataError as exc:
                    # This dataset only is out of service (not the whole service): no answer
                    # comes from a file that is not the one registered, nor from the version
                    # it replaced. The admin registers it again (a new version).
                    _log.error("dataset %s (version %d) not loaded: %s", name, version, exc)
                    with self._lock:
                        self.refused[name] = version
                        for held in (self.tables, self.dummies, self.versions):
                            held.pop(name, None)
                    continue
                self._install(table, version)

    def _install(self, table: Table, version: int) -> None:
        name = table.schema.name
        # The aggregate of the declared bounds, ready for queries; only row-unit datasets answer
        # the row-level sum and mean that use it.
        if table.schema.privacy_unit == "row" and not is_spark_table(table):  # Spark: on use
            for col in table.schema.columns:
                if col.bounds is not None:
                    clamped(table, col.name, col.bounds)
        with self._lock:
            self.tables[name] = table
            self.dummies[name] = dummy_table(table.schema, self.config.dummy_rows)
            self.versions[name] = version
            self.refused.pop(name, None)

    # -- people ---------------------------------------------------------------------------------
    def authenticate(self, key: str | None) -> Principal:
        """The principal holding ``key``; :class:`AuthError` otherwise (same message for all)."""
        pid = key_id(key) if key else None
        row = self.ledger.principal(pid) if pid else None
        if key is None or not verify_key(key, row[3] if row else None) or row is None:
            raise AuthError("missing or invalid API key; send it as 'Authorization: Bearer <key>'.")
        return Principal(row[0], row[1], row[2])

    def add_analyst(self, name: object) -> dict[str, str]:
        """Create an analyst; the key is returned once and stored only hashed."""
        check_name(name, "analyst name")
        pid, key, h = new_key()
        self.ledger.add_principal(pid, str(name), "analyst", h)
        return {"id": pid, "name": str(name), "key": key}

    def new_analyst_key(self, pid: object) -> dict[str, str]:
        """Replace an analyst's key (e.g. after a leak): the old key stops working at once."""
        row = self.ledger.principal(pid) if isinstance(pid, str) else None
        if row is None or row[2] != "analyst":
            raise NotFoundError("no analyst with that id.")
        _, key, h = new_key(row[0])
        self.ledger.set_key_hash(row[0], h)
        return {"id": row[0], "name": row[1], "key": key}

    # -- datasets -------------------------------------------------------------------------------
    def register_dataset(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Read, clean, store and register a dataset from the import directory (admin only)."""
        with self._data_lock(exclusive=True):
            return self._register(spec)

    def _register(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        if self.spark.wanted(spec):
            return self.spark.register(spec, self.ledger.add_dataset, self._install)
        allowed = {"name", "source", "columns", "privacy_unit", "total_epsilon", "total_delta"}
        if not isinstance(spec, Mapping) or set(spec) - allowed:
            raise DataError(f"a dataset registration has the fields {', '.join(sorted(allowed))}.")
        schema = DatasetSchema.from_dict(spec)
        # The cap is the one on analysts' budgets: amounts are stored as 64-bit integers of
        # 1e-12 units, so a larger total would fail in the database (after the data were stored).
        eps = real(spec.get("total_epsilon"), "total_epsilon", low=0, high=1e6, low_open=True,
                   high_open=True)  # fmt: skip
        dlt = real(spec.get("total_delta", 0.0), "total_delta", low=0, high=1, high_open=True)
        path = resolve_source(self.config.import_dir, spec.get("source"))
        table = read_source(path, schema)
        # Stored and registered as one step for every process of the service (see _data_lock).
        private_dir(self.config.data_dir)
        store_table(self.config.data_dir, table, source=path)
        del table  # this process too answers from the stored file, mapped, not from a copy
        version = self.ledger.add_dataset(schema.name, schema.to_dict(), eps, dlt)
        self._install(load_table(self.config.data_dir, schema), version)
        return schema.to_dict()

    def schema(self, name: object) -> DatasetSchema:
        """A dataset's public schema; :class:`NotFoundError` if there is none."""
        check_name(name, "dataset")
        table = self.tables.get(str(name))
        if table is None:  # perhaps registered through another worker process since
            self.refresh()
            table = self.tables.get(str(name))
        if table is None and str(name) in self.refused:
            raise QueryFailedError(
                "this dataset's stored file failed its integrity check, so it is not answered; "
                "nothing was charged. The admin must register it again."
            )
        if table is None:
            raise NotFoundError("no dataset of that name; GET /v1/datasets lists them.")
        return table.schema

    # -- queries --------------------------------------------------------------------------------
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
                self.refresh()
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
        for _ in range(_STALE_RETRIES):
            try:
                try:  # a remembered price is a lookup; anything else is computed off the loop
                    planned = self._plan(
                        who, body, idem_header, refresh=False, price=not_on_the_loop
                    )
                except NotPriced:
                    planned = await self.pricing.price_async(
                        who.id, object(), lambda: self._plan(who, body, idem_header, price=here)
                    )
                except DataError:  # refused: ask again off the loop, where the dataset may be
                    # reloaded if another process replaced it (reading files, taking locks)
                    planned = await asyncio.to_thread(self._plan, who, body, idem_header)
                if isinstance(planned, dict):
                    return planned
                charge = await self.ledger.reserve_async(*planned.charge_args)
                if charge.replayed:
                    if charge.status == "reserved":  # another request is answering it
                        wait = self.config.idempotency_wait_seconds
                        charge = await wait_for_answer_async(self.ledger, charge, wait)
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
                await self.ledger.release_async(charge.id, result)
                return released(charge, result)
            except StaleDatasetError:
                await asyncio.to_thread(self.refresh)
        raise QueryFailedError("the dataset keeps being replaced; nothing was charged, try again.")

    def answers_inline(self, body: Any) -> bool:
        """Whether :meth:`query_async` may answer ``body`` on the event loop: an ``inline``
        query type, on a dataset loaded in this process, with the embedded SQLite ledger (whose
        reads, e.g. of a key, take microseconds)."""
        return (
            not self.ledger.postgres
            and isinstance(body, dict)
            and self.registry.inline(body.get("query"))
            and isinstance(body.get("dataset"), str)
            and body["dataset"] in self.tables
        )

    def _query(self, who: Principal, body: Any, idem_header: str | None) -> dict[str, Any]:
        planned = self._plan(who, body, idem_header)
        if isinstance(planned, dict):
            return planned
        charge = self.ledger.reserve(*planned.charge_args)
        if charge.replayed:
            return self._replay(charge)
        result = self._answer(planned, charge)
        self.ledger.release(charge.id, result)
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
        schema = self.schema(body.get("dataset"))
        with self._lock:  # the table, its dummy and its version as one (see refresh)
            table, dummy_tab = self.tables[schema.name], self.dummies[schema.name]
            version = self.versions[schema.name]
        schema = table.schema
        params = {k: v for k, v in body.items() if k not in _TOP}
        name = body.get("query")
        try:
            key, known = self.registry.cached(name, params, dummy_tab)
            if known is not None:
                prepared = known
            else:

                def make() -> Prepared:
                    return self.registry.prepare(name, params, schema, dummy_tab)

                if price is None:
                    flight = None if key is None else ("prepare", id(dummy_tab), key)
                    prepared = self.pricing.price(who.id, flight or object(), make)
                else:
                    prepared = price(make)
        except DataError:
            if not refresh:
                raise
            # Refused on a schema that another process may have replaced since: ask again on
            # the ledger's current version if there is a newer one.
            self.refresh()
            if self.versions.get(schema.name) != version:
                raise StaleDatasetError("the dataset was replaced.") from None
            raise
        request = {k: v for k, v in body.items() if k not in ("idempotency_key", "dry_run")}
        if dry:
            # the quote is what the ledger would charge: the price in its units, shown back
            eps, dlt = quoted(prepared.epsilon), quoted(prepared.delta)
            quote = {"dry_run": True, "query": name, "dataset": schema.name,
                     "epsilon": eps, "delta": dlt}  # fmt: skip
            if prepared.half_width is not None:
                # the noise half-width at the request's alpha, from public parameters only
                quote["accuracy"] = {"alpha": params.get("alpha", 0.05),
                                     "half_width": prepared.half_width}  # fmt: skip
            return quote
        if dummy:
            answer = prepared.compute(dummy_tab, None, Meter(prepared.epsilon, prepared.delta))
            return {"dummy": True, "query": name, "dataset": schema.name, "epsilon": 0.0,
                    "delta": 0.0, "value": answer.value, "ci": answer.ci,
                    "alpha": params.get("alpha", 0.05), "labels": answer.labels}  # fmt: skip
        args = (who.id, schema.name, request, prepared.epsilon, prepared.delta, idem, version)
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
        meter = Meter(prepared.epsilon, prepared.delta)
        try:
            with self.spark.computing(planned.table, prepared.statistic) as table:
                answer = prepared.compute(table, self._rng(), meter)
        except Exception as exc:
            raise _Failed(refund=not meter.charged) from exc
        return {"value": answer.value, "ci": answer.ci, "alpha": planned.alpha,
                "labels": None if answer.labels is None else list(answer.labels)}  # fmt: skip

    def _failure(self, charge: Charge, failed: _Failed) -> QueryFailedError:
        """Record a computation that failed after its charge; the error to raise."""
        self.ledger.fail(charge.id, refund=failed.refund)
        how = "no noise was drawn, so it was refunded." if failed.refund else "it stays charged."
        return QueryFailedError(
            f"the query failed after it was charged (charge {charge.id}); {how}"
        )

    def _replay(self, charge: Charge) -> dict[str, Any]:
        """The stored answer of an idempotency key's charge (nothing new is charged).

        A charge still ``reserved`` is being answered by another request: this one waits for
        its answer, at most ``idempotency_wait_seconds`` (then HTTP 409, :mod:`._recovery`).
        """
        if charge.status == "reserved":
            charge = wait_for_answer(self.ledger, charge, self.config.idempotency_wait_seconds)
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
        charge = self.ledger.charge(cid)
        if charge is None or (who.role != "admin" and charge.analyst != who.id):
            raise NotFoundError("no result with that id.")
        return result_json(charge)
