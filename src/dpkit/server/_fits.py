"""Whether a charge fits an analyst's budget and the dataset's total: the one arithmetic.

The ledger's charge (under the rows' locks, :mod:`._charges`) and a dry run's warning (a read
without locks, advisory) both decide by :func:`check_fits`, in the ledger's integer units; a
refusal names the resource that runs out (ε, δ or ρ), what is left of it and the price.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpkit.errors import BudgetExceededError, DPKitError, PrivacyParameterError
from dpkit.server._sql import from_units

if TYPE_CHECKING:
    from dpkit.server._charges import Ask

__all__ = ["Refusal", "check_fits", "price_in"]


@dataclass(frozen=True)
class Refusal:
    """Why a charge does not fit: the ``error`` the charge raises, and for a dry run what ran
    out: ``short`` lists ``(resource, price, remaining)`` of the analyst's own budget,
    ``shared`` names the dataset total's resource (its numbers are the other analysts'
    spending: not shown)."""

    error: DPKitError
    short: tuple[tuple[str, float, float], ...] = ()
    shared: str | None = None

    def would(self) -> str:
        """The dry run's line: what would be refused, and why."""
        if self.short:
            what = "; ".join(
                f"remaining {r} {left:.6g} < price {p:.6g}" for r, p, left in self.short
            )
            return f"would be refused: {what} (your budget on this dataset)."
        if self.shared is not None:
            return (
                f"would be refused: the dataset's total {self.shared} budget (shared by all "
                "analysts) would be exceeded."
            )
        return f"would be refused: {self.error}"


_NO_RHO = (
    "{whose} is in zero-concentrated DP (rho); a request with delta > 0 "
    "has no lossless conversion to rho, so it is refused. Ask with rho= (Gaussian noise) or "
    "with delta=0 (pure epsilon-DP, charged rho = epsilon^2/2). Nothing was charged or released."
)
_NO_EPSILON = (
    "{whose} is in (epsilon, delta); a rho request is paid there as "
    "(epsilon(delta), delta): give delta with rho. Nothing was charged or released."
)


def price_in(row_rho: int | None, a: Ask, whose: str) -> tuple[int, int, int]:
    """What ``a`` costs a budget row, as (ε, δ, ρ) units: its ρ price on a ρ budget
    (``row_rho`` not ``None``), its (ε, δ) price otherwise; refused where it has none."""
    if row_rho is not None:
        if a.ru is None:
            raise PrivacyParameterError(_NO_RHO.format(whose=whose))
        return 0, 0, a.ru
    if a.eu is None:
        raise PrivacyParameterError(_NO_EPSILON.format(whose=whose))
    return a.eu, a.du, 0


def check_fits(
    a: Ask, d: Sequence[Any], b: Sequence[Any]
) -> tuple[int, int, int, int, int, int] | Refusal:
    """What ``a`` costs the analyst's budget row ``b`` and the dataset's row ``d``, in units
    (``(ε, δ, ρ)`` each), or its :class:`Refusal`, naming the exhausted resource and what is
    left of it. The one arithmetic of "does this charge fit": the charge (under the rows'
    locks, raising the refusal's error) and the dry run's warning (a read, advisory).

    ``b``: ``epsilon, delta, spent_epsilon, spent_delta, rho, spent_rho``; ``d``:
    ``total_epsilon, total_delta, spent_epsilon, spent_delta, version, total_rho, spent_rho``.
    """
    # Each row pays in its own unit; a price it cannot pay losslessly is refused.
    try:
        eu, du, ru = price_in(b[4], a, "your budget on this dataset")
        de, dd, dr = price_in(d[5], a, "this dataset's total budget")
    except PrivacyParameterError as exc:
        return Refusal(exc)
    if ru and b[5] + ru > b[4]:
        price, left = from_units(ru), from_units(b[4] - b[5])
        return Refusal(
            BudgetExceededError(
                f"the query costs rho={price:.6g} but your budget on this dataset has "
                f"rho={left:.6g} left. Nothing was charged or released.",
                requested={"rho": price},
                remaining={"rho": left},
            ),
            short=(("rho", price, left),),
        )
    if dr and d[6] + dr > d[5]:
        return Refusal(
            BudgetExceededError(
                "the dataset's total rho budget (shared by all analysts) would be exceeded by "
                "this query. Nothing was charged or released.",
                requested={"rho": from_units(dr)},
            ),
            shared="rho",
        )
    over = [
        (name, from_units(price), from_units(total - spent), fmt)
        for name, price, total, spent, fmt in (
            ("epsilon", eu, b[0], b[2], ".6g"),
            ("delta", du, b[1], b[3], ".3g"),
        )
        if spent + price > total
    ]
    if over:
        # name the resource that runs out (both when both do): the fixes differ (a smaller
        # epsilon; delta = 0 or a smaller delta)
        costs = " and ".join(
            f"{name}={price:{fmt}} but your budget on this dataset has {name}={left:{fmt}} left"
            for name, price, left, fmt in over
        )
        return Refusal(
            BudgetExceededError(
                f"the query costs {costs}. Nothing was charged or released.",
                requested=(from_units(eu), from_units(du)),
                remaining=(from_units(b[0] - b[2]), from_units(b[1] - b[3])),
            ),
            short=tuple((name, price, left) for name, price, left, _ in over),
        )
    if d[2] + de > d[0] or d[3] + dd > d[1]:
        return Refusal(
            BudgetExceededError(
                "the dataset's total budget (shared by all analysts) would be exceeded by this "
                "query. Nothing was charged or released.",
                requested=(from_units(de), from_units(dd)),
            ),
            shared="epsilon" if d[2] + de > d[0] else "delta",
        )
    return eu, du, ru, de, dd, dr
