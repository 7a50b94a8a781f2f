"""Budgets in zero-concentrated DP (ρ) in the service's ledger: a query's ρ price, and the (ε, δ)
a remaining ρ is shown as.

A budget row of the ledger (an analyst's on a dataset, or the dataset's total) may be declared in
ρ (Bun & Steinke 2016, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower
Bounds"). zCDP composes by adding ρ (their Lemma 2.3), so the ledger adds each charge's ρ to the
row's spent ρ exactly (in its integer units) and checks it against the row's ρ: no conversion to
(ε, δ) at each charge, hence none of the loss of composing converted (ε, δ) pairs. A query pays a
ρ budget:

* ``rho`` when it was asked in ρ (Gaussian noise: its privacy curve *is* ρ-zCDP);
* ε²/2 when it is ε-DP (δ = 0): ε-DP implies (ε²/2)-zCDP (their Proposition 1.4);
* nothing it could pay losslessly when it is (ε, δ > 0)-DP: approximate DP implies no zCDP
  bound at all, so such a request is refused by a ρ budget (with a message saying what to ask).

The (ε, δ) shown beside a remaining ρ is only for reading: ε(δ) of ρ-zCDP (Canonne, Kamath &
Steinke 2020, "The Discrete Gaussian for Differential Privacy", Corollary 13) at the fixed
:data:`SHOWN_DELTA`.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.accounting._guarantees import zcdp_epsilon
from dpkit.server._sql import from_units

__all__ = ["SHOWN_DELTA", "rho_price", "rho_shown"]

SHOWN_DELTA = 1e-6
"""The δ at which a remaining ρ is shown as (ε, δ) (display only; nothing is charged at it)."""


def rho_price(epsilon: float, delta: float, rho: float | None) -> float | None:
    """The ρ a query priced (ε, δ) (and ``rho`` when asked in ρ) costs a ρ budget, or ``None``
    where it has no lossless ρ (δ > 0 without ``rho``).

    >>> rho_price(0.5, 0.0, None)  # Bun & Steinke 2016, Proposition 1.4: ε-DP ⇒ (ε²/2)-zCDP
    0.125
    >>> rho_price(1.2, 1e-6, 0.05), rho_price(1.0, 1e-6, None)
    (0.05, None)
    """
    if rho is not None:
        return rho
    if epsilon == 0 and delta == 0:
        return 0.0  # a free (post-processing) query
    if delta != 0:
        return None
    # ε·ε/2 is within 2⁻⁵³ of the exact value, inside the 2⁻⁵⁰ margin by which the ledger's
    # arithmetic (dpkit.accounting._budget) counts every cost, ε's included
    return epsilon * epsilon / 2.0


def rho_shown(remaining_units: int) -> dict[str, Any]:
    """The (ε, δ) that a remaining ρ (in ledger units) implies, at :data:`SHOWN_DELTA`.

    >>> rho_shown(100_000_000_000)  # ρ = 0.1
    {'remaining_as': {'epsilon': 2.142, 'delta': 1e-06}}
    """
    rho = from_units(max(remaining_units, 0))
    eps = zcdp_epsilon(rho, SHOWN_DELTA)
    if eps > 0:  # four significant digits, rounded up: a reader is never shown less than it is
        step = 10.0 ** (math.floor(math.log10(eps)) - 3)
        eps = float(f"{math.ceil(eps / step) * step:.4g}")
    return {"remaining_as": {"epsilon": eps, "delta": SHOWN_DELTA}}
