"""The curator (Dwork, McSherry, Nissim & Smith 2006): datasets, people, and answering queries under
budgets.

HTTP-free, so that the protocol can be read in one place; :mod:`dpkit.server._app` exposes it.
This module holds the datasets' lifecycle (registration, its crash recovery, loading, the data
lock) and the people; the answering of one query is :mod:`._query_path`'s.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dpkit.errors import DataError
from dpkit.server._auth import Principal, key_id, new_key, verify_key
from dpkit.server._config import ServerConfig
from dpkit.server._default import default_registry
from dpkit.server._files import private_dir, tighten
from dpkit.server._ingest import read_source, resolve_source
from dpkit.server._ledger import Ledger
from dpkit.server._locks import flocked
from dpkit.server._numbers import real
from dpkit.server._outcomes import (
    AuthError,
    ForbiddenError,
    NotFoundError,
    QueryFailedError,
)
from dpkit.server._pricing import PricingGate
from dpkit.server._queries import clamped
from dpkit.server._query_path import QueryPath
from dpkit.server._recovery import Liveness, recover
from dpkit.server._registry import QueryRegistry
from dpkit.server._schema import DatasetSchema, Table, check_name, dummy_table
from dpkit.server._spark_service import SparkDatasets
from dpkit.server._spark_tables import is_spark_table
from dpkit.server._store import READ_ONLY_FILES, load_table, store_table, upgrade_stored

__all__ = ["AuthError", "Curator", "ForbiddenError", "NotFoundError", "QueryFailedError"]

_log = logging.getLogger("dpkit.server")


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
        self.liveness = Liveness(config.data_dir)
        self.ledger.owner = self.liveness.owner  # recorded in each charge (see _recovery)
        self.pricing = PricingGate(limit=config.max_pricing_seconds)
        self.answering = QueryPath(self, config.insecure_seed)
        self.spark = SparkDatasets(config)

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
            tighten(self.config.data_dir, read_only=READ_ONLY_FILES)
            self._finish_interrupted_registrations()
            for ds in self.ledger.datasets():  # stored by an older version: converted once
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
        allowed = {"name", "source", "columns", "privacy_unit", "total_epsilon", "total_delta",
                   "total_rho"}  # fmt: skip
        if not isinstance(spec, Mapping) or set(spec) - allowed:
            raise DataError(f"a dataset registration has the fields {', '.join(sorted(allowed))}.")
        schema = DatasetSchema.from_dict(spec)
        # The cap is the one on analysts' budgets: amounts are stored as 64-bit integers of
        # 1e-12 units, so a larger total would fail in the database (after the data were stored).
        rho = None
        if "total_rho" in spec:  # a total in zCDP (:mod:`._rho`)
            if "total_epsilon" in spec or "total_delta" in spec:
                raise DataError("a dataset's total is total_epsilon (and total_delta) or "
                                "total_rho, not both.")  # fmt: skip
            rho = real(spec.get("total_rho"), "total_rho", low=0, high=1e6, low_open=True,
                       high_open=True)  # fmt: skip
            eps = dlt = 0.0
        else:
            eps = real(spec.get("total_epsilon"), "total_epsilon", low=0, high=1e6,
                       low_open=True, high_open=True)  # fmt: skip
            dlt = real(spec.get("total_delta", 0.0), "total_delta", low=0, high=1,
                       high_open=True)  # fmt: skip
        path = resolve_source(self.config.import_dir, spec.get("source"))
        table = read_source(path, schema)
        # Stored and registered as one step for every process of the service (see _data_lock).
        private_dir(self.config.data_dir)
        store_table(self.config.data_dir, table, source=path)
        del table  # this process too answers from the stored file, mapped, not from a copy
        version = self.ledger.add_dataset(schema.name, schema.to_dict(), eps, dlt, rho=rho)
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

    def loaded(self, name: str) -> tuple[Table, Table, int]:
        """A loaded dataset's table, its dummy and its version, as one (see :meth:`refresh`)."""
        with self._lock:
            return self.tables[name], self.dummies[name], self.versions[name]

    # -- queries (:mod:`._query_path`) ----------------------------------------------------------
    def query(self, who: Principal, body: Any, idem_header: str | None = None) -> dict[str, Any]:
        """Validate, price, charge, compute and store one query (:meth:`QueryPath.query`)."""
        return self.answering.query(who, body, idem_header)

    async def query_async(
        self, who: Principal, body: Any, idem_header: str | None = None
    ) -> dict[str, Any]:
        """:meth:`query` on the service's event loop (:meth:`QueryPath.query_async`)."""
        return await self.answering.query_async(who, body, idem_header)

    def answers_inline(self, body: Any) -> bool:
        """Whether :meth:`query_async` may answer ``body`` on the event loop."""
        return self.answering.answers_inline(body)

    def result(self, who: Principal, cid: object) -> dict[str, Any]:
        """One past answer: analysts see only their own (others' look like missing ones)."""
        return self.answering.result(who, cid)
