"""Charges: the ledger's rows of them, and how a batch of requests is charged in a few statements.

Mixed into :class:`dpkit.server._ledger.Ledger`, whose group commit (:mod:`._group`) hands each
batch of queued charges (or answers) to :meth:`ChargeBatches._reserve_many` (or
``_release_many``) in one transaction.
"""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
import sqlite3
import time
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from dpkit.accounting import Neighbouring
from dpkit.accounting._relation import check_relation
from dpkit.errors import DataError, DPKitError, PrivacyParameterError
from dpkit.server._fits import Refusal, check_fits, price_in
from dpkit.server._json import canonical
from dpkit.server._sql import cost_units, from_units

__all__ = [
    "CHARGE_COLUMNS",
    "RELATIONS_TABLE",
    "Ask",
    "Charge",
    "ChargeBatches",
    "NoBudgetError",
    "StaleDatasetError",
    "ask",
    "charge_from_row",
]


class NoBudgetError(DataError):
    """The analyst has no budget on this dataset (or the dataset does not exist)."""


class StaleDatasetError(DPKitError):
    """The dataset's version in the ledger is not the one the caller loaded (it was replaced)."""


@dataclass(frozen=True)
class Charge:
    """One row of the ledger (amounts as floats)."""

    id: str
    analyst: str
    dataset: str
    request: dict[str, Any]
    epsilon: float
    delta: float
    status: str
    result: dict[str, Any] | None
    created: float
    replayed: bool = False
    rho: float | None = None
    """The charge's price in zCDP, paid by ρ budgets (``None``: an (ε, δ > 0) request)."""


@dataclass(frozen=True)
class Ask:
    """A charge asked for (amounts in ledger units, request as canonical JSON).

    ``eu, du``: the (ε, δ) price, paid by (ε, δ) budgets (``eu`` is ``None`` for a ρ request
    without δ, which they cannot pay); ``ru``: the ρ price, paid by ρ budgets (``None`` for an
    (ε, δ > 0) request, which they cannot pay)."""

    analyst: str
    dataset: str
    body: str
    eu: int | None
    du: int
    idem_key: str | None
    version: int | None
    ru: int | None = None
    neighbouring: Neighbouring | None = Neighbouring.ADD_REMOVE
    """The relation the charge's guarantee holds under (None: any, as for an event declaring
    none); the service's queries are all add/remove of one row (:mod:`._queries`)."""


def ask(
    analyst: str,
    dataset: str,
    request: dict[str, Any],
    epsilon: float | None,
    delta: float,
    idem_key: str | None,
    version: int | None,
    *,
    rho: float | None = None,
    neighbouring: Neighbouring | None = Neighbouring.ADD_REMOVE,
) -> Ask:
    if neighbouring is not None and not isinstance(neighbouring, Neighbouring):
        raise PrivacyParameterError(
            "neighbouring must be None, Neighbouring.ADD_REMOVE or Neighbouring.REPLACE."
        )
    body = canonical(request)
    eu = None if epsilon is None else cost_units(epsilon)
    ru = None if rho is None else cost_units(rho)
    return Ask(analyst, dataset, body, eu, cost_units(delta), idem_key, version, ru, neighbouring)


RELATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS dataset_relations (dataset TEXT PRIMARY KEY, "
    "neighbouring TEXT NOT NULL)"
)
"""The neighbouring relation each dataset's charges were made under (none yet: no row).

Made by :meth:`Ledger.migrate` outside the numbered migrations (an old ledger gains it at its
next start, and no row means no relation yet: every charge before was add/remove, the only
relation the service priced). Guarantees under add/remove and under replacement of one unit do
not add up to one under either, so a dataset's charges (its analysts' budgets and its total)
keep to one relation, checked as the library's accountants check theirs
(:func:`dpkit.accounting._relation.check_relation`)."""


_UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)
"""Whether this SQLite has ``UPDATE … FROM`` (3.33, 2020)."""


def new_charge_id(now: float, taken: Container[str] = ()) -> str:
    """A charge's id: 24 hex digits, the time in microseconds (14) then 40 random bits (10).

    Ids in time order are appended at the end of the ledger's index of ids (random ids landed
    anywhere in it, and each charge of a batch dirtied a page of its own: more to write at
    every commit). The time is ``now``, the charge's ``created`` (its batch's), which its
    analyst is shown anyway: not the moment the charge was decided within its batch, which
    would tell how many of the other analysts' requests (and of which kind) came before it.
    The random part keeps ids unguessable (a result is shown only to its analyst whatever the
    id); one already ``taken`` (an id of the same batch, same time) is drawn again. Ids of two
    batches in the same microsecond (two processes) repeat with probability 2^-40 per pair;
    the ledger's key refuses a repeat.
    """
    stamp = f"{math.floor(now * 1_000_000) % (1 << 56):014x}"
    while True:
        cid = stamp + secrets.token_hex(5)
        if cid not in taken:
            return cid


def _stored(r: tuple[Any, ...]) -> Ask:
    """The prices of a charge row decided in this batch (for its rows' running totals)."""
    return Ask(r[1], r[2], r[4], r[5], r[6], r[3], None, r[9])


def _chunks(rows: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


CHARGE_COLUMNS = (
    "id, analyst, dataset, request_json, epsilon, delta, status, result_json, created, rho"
)


def charge_from_row(row: Sequence[Any], replayed: bool = False) -> Charge:
    return Charge(
        row[0],
        row[1],
        row[2],
        json.loads(row[3]),
        from_units(row[4]),
        from_units(row[5]),
        row[6],
        None if row[7] is None else json.loads(row[7]),
        row[8],
        replayed,
        None if row[9] is None else from_units(row[9]),
    )


class ChargeBatches:
    """Charging a batch of requests and storing a batch of answers (see the module)."""

    postgres: bool
    owner: str | None
    """The process answering the charges it reserves (:mod:`._recovery`), if any."""

    def _sql(self, sql: str) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def _exec(self, sql: str, args: Sequence[Any] = ()) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def refusal(
        self,
        analyst: str,
        dataset: str,
        epsilon: float | None,
        delta: float,
        rho: float | None,
    ) -> Refusal | None:
        """The refusal a charge of this price would meet now (``None``: it fits), for a dry run:
        two reads without locks, checked by :func:`check_fits` (the charge's own arithmetic).
        Advisory: other charges may land between this and a real request."""
        a = ask(analyst, dataset, {}, epsilon, delta, None, None, rho=rho)
        d = self._exec(
            "SELECT total_epsilon, total_delta, spent_epsilon, spent_delta, version, "
            "total_rho, spent_rho FROM datasets WHERE name = ?",
            (dataset,),
        ).fetchone()
        b = self._exec(
            "SELECT epsilon, delta, spent_epsilon, spent_delta, rho, spent_rho FROM budgets "
            "WHERE analyst = ? AND dataset = ?",
            (analyst, dataset),
        ).fetchone()
        if d is None or b is None:
            return Refusal(NoBudgetError("you have no budget on a dataset of that name."))
        fits = check_fits(a, d, b)
        return fits if isinstance(fits, Refusal) else None

    def _reserve_many(self, conn: Any, asks: list[Ask]) -> list[Charge | DPKitError]:
        """Charge a batch of requests in order: each is refused or charged as if alone, after
        the ones before it. Nothing is written for a refused one (its error is returned)."""
        q = self._sql
        lock = " FOR UPDATE" if self.postgres else ""
        # Lock order in every transaction: dataset rows by name, then budget rows, then the
        # analysts' key locks (no deadlock).
        ds: dict[str, list[int] | None] = {}
        for name in sorted({a.dataset for a in asks}):
            row = conn.execute(
                q("SELECT total_epsilon, total_delta, spent_epsilon, spent_delta, version, "
                  "total_rho, spent_rho FROM datasets WHERE name = ?" + lock), (name,),
            ).fetchone()  # fmt: skip
            ds[name] = None if row is None else list(row)
        bud: dict[tuple[str, str], list[int] | None] = {}
        for key in sorted({(a.analyst, a.dataset) for a in asks}):
            row = conn.execute(
                q("SELECT epsilon, delta, spent_epsilon, spent_delta, rho, spent_rho FROM budgets "
                  "WHERE analyst = ? AND dataset = ?" + lock), key,
            ).fetchone()  # fmt: skip
            bud[key] = None if row is None else list(row)
        # (read after the dataset rows are locked: a dataset's relation row is written only
        # under its dataset row's lock, so two batches cannot both set it)
        rel: dict[str, Neighbouring | None] = {}
        for name in sorted({a.dataset for a in asks if a.neighbouring is not None}):
            row = conn.execute(
                q("SELECT neighbouring FROM dataset_relations WHERE dataset = ?"), (name,)
            ).fetchone()
            rel[name] = None if row is None else Neighbouring(row[0])
        known = {k for k, v in rel.items() if v is not None}
        if self.postgres:
            # An idempotency key is the analyst's, not the dataset's: two requests with one key
            # on two datasets lock no common row, so both found the key unused and the second
            # insert broke the unique (analyst, idem_key) constraint (a 500 for its whole
            # batch). A transaction lock per analyst with a key, taken last and in order, makes
            # the second one wait and then see the first one's charge.
            for who in sorted({a.analyst for a in asks if a.idem_key is not None}):
                conn.execute("SELECT pg_advisory_xact_lock(4243, hashtext(%s))", (who,))
        now = time.time()
        out: list[Charge | DPKitError] = []
        new: dict[tuple[str, str], tuple[str, Charge]] = {}  # idempotency keys of this batch
        rows: list[tuple[Any, ...]] = []
        taken: set[str] = set()  # this batch's ids (they share their time part)
        for a in asks:
            try:
                out.append(self._decide(conn, a, ds, bud, new, rows, now, taken, rel))
            except DPKitError as exc:
                out.append(exc)
        for name, now_held in sorted(rel.items()):  # (set only by a charge that was made)
            if now_held is not None and name not in known:
                conn.execute(
                    q("INSERT INTO dataset_relations (dataset, neighbouring) VALUES (?, ?)"),
                    (name, now_held.value),
                )
        if not rows:
            return out
        for chunk in _chunks(rows, 100):
            conn.execute(
                q("INSERT INTO charges (id, analyst, dataset, idem_key, request_json, epsilon, "
                  "delta, status, created, owner, rho) VALUES "
                  + ", ".join(["(?, ?, ?, ?, ?, ?, ?, 'reserved', ?, ?, ?)"] * len(chunk))),
                [v for r in chunk for v in (*r[:8], self.owner, r[9])],
            )  # fmt: skip
        # What each row is charged, in its own unit (:func:`price_in`): ρ rows add ρ exactly.
        spent_ds: dict[str, list[int]] = {}
        spent_b: dict[tuple[str, str], list[int]] = {}
        for r in rows:
            for total, row in (
                (spent_ds.setdefault(r[2], [0, 0, 0]), ds[r[2]]),
                (spent_b.setdefault(r[1:3], [0, 0, 0]), bud[r[1:3]]),
            ):
                rho_col = None if row is None else row[-2]
                for i, v in enumerate(price_in(rho_col, _stored(r), "")):
                    total[i] += v
        for name, (e, d, p) in sorted(spent_ds.items()):
            conn.execute(
                q("UPDATE datasets SET spent_epsilon = spent_epsilon + ?, spent_delta = "
                  "spent_delta + ?, spent_rho = spent_rho + ? WHERE name = ?"), (e, d, p, name),
            )  # fmt: skip
        for (who, name), (e, d, p) in sorted(spent_b.items()):
            conn.execute(
                q("UPDATE budgets SET spent_epsilon = spent_epsilon + ?, spent_delta = "
                  "spent_delta + ?, spent_rho = spent_rho + ? WHERE analyst = ? AND dataset = ?"),
                (e, d, p, who, name),
            )  # fmt: skip
        audit = [(r[7], r[1], r[2], r[8], r[5], r[6], r[9], f"reserved {r[0]}") for r in rows]
        for chunk in _chunks(audit, 100):
            conn.execute(
                q("INSERT INTO audit (ts, principal, kind, dataset, query, epsilon, delta, rho, "
                  "outcome) VALUES "
                  + ", ".join(["(?, ?, 'charge', ?, ?, ?, ?, ?, ?)"] * len(chunk))),
                [v for r in chunk for v in r],
            )  # fmt: skip
        return out

    def _decide(
        self,
        conn: Any,
        a: Ask,
        ds: dict[str, list[int] | None],
        bud: dict[tuple[str, str], list[int] | None],
        new: dict[tuple[str, str], tuple[str, Charge]],
        rows: list[tuple[Any, ...]],
        now: float,
        taken: set[str],
        rel: dict[str, Neighbouring | None] | None = None,
    ) -> Charge:
        """One request of a batch: its replayed charge, its new charge (appended to ``rows``,
        and the running totals updated), or a refusal (raised; nothing changed)."""
        if a.idem_key is not None:
            seen = new.get((a.analyst, a.idem_key))
            if seen is not None:  # the same key earlier in this batch
                if seen[0] != a.body:
                    raise DataError(
                        "this idempotency key was used for a different request; use a new key."
                    )
                return dataclasses.replace(seen[1], replayed=True)
            row = conn.execute(
                self._sql(
                    f"SELECT {CHARGE_COLUMNS} FROM charges WHERE analyst = ? AND idem_key = ?"
                ),
                (a.analyst, a.idem_key),
            ).fetchone()
            if row is not None:
                if canonical(json.loads(row[3])) != a.body:
                    raise DataError(
                        "this idempotency key was used for a different request; use a new key."
                    )
                return charge_from_row(row, replayed=True)
        d, b = ds[a.dataset], bud[(a.analyst, a.dataset)]
        if d is not None and a.version is not None and d[4] != a.version:
            raise StaleDatasetError("the dataset was replaced; reload it and ask again.")
        if d is None or b is None:
            raise NoBudgetError("you have no budget on a dataset of that name.")
        held = None if rel is None else rel.get(a.dataset)
        relation = check_relation(held, a.neighbouring)  # (refused: nothing changed)
        fits = check_fits(a, d, b)
        if isinstance(fits, Refusal):
            raise fits.error  # (nothing changed)
        eu, du, ru, de, dd, dr = fits
        b[2], b[3], b[5] = b[2] + eu, b[3] + du, b[5] + ru
        d[2], d[3], d[6] = d[2] + de, d[3] + dd, d[6] + dr
        if rel is not None and relation is not None:
            rel[a.dataset] = relation
        cid = new_charge_id(now, taken)
        taken.add(cid)
        request = json.loads(a.body)
        # the charge keeps both prices (ε is 0 where it has none): a refund takes back from
        # each row what its unit was charged
        ae = 0 if a.eu is None else a.eu
        rows.append((cid, a.analyst, a.dataset, a.idem_key, a.body, ae, a.du, now,
                     request.get("query"), a.ru))  # fmt: skip
        charge = Charge(cid, a.analyst, a.dataset, request, from_units(ae), from_units(a.du),
                        "reserved", None, now, False,
                        None if a.ru is None else from_units(a.ru))  # fmt: skip
        if a.idem_key is not None:
            new[(a.analyst, a.idem_key)] = (a.body, charge)
        return charge

    def _release_many(self, conn: Any, items: list[tuple[str, float, str]]) -> list[None]:
        if self.postgres or not _UPDATE_FROM:  # (psycopg pipelines an executemany)
            conn.cursor().executemany(
                self._sql(
                    "UPDATE charges SET status = 'released', result_json = ?, finished = ? "
                    "WHERE id = ? AND status = 'reserved'"
                ),
                items,
            )
            return [None] * len(items)
        # SQLite: one statement per hundred answers (an executemany would hand the GIL to the
        # event loop and wait to take it back once per answer). A charge's first answer is the
        # one kept: a later one of the same statement would be joined too, and SQLite applies
        # an arbitrary one of the rows joined to a charge.
        first: dict[str, tuple[str, float, str]] = {}
        for item in items:
            first.setdefault(item[2], item)
        for chunk in _chunks(list(first.values()), 100):
            conn.execute(
                "UPDATE charges SET status = 'released', result_json = r.column1, "
                "finished = r.column2 FROM (VALUES "
                + ", ".join(["(?, ?, ?)"] * len(chunk))
                + ") AS r WHERE charges.id = r.column3 AND charges.status = 'reserved'",
                [v for row in chunk for v in row],
            )
        return [None] * len(items)
