"""Parallel composition: releases over disjoint parts of the privacy units pay the largest, once.

If the units are split into parts so that each unit's data are in exactly one part, and each
part's releases together satisfy a guarantee G with respect to that part's units, then all the
releases together satisfy G: adding or removing one unit changes one part only, and the other
parts' releases are computed from data the unit is not in (McSherry 2009, "Privacy integrated
queries", Theorem 4; the same holds for (ε, δ)-DP and zCDP, and with each part's queries chosen
adaptively, since a part's filter bounds its interaction whatever the others answered). So
``k`` parts of budget G cost G, not k·G. The argument is one of add/remove neighbours (a
replaced unit may move between parts): see ``_PARTS`` below.

The disjointness must not be a promise: :meth:`Accountant.parallel` accepts only a
:class:`DisjointParts`, an object that made the parts itself (``dpkit.frame.Query.partition_by``
assigns every unit to one part by construction), and hands each part's budget to the part only
(:meth:`DisjointParts.bind`), never to the caller, so no budget of one part can pay for a
release over another part or over the whole table.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from dpkit.accounting._events import ApproxDPEvent, Event, PureDPEvent, ZCDPEvent
from dpkit.accounting._guarantees import ZCDP, ApproxDP, Guarantee, Neighbouring, PureDP
from dpkit.accounting._relation import check_relation
from dpkit.errors import PrivacyParameterError

if TYPE_CHECKING:
    from dpkit.accounting._accountant import Accountant

__all__ = ["DisjointParts", "parallel"]


class DisjointParts(ABC):
    """Parts of a dataset whose privacy units are disjoint *by construction*.

    A subclass builds the parts itself, so that every unit's data lie in one part only, and
    binds each part to the accountant that pays for it. dpkit's own: the result of
    :meth:`dpkit.frame.Query.partition_by`.
    """

    @property
    @abstractmethod
    def keys(self) -> tuple[Hashable, ...]:
        """The parts' public keys, one per part."""

    @abstractmethod
    def bind(self, key: Hashable, accountant: Accountant) -> Any:
        """Part ``key`` with its releases paid by ``accountant`` (which only it may reach)."""

    @property
    def neighbouring(self) -> Neighbouring | None:
        """The relation the parts' releases are computed under, if the parts know it.

        ``None`` (default): they will declare it release by release. Parts declaring
        replacement are refused by :meth:`Accountant.parallel` before it charges anything
        (parallel composition is an add/remove argument: see ``_PARTS``).
        """
        return None


# Parallel composition is an add/remove argument: adding or removing a unit changes one part.
# Replacing a unit can move it from one part to another (the parts are made from its data), so
# under replacement two parts change, each by an add/remove step: the parts' replace-one
# guarantees say nothing about that, and the whole is not ``budget``. So the parent pays an
# add/remove event, and every part's accountant shares the parent's relation: a replace-one
# release in a part (or in the parent, before or after) is refused before it is charged.
_PARTS = Neighbouring.ADD_REMOVE


def _as_event(budget: Guarantee) -> Event:
    """The budget of every part, as the one event the parent pays for all of them."""
    if isinstance(budget, PureDP):
        return PureDPEvent(epsilon=budget.epsilon, neighbouring=_PARTS)
    if isinstance(budget, ApproxDP):
        if budget.delta == 0:
            return PureDPEvent(epsilon=budget.epsilon, neighbouring=_PARTS)
        return ApproxDPEvent(epsilon=budget.epsilon, delta=budget.delta, neighbouring=_PARTS)
    if isinstance(budget, ZCDP):
        return ZCDPEvent(rho=budget.rho, neighbouring=_PARTS)
    raise PrivacyParameterError(
        "budget must be a guarantee for each part: PureDP(epsilon=...), ApproxDP(epsilon=..., "
        f"delta=...) or ZCDP(rho=...), got a {type(budget).__name__}."
    )


def parallel(
    parent: Accountant, parts: DisjointParts, budget: Guarantee, label: str | None
) -> dict[Hashable, Any]:
    """:meth:`Accountant.parallel` (see there)."""
    if not isinstance(parts, DisjointParts):
        raise PrivacyParameterError(
            "parallel composition needs parts that are disjoint by construction, such as "
            f"dpkit.frame.Query.partition_by(...), got a {type(parts).__name__}: a promise "
            "that data are disjoint is not accepted."
        )
    keys = parts.keys
    if not keys:
        raise PrivacyParameterError("parallel composition needs at least one part.")
    event = _as_event(budget)
    # parts whose releases will all be replace-one ones could never be paid: refuse up front
    check_relation(_PARTS, parts.neighbouring)
    delta = budget.delta if isinstance(budget, ApproxDP) and budget.delta > 0 else None
    parent.charge(event, label=label or f"parallel over {len(keys)} parts", delta=delta)
    out: dict[Hashable, Any] = {}
    for k in keys:
        child = type(parent)(budget)
        child._relation = parent._relation  # (shared: checked like the parent's own charges)
        out[k] = parts.bind(k, child)
    return out
