"""Accountants: budgets that cannot be overspent, by concurrent or adaptively chosen queries."""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpkit._checks import check_delta
from dpkit.accounting._accountant_text import (
    accountant_html,
    accountant_repr,
    budget_hint,
    refusal_text,
)
from dpkit.accounting._budget import within
from dpkit.accounting._compose import epsilon_of
from dpkit.accounting._costs import (
    IdentityMemo,
    InfiniteCost,
    memoised,
    pure_cost_of,
    rho_cost,
    rho_for,
)
from dpkit.accounting._events import ApproxDPEvent, Event
from dpkit.accounting._guarantees import (
    ZCDP,
    ApproxDP,
    Guarantee,
    PureDP,
    _unchecked,
    shown,
    zcdp_epsilon,
)
from dpkit.accounting._parallel import DisjointParts, parallel
from dpkit.accounting._relation import Relation
from dpkit.errors import BudgetExceededError, PrivacyParameterError

__all__ = ["Accountant", "LedgerEntry"]


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded charge: the event, its label and what it cost in each currency.

    ``epsilon`` is spent by basic composition, ``delta`` is added δ, ``rho`` is zCDP ρ. The repr
    shows the costs rounded up to short decimals (the fields keep the exact floats) and names
    the event's kind; the event itself, in the units of its noise, is in ``.event``.

    >>> from dpkit.accounting import LaplaceEvent
    >>> LedgerEntry(LaplaceEvent(scale=2.0), "a sum", 0.49999999999954525, 0.0, 0.0)
    LedgerEntry(label='a sum', epsilon=0.5, event=LaplaceEvent)
    """

    event: Event | None
    label: str | None
    epsilon: float
    delta: float
    rho: float

    def __repr__(self) -> str:
        parts = [f"label={self.label!r}"]
        for name in ("epsilon", "delta", "rho"):
            value = getattr(self, name)
            if value:
                parts.append(f"{name}={shown(value, 'up')}")
        if len(parts) == 1:
            parts.append("epsilon=0.0")
        parts.append(f"event={type(self.event).__name__ if self.event is not None else None}")
        return f"LedgerEntry({', '.join(parts)})"


@dataclass(frozen=True)
class _State:
    eps: Fraction
    delta: Fraction
    rho: Fraction


_Plan = tuple[_State, LedgerEntry]
_NOTHING = _State(Fraction(0), Fraction(0), Fraction(0))  # (immutable: shared by new accountants)
_METHODS: dict[type, tuple[str, ...]] = {
    PureDP: ("auto", "basic"),
    ApproxDP: ("auto", "basic", "zcdp"),
    ZCDP: ("auto", "zcdp"),
}


_FIRST_PLANS = IdentityMemo()
"""First plans remembered per (accountant class, budget object, method, δ's, event object)."""


class Accountant:
    """A privacy filter: records charges and refuses any that would exceed the budget.

    Parameters
    ----------
    budget : PureDP | ApproxDP | ZCDP
        The total guarantee the interaction must keep.
    method : {"auto", "basic", "zcdp"}
        How charges are combined (see below). ``"auto"`` is ``"basic"`` for :class:`PureDP` and
        :class:`ApproxDP` budgets and ``"zcdp"`` for :class:`ZCDP` budgets.
    event_delta : float, optional
        For an :class:`ApproxDP` budget with ``method="basic"``, the δ_i at which an event with
        a privacy curve (a Gaussian, a subsampled mechanism…) is paid as (ε(δ_i), δ_i) when the
        caller gives no δ of its own; default ``budget.delta / 10``.

    Notes
    -----
    Privacy guarantee. The whole interaction, with every query chosen after seeing the answers to
    earlier ones, satisfies ``budget``. Each mode is one privacy filter with a budget fixed when
    the accountant is built, which is what makes it valid under fully adaptive composition:

    * :class:`PureDP` budget — ε's add: the basic-composition filter of Rogers, Roth, Ullman &
      Vadhan (2016, Theorem 3.1).
    * :class:`ApproxDP` budget, ``method="basic"`` (default) — each charge costs (ε_i, δ_i) and
      both add; the same filter theorem holds with adaptively chosen (ε_i, δ_i). A pure event
      costs (ε, 0), an (ε, δ) event what it says, and an event with a privacy curve costs
      (ε(δ_i), δ_i) with ε(δ_i) its tightest ε (:func:`~dpkit.accounting.epsilon_of`) and δ_i,
      in order of preference: the δ the caller calibrated for (``charge(..., delta=)``; dpkit's
      mechanisms and statistics pass it), ``event_delta``, then all the δ still unspent — the
      first that fits. δ_i depends only on the event and past charges, never on data. A
      statistic made of several parts is paid as one event, its parts composed tightly. A
      Gaussian calibrated to (ε, δ) fits an (ε, δ) budget exactly; six sums at ε/6 fit ε.
    * :class:`ApproxDP` budget, ``method="zcdp"`` — one zCDP filter with the fixed budget
      ρ* = the largest ρ whose Canonne–Kamath–Steinke (2020, Cor. 13) conversion gives
      (ε, δ); every event is paid in ρ (pure ε as ε²/2, the exponential mechanism as ε²/8 —
      Cesar & Rogers 2021). Many Gaussians compose far more tightly this way; events with no
      zCDP bound (an (ε, δ) event, a subsampled Gaussian) are refused.
    * :class:`ZCDP` budget — ρ's add, every event paid in ρ: the Rényi filter of Feldman & Zrnic
      (2021, Theorem 3.1) at every order α (see also Whitehouse, Ramdas, Rogers & Wu 2023).

    ``charge`` is atomic and thread-safe: either the whole event fits and is recorded, or
    :class:`~dpkit.errors.BudgetExceededError` is raised and nothing changes. Whether a charge
    fits is decided by dpkit's one budget arithmetic (shared with the curator service's ledger;
    see ``docs/accounting.md``): exact sums, with each cost counted at (1 − 2⁻⁵⁰) of its binary
    value and the budget allowed (1 + 2⁻⁵⁰) of its own, so that decimals add up as decimals
    (twenty charges of ε = 0.05 fit ε = 1; a budget of 0.3 pays 0.3) while the exact sum of the
    costs never exceeds the budget by more than a relative 1.8·10⁻¹⁵.

    Examples
    --------
    >>> from dpkit.accounting import Accountant, ApproxDP, GaussianEvent, LaplaceEvent
    >>> acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    >>> for _ in range(6):
    ...     acct.charge(LaplaceEvent(scale=6.0), label="sum")   # ε/6 for each of six sums
    >>> acct.spent.epsilon
    1.0
    >>> acct.can_afford(LaplaceEvent(scale=100.0))
    False
    >>> z = Accountant(ApproxDP(epsilon=1.0, delta=1e-6), method="zcdp")
    >>> for _ in range(20):
    ...     z.charge(GaussianEvent(sigma=25.0))
    >>> round(z.spent.epsilon, 3)
    0.799
    """

    def __init__(
        self,
        budget: Guarantee | None = None,
        *,
        method: str = "auto",
        event_delta: float | None = None,
        **unexpected: object,
    ) -> None:
        if unexpected or not isinstance(budget, PureDP | ApproxDP | ZCDP):
            raise PrivacyParameterError(budget_hint(budget, unexpected))
        allowed = _METHODS.get(type(budget)) or next(
            m
            for kind, m in _METHODS.items()
            if isinstance(budget, kind)  # (a subclass)
        )
        if method not in allowed:
            raise PrivacyParameterError(
                f"method for a {type(budget).__name__} budget must be one of "
                f"{allowed}, got {method!r}."
            )
        if method == "auto":
            method = "zcdp" if isinstance(budget, ZCDP) else "basic"
        self._budget = budget
        self._method = method
        self._rho_max = budget.rho if isinstance(budget, ZCDP) else 0.0
        if isinstance(budget, ApproxDP):
            if budget.delta == 0 and method == "zcdp":
                raise PrivacyParameterError(
                    "method='zcdp' needs delta > 0 in the budget; use method='basic' for pure ε."
                )
            if method == "zcdp":
                self._rho_max = rho_for(budget.epsilon, budget.delta)
            if event_delta is None:
                event_delta = budget.delta / 10
            elif not (0 < float(event_delta) <= budget.delta):
                raise PrivacyParameterError(
                    f"event_delta must be in (0, budget.delta], got {event_delta!r}."
                )
        self._event_delta = float(event_delta or 0.0)
        self._lock = threading.Lock()
        self._state = _NOTHING
        self._ledger: list[LedgerEntry] = []
        # the neighbouring relation the charged events declared, shared with split() children
        self._relation = Relation()

    # -- what the interaction has cost -------------------------------------------------------
    @property
    def budget(self) -> Guarantee:
        """The total budget."""
        return self._budget

    @property
    def method(self) -> str:
        """How charges are combined: ``"basic"`` or ``"zcdp"``."""
        return self._method

    def _spent_of(self, s: _State) -> tuple[float, float, float]:
        """(ε, δ, ρ) spent in state ``s``."""
        b = self._budget
        if isinstance(b, ApproxDP) and self._method == "zcdp":
            if s.rho == 0:
                return 0.0, 0.0, 0.0
            return min(zcdp_epsilon(float(s.rho), b.delta), b.epsilon), b.delta, float(s.rho)
        return float(s.eps), float(s.delta), float(s.rho)

    def _fits(self, s: _State) -> bool:
        # The one budget arithmetic (dpkit.accounting._budget), on the exact sums: the same
        # definition as the curator service's ledger.
        b = self._budget
        if self._method == "zcdp":
            return within(s.rho, self._rho_max)
        ok_eps = within(s.eps, b.epsilon)  # type: ignore[union-attr]
        return ok_eps and within(s.delta, getattr(b, "delta", 0.0))

    @property
    def spent(self) -> Guarantee:
        """The guarantee of everything charged so far (zero before the first charge).

        Its repr rounds each value *up* to a short decimal (``ApproxDP(epsilon=0.75, ...)`` for
        a spend of 0.7499999999993179, the safe-side margins of the accounting); the fields
        (``spent.epsilon``) hold the exact values the accountant enforces.
        """
        with self._lock:
            eps, delta, rho = self._spent_of(self._state)
        if isinstance(self._budget, ZCDP):
            return _unchecked(ZCDP, shown="up", rho=rho)
        if isinstance(self._budget, PureDP):
            return _unchecked(PureDP, shown="up", epsilon=eps)
        return _unchecked(ApproxDP, shown="up", epsilon=eps, delta=delta)

    @property
    def remaining(self) -> Guarantee:
        """Budget minus spent, component by component (floored at zero).

        Like :attr:`spent`, its repr is rounded to a short decimal, down here (never showing more
        than is left); the fields hold the exact values.
        """
        eps, delta, rho = self._remaining_of(self.spent)
        b = self._budget
        if isinstance(b, ZCDP):
            return _unchecked(ZCDP, shown="down", rho=rho)
        if isinstance(b, PureDP):
            return _unchecked(PureDP, shown="down", epsilon=eps)
        return _unchecked(ApproxDP, shown="down", epsilon=eps, delta=delta)

    def _remaining_of(self, spent: Guarantee) -> tuple[float, float, float]:
        b = self._budget
        return (
            max(0.0, getattr(b, "epsilon", 0.0) - getattr(spent, "epsilon", 0.0)),
            max(0.0, getattr(b, "delta", 0.0) - getattr(spent, "delta", 0.0)),
            max(0.0, getattr(b, "rho", 0.0) - getattr(spent, "rho", 0.0)),
        )

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """Every recorded charge, oldest first."""
        with self._lock:
            return tuple(self._ledger)

    # -- charging ----------------------------------------------------------------------------
    @staticmethod
    def _cost_in_rho(event: Event) -> Fraction:
        return memoised(rho_cost, event)

    @staticmethod
    def _pure_cost(event: Event) -> Fraction | None:
        return memoised(pure_cost_of, event)

    def _plan(self, event: Event, hint: float | None) -> _Plan | None:
        """The state after paying ``event`` and its cost, or None if it does not fit."""
        if self._state is _NOTHING:
            return self._first_plan(event, hint)
        return self._plan_anew(event, hint)

    def _plan_anew(self, event: Event, hint: float | None) -> _Plan | None:
        try:
            return self._plan_finite(event, hint)
        except InfiniteCost:  # e.g. Laplace of scale 5e-324: ε = inf fits no budget
            return None

    def _first_plan(self, event: Event, hint: float | None) -> _Plan | None:
        """:meth:`_plan` from the empty state, remembered.

        From nothing spent, the plan is a pure function of the accountant's class (a subclass
        may plan or fit differently), the budget, the method, the default ``event_delta``, the
        event and the hint (``_plan_finite`` reads nothing else, and all of them are immutable):
        a service that meters every query with a fresh accountant holding its price (one budget
        object per price) pays for the same event object each time. Found by identity of the
        budget and the event (both kept in the entry, so their ids are not reused while
        remembered), never by equality; errors are not remembered.
        """
        key = (type(self), id(self._budget), self._method, self._event_delta, id(event), hint)
        return _FIRST_PLANS.remember(key, (self._budget, event), self._plan_anew, event, hint)

    def _plan_finite(self, event: Event, hint: float | None) -> _Plan | None:
        if not isinstance(event, Event):
            raise PrivacyParameterError(f"charge needs an Event, got {type(event).__name__}.")
        s = self._state
        if self._method == "zcdp":
            rho = self._cost_in_rho(event)
            return self._if_fits(event, _State(s.eps, s.delta, s.rho + rho), 0, 0.0, rho)
        pure = self._pure_cost(event)
        if pure is not None:
            return self._if_fits(event, _State(s.eps + pure, s.delta, s.rho), pure, 0.0, 0)
        if isinstance(self._budget, PureDP):
            raise PrivacyParameterError(
                f"a {type(event).__name__} is not pure ε-DP, so a PureDP budget cannot pay for "
                "it; use an "
                "ApproxDP or ZCDP budget, or a pure-DP mechanism."
            )
        if isinstance(event, ApproxDPEvent):
            ed = Fraction(event.delta)
            cand = _State(s.eps + Fraction(event.epsilon), s.delta + ed, s.rho)
            return self._if_fits(event, cand, Fraction(event.epsilon), float(ed), 0)
        b_delta = self._budget.delta  # type: ignore[union-attr]
        rest = b_delta - float(s.delta)
        tried: set[float] = set()
        for d in (hint, self._event_delta, rest):
            if d is None or min(d, rest) <= 0 or not within(s.delta + Fraction(d), b_delta):
                continue
            if min(d, rest) in tried:
                continue  # (the same δ twice would only repeat a possibly costly composition)
            tried.add(min(d, rest))
            eps = epsilon_of(event, delta=min(d, rest))
            if not math.isfinite(eps):
                continue
            cand = _State(s.eps + Fraction(eps), s.delta + Fraction(min(d, rest)), s.rho)
            entry = self._if_fits(event, cand, Fraction(eps), min(d, rest), 0)
            if entry is not None:
                return entry
        return None

    def _if_fits(
        self, event: Event, cand: _State, eps: Fraction | int, delta: float, rho: Fraction | int
    ) -> _Plan | None:
        if not self._fits(cand):
            return None
        return cand, LedgerEntry(event, None, float(eps), float(delta), float(rho))

    def can_afford(self, event: Event, *, delta: float | None = None) -> bool:
        """Whether ``event`` would fit in the remaining budget now (``delta``: as in charge)."""
        hint = self._hint(delta)
        with self._relation.lock, self._lock:
            self._relation.check(event)
            return self._plan(event, hint) is not None

    @staticmethod
    def _hint(delta: float | None) -> float | None:
        if delta is None:
            return None
        return check_delta(delta, "delta", allow_zero=False)

    def charge(self, event: Event, *, label: str | None = None, delta: float | None = None) -> None:
        """Record ``event`` if it fits; otherwise raise and record nothing.

        Parameters
        ----------
        event : Event
            What the release costs.
        label : str, optional
            Recorded in the ledger.
        delta : float, optional
            The δ the mechanism was calibrated for. Under an :class:`ApproxDP` budget with
            ``method="basic"``, an event with a privacy curve is paid as (ε(δ), δ) at this δ
            first.

        Raises
        ------
        BudgetExceededError
            The charge would exceed the budget. Nothing was recorded.
        PrivacyParameterError
            The event cannot be paid for from this kind of budget.
        """
        hint = self._hint(delta)
        with self._relation.lock, self._lock:
            relation = self._relation.check(event)
            plan = self._plan(event, hint)
            if plan is None:
                raise BudgetExceededError(
                    refusal_text(self, event, label),
                    requested=event,
                    remaining=self._remaining_unlocked(),
                )
            self._state, entry = plan
            self._ledger.append(LedgerEntry(event, label, entry.epsilon, entry.delta, entry.rho))
            if relation is not None:
                self._relation.value = relation

    def _remaining_unlocked(self) -> tuple[float, float, float]:
        eps, delta, rho = self._spent_of(self._state)
        b = self._budget
        return (
            max(0.0, getattr(b, "epsilon", 0.0) - eps),
            max(0.0, getattr(b, "delta", 0.0) - delta),
            max(0.0, getattr(b, "rho", 0.0) - rho),
        )

    def split(self, n: int, *, label: str | None = "split") -> list[Accountant]:
        """Give the remaining budget to ``n`` new accountants, 1/n each (e.g. ε/6 for six sums).

        The parent is charged the whole remainder at once; the children's charges then compose
        with each other and with the parent by basic (concurrent) composition (Vadhan & Wang 2021;
        Lyu 2022), so together they never exceed the parent's budget.

        Examples
        --------
        >>> from dpkit.accounting import Accountant, PureDP
        >>> parts = Accountant(PureDP(epsilon=1.2)).split(6)
        >>> round(parts[0].budget.epsilon, 12)
        0.2
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise PrivacyParameterError(f"n must be a positive integer, got {n!r}.")
        with self._lock:
            s = self._state
            if self._method == "zcdp":
                rho_r = max(0.0, self._rho_max - float(s.rho))
                if rho_r <= 0:
                    raise BudgetExceededError("no budget left to split.", remaining=rho_r)
                # children are zCDP filters whose ρ add up to what is left (concurrent
                # composition, Lyu 2022), so the whole stays within ρ* and hence the budget
                children = [Accountant(ZCDP(rho=rho_r / n)) for _ in range(n)]
                self._state = _State(s.eps, s.delta, s.rho + Fraction(rho_r))
                self._ledger.append(LedgerEntry(None, label, 0.0, 0.0, rho_r))
                for child in children:
                    child._relation = self._relation
                return children
            eps_r, delta_r, _ = self._remaining_unlocked()
            if eps_r <= 0:
                raise BudgetExceededError("no budget left to split.", remaining=eps_r)
            b = self._budget
            if isinstance(b, PureDP):
                children = [Accountant(PureDP(epsilon=eps_r / n)) for _ in range(n)]
            else:
                children = [
                    Accountant(ApproxDP(epsilon=eps_r / n, delta=delta_r / n)) for _ in range(n)
                ]
            self._state = _State(s.eps + Fraction(eps_r), s.delta + Fraction(delta_r), s.rho)
            self._ledger.append(LedgerEntry(None, label, eps_r, delta_r, 0.0))
            for child in children:
                child._relation = self._relation
            return children

    def parallel(
        self, parts: DisjointParts, *, budget: Guarantee, label: str | None = None
    ) -> dict[Hashable, Any]:
        """Give each of several disjoint parts of the units ``budget``, paying it once.

        Parallel composition (McSherry 2009): when every unit's data lie in one part only,
        releases over the parts that each keep ``budget`` keep ``budget`` together, so this
        accountant is charged ``budget`` once (as a :class:`~dpkit.accounting.PureDPEvent`,
        :class:`~dpkit.accounting.ApproxDPEvent` or :class:`~dpkit.accounting.ZCDPEvent`),
        not once per part. ``parts`` must be disjoint by construction, a
        :class:`~dpkit.accounting.DisjointParts` such as
        :meth:`dpkit.frame.Query.partition_by`'s result, never by promise; each part gets a
        new accountant of ``budget`` that only that part's releases can reach.

        Returns
        -------
        dict
            Each part's key to the part, bound to its accountant (for
            :meth:`~dpkit.frame.Query.partition_by`: a :class:`~dpkit.frame.Query`).

        Raises
        ------
        BudgetExceededError
            ``budget`` does not fit what is left; nothing was charged.
        """
        return parallel(self, parts, budget, label)

    def __repr__(self) -> str:
        return accountant_repr(self)

    def _repr_html_(self) -> str:
        """A notebook's view: the budget, what was spent and what is left, then the ledger."""
        return accountant_html(self)
