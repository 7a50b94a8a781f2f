"""What an accountant tells people: refusals that name the missing resource, and its display."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from dpkit.accounting._budget import within
from dpkit.accounting._costs import InfiniteCost
from dpkit.accounting._events import ApproxDPEvent, Event
from dpkit.accounting._guarantees import Guarantee, shown
from dpkit.errors import PrivacyParameterError

if TYPE_CHECKING:
    from dpkit.accounting._accountant import Accountant

__all__ = ["accountant_html", "accountant_repr", "budget_hint", "exhausted_text", "refusal_text"]

_Triple = tuple[float, float, float]


def exhausted_text(
    budget: Guarantee,
    rho_max: float | None,
    spent: _Triple,
    left: _Triple,
    event: Event,
    pure: bool,
) -> str:
    """Which resource (ε, δ or ρ) a refused ``event`` would overspend, and the fix.

    ``spent`` and ``left`` are (ε, δ, ρ); ``rho_max`` is the ρ filter's budget (``None``
    where charges are paid in (ε, δ)); ``pure`` whether the event has a pure ε cost. Amounts
    are shown as short decimals, spent rounded up and what is left rounded down.

    >>> from dpkit.accounting import ApproxDP, GaussianEvent
    >>> exhausted_text(ApproxDP(epsilon=1.0, delta=1e-6), None, (0.5, 1e-6, 0.0),
    ...                (0.5, 0.0, 0.0), GaussianEvent(sigma=3.0), False)[:60]
    'not enough delta (spent 1e-06 of 1e-06, 0.0 left); this rele'
    """
    if rho_max is not None:
        return (
            f"not enough rho (spent {shown(spent[2], 'up')} of {shown(rho_max, 'down')}, "
            f"{shown(left[2], 'down')} left). Ask for a smaller epsilon (or rho), or start "
            "a new Accountant."
        )
    b_eps = getattr(budget, "epsilon", 0.0)
    b_delta = getattr(budget, "delta", 0.0)
    eps_text = (
        f"not enough epsilon (spent {shown(spent[0], 'up')} of {shown(b_eps, 'down')}, "
        f"{shown(left[0], 'down')} left). Ask for epsilon at most {shown(left[0], 'down')}, "
        "or start a new Accountant."
    )
    if pure:
        return eps_text
    if isinstance(event, ApproxDPEvent) and within(
        Fraction(spent[1]) + Fraction(event.delta), b_delta
    ):
        return eps_text
    if left[1] <= 0 or (
        isinstance(event, ApproxDPEvent) and not within(Fraction(event.delta), left[1])
    ):
        return (
            f"not enough delta (spent {shown(spent[1], 'up')} of {shown(b_delta, 'down')}, "
            f"{shown(left[1], 'down')} left); this release needs delta > 0. Use a pure-epsilon "
            "release (Laplace noise, public keys), ask for a smaller delta, or start a new "
            "Accountant with more delta."
        )
    return (
        f"its epsilon at the delta left ({shown(left[1], 'down')}) exceeds the epsilon left "
        f"({shown(left[0], 'down')} of {shown(b_eps, 'down')}). Ask for a smaller epsilon, or "
        "start a new Accountant."
    )


def budget_hint(budget: object, unexpected: dict[str, object]) -> str:
    """What to pass to :class:`~dpkit.accounting.Accountant`, for a call that passed something
    else. Names the keywords given (parameter names are schema), never their values.

    >>> import textwrap
    >>> print(textwrap.fill(budget_hint(None, {"epsilon": 1}), 90))
    Accountant takes a budget guarantee, not epsilon=: pass Accountant(PureDP(epsilon=...)),
    or Accountant(ApproxDP(epsilon=..., delta=...)) for (ε, δ), or Accountant(ZCDP(rho=...)).
    """
    if unexpected:
        names = ", ".join(f"{k}=" for k in sorted(unexpected))
        head = f"Accountant takes a budget guarantee, not {names}"
    elif budget is None:
        head = "Accountant needs a budget"
    else:
        head = f"budget must be a guarantee, got a {type(budget).__name__}"
    return (
        f"{head}: pass Accountant(PureDP(epsilon=...)), or Accountant(ApproxDP(epsilon=..., "
        "delta=...)) for (ε, δ), or Accountant(ZCDP(rho=...))."
    )


def accountant_html(acct: Accountant) -> str:
    """The notebook view of an accountant: budget, spent, remaining, then its ledger."""
    from dpkit._html import table

    rows = [
        ("budget", repr(acct.budget)),
        ("method", acct.method),
        ("spent", repr(acct.spent)),
        ("remaining", repr(acct.remaining)),
    ]
    ledger = [
        (
            e.label or "",
            shown(e.epsilon, "up"),
            shown(e.delta, "up"),
            shown(e.rho, "up"),
            type(e.event).__name__ if e.event is not None else "",
        )
        for e in acct.ledger
    ]
    return table("Accountant", rows) + table(
        None, ledger, header=("label", "epsilon", "delta", "rho", "event")
    )


def _cost_text(acct: Accountant, event: Event) -> str:
    """A short description of what ``event`` would cost, for error messages."""
    name = type(event).__name__
    try:
        if acct._method == "zcdp":
            return f"{name}, rho={float(acct._cost_in_rho(event)):.6g}"
        pure = acct._pure_cost(event)
    except PrivacyParameterError:
        return name
    except InfiniteCost:
        return f"{name}, infinite cost"
    return f"{name}, epsilon={float(pure):.6g}" if pure is not None else name


def refusal_text(acct: Accountant, event: Event, label: str | None) -> str:
    """The message of a charge refused for want of budget (called under the accountant's lock).

    Names the label, the event's kind and cost, the resource that would be overspent and the fix.
    """
    what = f"{label!r} ({_cost_text(acct, event)})" if label else _cost_text(acct, event)
    try:
        pure = acct._pure_cost(event) is not None
    except (PrivacyParameterError, InfiniteCost):
        pure = False
    exhausted = exhausted_text(
        acct._budget,
        acct._rho_max if acct._method == "zcdp" else None,
        acct._spent_of(acct._state),
        acct._remaining_unlocked(),
        event,
        pure,
    )
    return (
        f"charging {what} would exceed the budget {acct._budget!r}: "
        f"{exhausted} Nothing was charged or released."
    )


def accountant_repr(acct: Accountant) -> str:
    """``Accountant(budget, method=..., spent=...)``."""
    return f"Accountant({acct.budget!r}, method={acct.method!r}, spent={acct.spent!r})"
