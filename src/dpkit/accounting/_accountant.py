"""Accountants: budgets that cannot be overspent, by concurrent or adaptively chosen queries."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from fractions import Fraction

from dpkit._checks import check_delta
from dpkit.accounting._bounds import approx_bound, pure_epsilon, zcdp_rho
from dpkit.accounting._compose import compose, epsilon_of
from dpkit.accounting._events import ApproxDPEvent, Event, SelfComposedEvent, flatten
from dpkit.accounting._guarantees import ZCDP, ApproxDP, Guarantee, PureDP, _unchecked, zcdp_epsilon
from dpkit.errors import BudgetExceededError, PrivacyParameterError

__all__ = ["Accountant", "LedgerEntry"]

# Budgets are compared with a relative slack of 1e-12 so that ε/n charged n times fits although
# the decimal ε/n is rounded to binary (0.1 is stored as 0.1000000000000000055…).
_SLACK = 1e-12


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded charge: the event, its label and what it cost in each currency.

    ``epsilon`` is spent by basic composition, ``delta`` is added δ, ``rho`` is zCDP ρ.
    """

    event: Event | None
    label: str | None
    epsilon: float
    delta: float
    rho: float


@dataclass(frozen=True)
class _State:
    eps: Fraction
    delta: Fraction
    rho: Fraction


class Accountant:
    """A privacy filter: records charges and refuses any that would exceed the budget.

    Parameters
    ----------
    budget : PureDP | ApproxDP | ZCDP
        The total guarantee the interaction must keep.
    method : {"auto", "basic", "zcdp"}
        How charges are combined (see below). ``"auto"`` is ``"basic"`` for a :class:`PureDP`
        budget and ``"zcdp"`` otherwise.
    event_delta : float, optional
        For an :class:`ApproxDP` budget, the δ at which an event with no pure or zCDP bound (e.g.
        a Poisson-subsampled Gaussian, or any event under ``method="basic"``) is converted to
        (ε, δ); default ``budget.delta / 10``.

    Notes
    -----
    Privacy guarantee. The whole interaction, with every query chosen after seeing the answers to
    earlier ones, satisfies ``budget``:

    * :class:`PureDP` budget — ε's add (basic composition). With adaptively chosen ε_i this is
      the basic-composition privacy filter of Rogers, Roth, Ullman & Vadhan (2016, Theorem 3.1).
    * :class:`ZCDP` budget — ρ's add; the zCDP filter: for every order α the Rényi filter of
      Feldman & Zrnic (2021, Theorem 3.1) applies with budget αρ (see also Whitehouse, Ramdas,
      Rogers & Wu 2023), so the interaction is ρ-zCDP.
    * :class:`ApproxDP` budget, ``method="zcdp"`` — three currencies: pure ε_p (basic sum), zCDP
      ρ and a δ_a spent by (ε, δ) events. The interaction is (ε_p + ε_ρ, δ)-DP with
      ε_ρ = CKS(ρ, δ - δ_a) (Canonne, Kamath & Steinke 2020, Cor. 13): the δ_a part follows from
      the decomposition of (ε, δ)-DP mechanisms and a union bound (Kairouz, Oh & Viswanath 2015;
      Bun & Steinke 2016, §8), the pure losses are bounded by ε_p pointwise, and what remains is a
      zCDP filter. Each event is charged in whichever currency makes the total smallest at that
      moment (a choice made from past charges only, never from data). Gaussian events are thus
      accounted by zCDP at the end rather than converted to (ε, δ) one by one, which is much
      tighter for many of them; a handful of pure charges (ε/6 for each of six sums) still add up
      exactly.

      When no currency can pay for an event that has a privacy curve (a Gaussian calibrated
      exactly to the whole budget is refused by the lossy zCDP→(ε, δ) conversion), the whole
      event may instead be paid in the (ε, δ) currency as ``(ε(δ_i), δ_i)``, with ε(δ_i) its
      tightest ε at δ_i (:func:`~dpkit.accounting.epsilon_of`) and δ_i the smallest-total-ε
      feasible choice among: the caller's hint (``charge(..., delta=)``, the δ the mechanism was
      calibrated for), ``event_delta`` and all the δ still unspent. δ_i depends only on the
      event, the hint and past charges, never on data, so this is a basic-composition filter with
      adaptively chosen (ε_i, δ_i) (Rogers, Roth, Ullman & Vadhan 2016, Theorem 3.1) for the δ_a
      part, and the zCDP part keeps its guarantee at δ − δ_a as before. zCDP stays preferred
      whenever it fits, so many small Gaussians are still accounted tightly.
    * :class:`ApproxDP` budget, ``method="basic"`` — ε's and δ's add (Dwork et al. 2006 as a
      filter: Rogers et al. 2016).

    ``charge`` is atomic and thread-safe: either the whole event fits and is recorded, or
    :class:`~dpkit.errors.BudgetExceededError` is raised and nothing changes. Budgets are compared
    with a relative slack of 1e-12 so that n charges of ε/n fit.

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
    >>> z = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    >>> for _ in range(20):
    ...     z.charge(GaussianEvent(sigma=25.0))
    >>> round(z.spent.epsilon, 3)
    0.799
    """

    def __init__(
        self, budget: Guarantee, *, method: str = "auto", event_delta: float | None = None
    ) -> None:
        if not isinstance(budget, PureDP | ApproxDP | ZCDP):
            raise PrivacyParameterError(
                "budget must be PureDP(epsilon=...), ApproxDP(epsilon=..., delta=...) or "
                f"ZCDP(rho=...), got {budget!r}."
            )
        allowed = {
            PureDP: ("auto", "basic"),
            ApproxDP: ("auto", "basic", "zcdp"),
            ZCDP: ("auto", "zcdp"),
        }
        if method not in allowed[type(budget)]:
            raise PrivacyParameterError(
                f"method for a {type(budget).__name__} budget must be one of "
                f"{allowed[type(budget)]}, got {method!r}."
            )
        if method == "auto":
            method = "basic" if isinstance(budget, PureDP) else "zcdp"
        self._budget = budget
        self._method = method
        if isinstance(budget, ApproxDP):
            if event_delta is None:
                event_delta = budget.delta / 10
            elif not (0 < float(event_delta) <= budget.delta):
                raise PrivacyParameterError(
                    f"event_delta must be in (0, budget.delta], got {event_delta!r}."
                )
        self._event_delta = float(event_delta or 0.0)
        self._lock = threading.Lock()
        self._state = _State(Fraction(0), Fraction(0), Fraction(0))
        self._ledger: list[LedgerEntry] = []

    # -- what the interaction has cost -------------------------------------------------------
    @property
    def budget(self) -> Guarantee:
        """The total budget."""
        return self._budget

    def _spent_of(self, s: _State) -> tuple[float, float, float]:
        """(ε, δ, ρ) spent in state ``s``."""
        b = self._budget
        if isinstance(b, ApproxDP) and s.rho > 0:
            rest = b.delta - float(s.delta)
            eps_rho = zcdp_epsilon(float(s.rho), rest) if rest > 0 else math.inf
            return float(s.eps) + eps_rho, b.delta, float(s.rho)
        return float(s.eps), float(s.delta), float(s.rho)

    def _fits(self, s: _State) -> bool:
        b = self._budget
        eps, _, rho = self._spent_of(s)
        if isinstance(b, ZCDP):
            return rho <= b.rho * (1 + _SLACK)
        if isinstance(b, PureDP):
            return eps <= b.epsilon * (1 + _SLACK)
        ok_delta = (
            float(s.delta) < b.delta if s.rho > 0 else float(s.delta) <= b.delta * (1 + _SLACK)
        )
        return ok_delta and eps <= b.epsilon * (1 + _SLACK)

    @property
    def spent(self) -> Guarantee:
        """The guarantee of everything charged so far (zero before the first charge)."""
        with self._lock:
            eps, delta, rho = self._spent_of(self._state)
        if isinstance(self._budget, ZCDP):
            return _unchecked(ZCDP, rho=rho)
        if isinstance(self._budget, PureDP):
            return _unchecked(PureDP, epsilon=eps)
        return _unchecked(ApproxDP, epsilon=eps, delta=delta)

    @property
    def remaining(self) -> Guarantee:
        """Budget minus spent, component by component (floored at zero)."""
        spent = self.spent
        b = self._budget
        if isinstance(b, ZCDP):
            return _unchecked(ZCDP, rho=max(0.0, b.rho - spent.rho))  # type: ignore[attr-defined]
        if isinstance(b, PureDP):
            return _unchecked(PureDP, epsilon=max(0.0, b.epsilon - spent.epsilon))  # type: ignore[attr-defined]
        return _unchecked(
            ApproxDP,
            epsilon=max(0.0, b.epsilon - spent.epsilon),  # type: ignore[attr-defined]
            delta=max(0.0, b.delta - spent.delta),  # type: ignore[attr-defined]
        )

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """Every recorded charge, oldest first."""
        with self._lock:
            return tuple(self._ledger)

    # -- charging ----------------------------------------------------------------------------
    def _options(self, event: Event, count: int) -> list[tuple[Fraction, Fraction, Fraction]]:
        """The ways (ε, δ, ρ) one leaf event repeated ``count`` times can be paid for."""
        b = self._budget
        out: list[tuple[Fraction, Fraction, Fraction]] = []
        pe = pure_epsilon(event)
        if pe is not None:
            out.append((count * Fraction(pe), Fraction(0), Fraction(0)))
        if isinstance(b, ZCDP) or (isinstance(b, ApproxDP) and self._method == "zcdp"):
            r = zcdp_rho(event)
            if r is not None:
                out.append((Fraction(0), Fraction(0), count * Fraction(r)))
        if isinstance(b, ApproxDP):
            if isinstance(event, ApproxDPEvent):
                out.append(
                    (count * Fraction(event.epsilon), count * Fraction(event.delta), Fraction(0))
                )
            elif (pe is None and not out) or (self._method == "basic" and pe is None):
                target = SelfComposedEvent(event, count=count) if count > 1 else event
                bound = approx_bound(event, self._event_delta) if count == 1 else None
                if bound is None:
                    eps = compose(target).epsilon(self._event_delta)
                    bound = (eps, self._event_delta)
                if math.isfinite(bound[0]):
                    out.append((Fraction(bound[0]), Fraction(bound[1]), Fraction(0)))
        return out

    def _curve_plan(
        self, event: Event, hint: float | None
    ) -> tuple[_State, list[LedgerEntry]] | None:
        """Pay the whole ``event`` as (ε(δ_i), δ_i) for the best feasible candidate δ_i."""
        b = self._budget
        if not isinstance(b, ApproxDP):
            return None
        s = self._state
        rest = b.delta - float(s.delta)
        candidates = {self._event_delta, rest}
        if hint is not None:
            candidates.add(hint)
        best: tuple[float, _State, float, float] | None = None
        for d in sorted(candidates):
            if not 0 < d <= rest:
                continue
            try:
                eps = epsilon_of(event, delta=d)
            except PrivacyParameterError:
                continue
            if not math.isfinite(eps):
                continue
            cand = _State(s.eps + Fraction(eps), s.delta + Fraction(d), s.rho)
            if not self._fits(cand):
                continue
            cost = self._spent_of(cand)[0]
            if best is None or cost < best[0]:
                best = (cost, cand, eps, d)
        if best is None:
            return None
        return best[1], [LedgerEntry(event, None, best[2], best[3], 0.0)]

    def _plan(
        self, event: Event, hint: float | None = None
    ) -> tuple[_State, list[LedgerEntry]] | None:
        if not isinstance(event, Event):
            raise PrivacyParameterError(f"charge needs an Event, got {type(event).__name__}.")
        plan = self._leaf_plan(event)
        if plan is None:
            plan = self._curve_plan(event, hint)
        return plan

    def _leaf_plan(self, event: Event) -> tuple[_State, list[LedgerEntry]] | None:
        s = self._state
        parts: list[LedgerEntry] = []
        for leaf, count in flatten(event):
            options = self._options(leaf, count)
            if not options:
                kind = type(self._budget).__name__
                raise PrivacyParameterError(
                    f"{type(leaf).__name__} has no guarantee a {kind} budget can pay for "
                    f"({leaf!r}); use an ApproxDP or ZCDP budget, or a pure-DP mechanism."
                )
            best: tuple[float, _State, tuple[Fraction, Fraction, Fraction]] | None = None
            for opt in options:
                cand = _State(s.eps + opt[0], s.delta + opt[1], s.rho + opt[2])
                if not self._fits(cand):
                    continue
                cost = (
                    self._spent_of(cand)[0]
                    if not isinstance(self._budget, ZCDP)
                    else float(cand.rho)
                )
                if best is None or cost < best[0]:
                    best = (cost, cand, opt)
            if best is None:
                return None
            s = best[1]
            parts.append(
                LedgerEntry(leaf, None, float(best[2][0]), float(best[2][1]), float(best[2][2]))
            )
        return s, parts

    def can_afford(self, event: Event, *, delta: float | None = None) -> bool:
        """Whether ``event`` would fit in the remaining budget now (``delta``: as in charge)."""
        hint = self._hint(delta)
        with self._lock:
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
            The δ the mechanism was calibrated for. Under an :class:`ApproxDP` budget it is one of
            the δ at which an event that no currency can pay for may be paid as (ε(δ), δ).

        Raises
        ------
        BudgetExceededError
            The charge would exceed the budget. Nothing was recorded.
        PrivacyParameterError
            The event cannot be paid for from this kind of budget.
        """
        hint = self._hint(delta)
        with self._lock:
            plan = self._plan(event, hint)
            if plan is None:
                spent = self._spent_of(self._state)
                raise BudgetExceededError(
                    f"charging {event!r} would exceed the budget {self._budget!r} "
                    f"(already spent epsilon={spent[0]:.6g}, delta={spent[1]:.3g}, "
                    f"rho={spent[2]:.6g}); nothing was charged. Use less privacy-costly queries "
                    "or a new budget.",
                    requested=event,
                    remaining=self._remaining_unlocked(),
                )
            state, parts = plan
            self._state = state
            eps = math.fsum(p.epsilon for p in parts)
            delta = math.fsum(p.delta for p in parts)
            rho = math.fsum(p.rho for p in parts)
            self._ledger.append(LedgerEntry(event, label, eps, delta, rho))

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
            eps_r, delta_r, rho_r = self._remaining_unlocked()
            b = self._budget
            if isinstance(b, ZCDP):
                if rho_r <= 0:
                    raise BudgetExceededError(
                        "no budget left to split.", remaining=(eps_r, delta_r, rho_r)
                    )
                children = [Accountant(ZCDP(rho=rho_r / n)) for _ in range(n)]
                add = _State(Fraction(0), Fraction(0), Fraction(rho_r))
            else:
                if eps_r <= 0:
                    raise BudgetExceededError(
                        "no budget left to split.", remaining=(eps_r, delta_r, rho_r)
                    )
                if isinstance(b, PureDP):
                    children = [Accountant(PureDP(epsilon=eps_r / n)) for _ in range(n)]
                else:
                    children = [
                        Accountant(
                            ApproxDP(epsilon=eps_r / n, delta=delta_r / n), method=self._method
                        )
                        for _ in range(n)
                    ]
                add = _State(Fraction(eps_r), Fraction(delta_r), Fraction(0))
            s = self._state
            self._state = _State(s.eps + add.eps, s.delta + add.delta, s.rho + add.rho)
            self._ledger.append(
                LedgerEntry(
                    None,
                    label,
                    eps_r if not isinstance(b, ZCDP) else 0.0,
                    delta_r if isinstance(b, ApproxDP) else 0.0,
                    rho_r if isinstance(b, ZCDP) else 0.0,
                )
            )
            return children

    def __repr__(self) -> str:
        return f"Accountant({self._budget!r}, method={self._method!r}, spent={self.spent!r})"
