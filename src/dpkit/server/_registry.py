"""The query registry: each query type is one small entry that validates, prices and runs.

An entry is a function ``prepare(params, schema) -> Prepared`` that reads **only the request and
the public schema**: it checks the parameters and returns the price (ε, δ) and a ``compute``
closure. ``compute(table, rng, accountant)`` runs the release on a table and must charge
``accountant`` with its privacy event before drawing any noise (the contract of every dpkit
statistic). The service then

1. calls ``compute`` in full on the public *dummy* table with a meter accountant of budget
   (ε, δ), a *dry release*: this finishes validation (a parameter the statistic itself rejects
   fails here, free), checks that the statistic's own event fits the price, and computes from
   the public parameters everything that could overflow after the charge (noise scales, error
   bars at the request's ``alpha``, the fixed-point range of the bounds). An entry that declares
   ``dry=False`` is instead *probed*: stopped at its charge, before any noise is drawn. The
   outcome is remembered per dummy table and canonical request, so an identical request is not
   validated again;
2. charges (ε, δ) in one ledger transaction;
3. calls ``compute`` on the real table with a meter accountant of the same budget.

So group-by queries (``dpkit.frame``), synthetic data (``dpkit.release``) or local-model
aggregation (``dpkit.local``) are each added with one :meth:`QueryRegistry.register` call.

A *free* entry (``Prepared(..., free=True)``, price (0, 0)) is post-processing of data that are
already private (reports randomized on users' devices): its ``compute`` must not charge, and it
is validated by running it in full on the dummy (public data). It is still recorded in the
ledger, at zero cost, so that its answer is stored, audited and fetched again like any other.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from dpkit.accounting import ZCDP, Accountant, ApproxDP, Neighbouring
from dpkit.errors import BudgetExceededError, DataError, DPKitError, PrivacyParameterError
from dpkit.random import RNGLike
from dpkit.server._json import canonical_strict
from dpkit.server._schema import DatasetSchema, Table

__all__ = ["Answer", "Meter", "Prepared", "QueryRegistry", "check_keys"]


@dataclass(frozen=True)
class Answer:
    """What a query returns: a value (number or list), its interval at ``alpha``, bin labels."""

    value: Any
    ci: tuple[Any, Any] | None = None
    labels: tuple[str, ...] | None = None


Compute = Callable[[Table, RNGLike, "Meter"], Answer]


@dataclass(frozen=True)
class Prepared:
    """A validated, priced query: its statistic, its cost and how to run it."""

    statistic: str
    epsilon: float
    delta: float
    compute: Compute = field(repr=False, compare=False)
    free: bool = False
    """Post-processing of already private data: costs (0, 0) and never charges."""
    quick: Callable[[Table], bool] | None = field(default=None, repr=False, compare=False)
    """Whether ``compute`` on this table takes well under a millisecond (e.g. its aggregate
    is remembered), so that an ``inline`` entry may run it on the service's event loop."""
    dry: bool = True
    """Validate by a *dry release*: ``compute`` run in full on the public dummy table (noise,
    error bars and all), so that a request whose answer cannot be computed (an interval that
    overflows at the requested ``alpha``, a value past the range of a float) is refused before
    the charge. ``False`` only for an entry whose answer, once charged, is bounded by
    construction and whose full run on the dummy would be costly (it is then probed up to
    its charge)."""
    accuracy: Callable[[], Any] | None = field(default=None, repr=False, compare=False)
    """The half-width of the answer's noise interval at the request's ``alpha``, from public
    parameters only (a float, or a mapping from output column to float); ``None`` where it is
    known only after the release. Computed once, when the request is priced (off the loop)."""
    half_width: Any = None
    """``accuracy()`` as computed at pricing: what a dry run shows with the price."""
    rho: float | None = None
    """The price in zCDP of a query asked in ρ (Gaussian noise), paid as it is by budgets
    declared in ρ. With ``epsilon = delta = 0`` the query was asked in ρ without a δ: only ρ
    budgets can pay it, and its meter holds ρ."""

    @property
    def rho_only(self) -> bool:
        """Asked in ρ without δ: priced in ρ alone (no (ε, δ) price)."""
        return self.rho is not None and self.epsilon == 0 and self.delta == 0


_MIN_EPSILON = 1e-12
"""The ledger's unit (:data:`dpkit.server._sql.UNIT`): the smallest ε a query may cost."""


def meter_of(prepared: Prepared, *, probe: bool = False) -> Meter:
    """The meter holding a prepared query's price."""
    rho = prepared.rho if prepared.rho_only else None
    return Meter(prepared.epsilon, prepared.delta, probe=probe, rho=rho)


class _Priced(Exception):
    """Raised by the probe accountant to stop a statistic once it has been priced."""


@lru_cache(maxsize=256, typed=True)
def _price(epsilon: float, delta: float) -> ApproxDP:
    """The (immutable, validated) budget of a meter, made once per price."""
    return ApproxDP(epsilon=epsilon, delta=delta)


class Meter(Accountant):
    """An accountant holding exactly the price (ε, δ) of one query.

    A statistic whose event does not fit the price is refused by it (``BudgetExceededError``)
    before any noise is drawn, and so is an event declaring replacement of one unit (the ledger
    charges under add/remove). ``charged`` tells whether a charge went through, i.e. whether
    noise may have been drawn (a charge that is never followed by noise would be refundable).
    """

    def __init__(
        self, epsilon: float, delta: float, *, probe: bool = False, rho: float | None = None
    ) -> None:
        # A price of (0, 0) is a free (post-processing) query: every charge is refused. With
        # ``rho`` (and ε = δ = 0) the meter holds exactly the ρ the ledger charges: the noise's
        # event is ρ-zCDP with that ρ, which the budget arithmetic's margins admit.
        self._free = epsilon == 0 and delta == 0 and rho is None
        if rho is not None and epsilon == 0 and delta == 0:
            super().__init__(ZCDP(rho=rho))
        else:
            super().__init__(_price(1.0 if self._free else epsilon, delta))
        # The ledger charges every query under add/remove of one row (Ledger.reserve's
        # relation): a release declaring replacement (a registered entry's statistic with
        # neighbouring=REPLACE) would be summed with the dataset's add/remove charges, so the
        # meter refuses it, before its probe prices it and so before anything is charged.
        self._relation.value = Neighbouring.ADD_REMOVE
        self.charged = False
        self._probe = probe

    def charge(self, event: Any, *, label: str | None = None, delta: float | None = None) -> None:
        if self._free:
            raise BudgetExceededError("a free (post-processing) query may not charge privacy.")
        super().charge(event, label=label, delta=delta)
        self.charged = True
        if self._probe:
            raise _Priced

    def split(self, n: int, *, label: str | None = "split") -> list[Accountant]:
        # Accountant.split spends the remainder without calling charge(): without this, a free
        # meter (whose placeholder budget is ε = 1) would hand out real budget uncharged, and a
        # priced one would not record that noise may follow (a later failure would be refunded).
        if self._free:
            raise BudgetExceededError("a free (post-processing) query may not charge privacy.")
        parts = super().split(n, label=label)
        self.charged = True
        if self._probe:
            raise _Priced
        return parts


def check_keys(params: Mapping[str, Any], allowed: set[str]) -> None:
    """Refuse parameters an entry does not know (a misspelt ``epsilon`` must not pass).

    A misspelling of an allowed name (a short identifier within a few edits of it) is named
    with the name it resembles; any other unknown name is only counted, never reflected (a
    request's keys may carry anything).

    >>> check_keys({"epsilson": 1.0}, {"epsilon", "delta"})
    Traceback (most recent call last):
    ...
    dpkit.errors.DataError: unknown parameter 'epsilson' (did you mean 'epsilon'?). Allowed: \
delta, epsilon.
    """
    unknown = set(params) - allowed
    if not unknown:
        return
    allowed_text = f"Allowed: {', '.join(sorted(allowed))}."
    named = []
    for k in sorted(str(u) for u in unknown):
        close = difflib.get_close_matches(k, sorted(allowed), n=1, cutoff=0.8)
        if close and _plain_name(k):
            named.append(f"{k!r} (did you mean {close[0]!r}?)")
    others = len(unknown) - len(named)
    if not named:
        raise DataError(f"unknown parameter(s) for this query ({others}); {allowed_text}")
    plural = "s" if len(unknown) > 1 else ""
    more = f" and {others} other(s)" if others else ""
    raise DataError(f"unknown parameter{plural} {', '.join(named)}{more}. {allowed_text}")


def _plain_name(name: object) -> bool:
    """A short ASCII identifier: safe to name in an error (no markup, no control characters)."""
    return isinstance(name, str) and name.isascii() and name.isidentifier() and len(name) <= 40


def _price_key(name: str, entry: Any, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The canonical form of a request, under which its validated, priced query is remembered.

    An entry's validation and its probe are deterministic functions of the entry, the request
    and the dummy table (a function of the public schema), so an identical request needs neither
    again: the same (immutable) prepared query serves it. The real computation is still metered
    at the price (the meter refuses any other event), so a remembered query can never spend
    more than it was charged.
    """
    try:
        return ("prepared", name, entry, canonical_strict(params))
    except (TypeError, ValueError):  # not plain JSON (a caller in Python): probe every time
        return None


class QueryRegistry:
    """Named query types (``count``, ``mean``…); see the module docstring for the contract.

    Examples
    --------
    >>> from dpkit.server import QueryRegistry, stats_registry
    >>> reg = stats_registry()
    >>> "mean" in reg.names()
    True
    """

    def __init__(self) -> None:
        self._entries: dict[str, Callable[[Mapping[str, Any], DatasetSchema], Prepared]] = {}
        self._inline: set[str] = set()

    def register(
        self,
        name: str,
        prepare: Callable[[Mapping[str, Any], DatasetSchema], Prepared],
        *,
        inline: bool = False,
    ) -> None:
        """Add the query type ``name``; ``prepare(params, schema)`` validates and prices it.

        ``inline=True`` declares that preparing and computing it take well under a millisecond
        (e.g. noise on a remembered aggregate): the service then answers it on its event loop
        instead of a worker thread (see :meth:`dpkit.server._service.Curator.query_async`).
        """
        if not name.isidentifier() or name in self._entries:
            raise ValueError(f"query name {name!r} is invalid or already registered.")
        self._entries[name] = prepare
        if inline:
            self._inline.add(name)

    def inline(self, name: object) -> bool:
        """Whether ``name`` is a registered query type declared ``inline``."""
        return isinstance(name, str) and name in self._inline

    def names(self) -> list[str]:
        """The registered query types, sorted."""
        return sorted(self._entries)

    def cached(
        self, name: object, params: Mapping[str, Any], dummy: Table
    ) -> tuple[Hashable | None, Prepared | None]:
        """The key under which ``prepare`` remembers this request, and the remembered prepared
        query if there is one (a lookup: no validation or pricing runs)."""
        if not isinstance(name, str) or name not in self._entries:
            return None, None
        key = _price_key(name, self._entries[name], params)
        known = None if key is None else dummy.memo.peek(key)
        return key, known if isinstance(known, Prepared) else None

    def prepare(
        self, name: object, params: Mapping[str, Any], schema: DatasetSchema, dummy: Table
    ) -> Prepared:
        """Validate and price a request from the request and the public schema alone.

        Raises :class:`DataError` or :class:`PrivacyParameterError` (nothing is charged).
        """
        if not isinstance(name, str) or name not in self._entries:
            raise DataError(f"unknown query type; available: {', '.join(self.names())}.")
        key = _price_key(name, self._entries[name], params)
        if key is not None and isinstance(known := dummy.memo.peek(key), Prepared):
            return known  # this very request was validated and priced on this dummy table
        prepared = self._entries[name](params, schema)
        eps, dlt = prepared.epsilon, prepared.delta
        if prepared.free:
            return _check_free(prepared, dummy)
        if prepared.rho_only:
            eps = float(prepared.rho or 0.0)  # checked as an ε would be: finite, ≥ the unit
        if not (math.isfinite(eps) and eps > 0 and math.isfinite(dlt) and 0 <= dlt < 1):
            raise PrivacyParameterError("the query's price must have finite ε > 0, δ in [0, 1).")
        if eps < _MIN_EPSILON:
            # Below the ledger's unit a price cannot be recorded as it is, and the exact samplers
            # refuse such noise scales only when drawing, i.e. after the charge.
            raise PrivacyParameterError(
                "epsilon must be at least 1e-12 (the ledger's unit); smaller values give answers "
                "that are pure noise."
            )
        if prepared.dry:
            _dry_release(prepared, dummy)
        else:
            _probe(prepared, dummy)
        if prepared.accuracy is not None:  # validated above: computed from public parameters
            prepared = replace(prepared, half_width=prepared.accuracy())
        if key is not None:  # an entry's validation and price depend on the request alone
            dummy.memo.get(key, lambda: prepared)
        return prepared


_OVERCHARGED = (
    "the statistic's privacy event does not fit the price it was given; this is a defect of "
    "the query type, not of the request."
)
_UNCHARGED = "the query type released without charging its accountant; refusing to run it."


def _dry_release(prepared: Prepared, dummy: Table) -> None:
    """Run the whole release on the public dummy table, under a meter holding its price.

    Everything a release computes from public parameters alone (the noise scale, the error
    bars at the request's ``alpha``, the fixed-point grid of the bounds, the range of the
    output) is computed here exactly as it will be on the real table; a request for which one
    of them overflows or is undefined is refused now, free, instead of failing after its charge
    (with its budget lost). The answer is discarded: the dummy is public data, and its noise is
    drawn from a secure generator like any other.
    """
    meter = meter_of(prepared)
    with _run_on_dummy(_OVERCHARGED, charged=lambda: meter.charged):
        prepared.compute(dummy, None, meter)
    if not meter.charged:
        raise PrivacyParameterError(_UNCHARGED)


def _probe(prepared: Prepared, dummy: Table) -> None:
    """Run the entry on the dummy up to its charge (which must fit the price), then stop."""
    probe = meter_of(prepared, probe=True)
    try:
        with _run_on_dummy(_OVERCHARGED):
            # rng=None: the probe stops at the charge, before any generator is made; a seed
            # here would make every priced query a "charged release with insecure noise".
            prepared.compute(dummy, None, probe)
    except _Priced:
        return
    raise PrivacyParameterError(_UNCHARGED)


def _check_free(prepared: Prepared, dummy: Table) -> Prepared:
    """Validate a free entry by running it on the dummy; refuse it if it tries to charge."""
    if prepared.epsilon != 0 or prepared.delta != 0:
        raise PrivacyParameterError("a free query type must be priced at (0, 0).")
    with _run_on_dummy(
        "a free query type tried to charge privacy; this is a defect of the query type."
    ):
        prepared.compute(dummy, None, Meter(0.0, 0.0))
    return prepared


@contextmanager
def _run_on_dummy(
    overcharged: str, *, charged: Callable[[], bool] = lambda: False
) -> Iterator[None]:
    """An entry run on the dummy table: a charge its meter refuses is a defect of the entry
    (``overcharged``); a TypeError, ValueError or ArithmeticError is a request it cannot serve:
    invalid parameters before the charge, an answer or error bars that cannot be computed (e.g.
    they overflow) after it (``charged()``: whether the meter was charged)."""
    try:
        yield
    except BudgetExceededError as exc:
        raise PrivacyParameterError(overcharged) from exc
    except DPKitError:
        raise
    except (TypeError, ValueError, ArithmeticError) as exc:
        if charged():
            raise DataError(
                "the answer to this query cannot be computed with these parameters (its value "
                "or its interval at this alpha overflows); use a larger alpha (e.g. 0.05), a "
                "larger epsilon or narrower bounds. Nothing was charged."
            ) from exc
        raise DataError("the query's parameters are invalid for this query type.") from exc
