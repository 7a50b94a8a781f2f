"""The neighbouring relation an accountant is charged under, checked at every composition point.

Guarantees under add/remove of one unit and under replacement of one unit do not compose into a
guarantee under either (an add/remove bound says nothing about a replacement without group
privacy, and a bound that needs the dataset's size public says nothing under add/remove), so
once an event declaring one relation is charged, events declaring the other are refused, before
any charge. Events that declare none (a Laplace or Gaussian with the caller's sensitivity) hold
under the caller's relation and are never refused for it. :class:`Relation` is the state shared
by an accountant and every accountant made from it (:meth:`~dpkit.accounting.Accountant.split`
children, :meth:`~dpkit.accounting.Accountant.parallel` parts); the service's ledger keeps the
same state per dataset (:func:`check_relation` decides for both).
"""

from __future__ import annotations

import threading
from dataclasses import fields, replace

from dpkit.accounting._events import (
    MIXED_NEIGHBOURING,
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ZCDPEvent,
    _PureEpsilon,
    declared_neighbouring,
    leaf_neighbouring,
)
from dpkit.accounting._guarantees import Neighbouring
from dpkit.errors import PrivacyParameterError

__all__ = ["Relation", "check_relation", "holding_under", "undeclared"]


def check_relation(held: Neighbouring | None, asked: Neighbouring | None) -> Neighbouring | None:
    """The relation after charging an event declaring ``asked`` where ``held`` was charged.

    Raises :class:`~dpkit.errors.PrivacyParameterError` (naming no value of the caller's) when
    the two are different relations; ``None`` on either side is compatible with anything.

    >>> check_relation(None, Neighbouring.REPLACE)
    <Neighbouring.REPLACE: 'replace'>
    >>> check_relation(Neighbouring.ADD_REMOVE, None)
    <Neighbouring.ADD_REMOVE: 'add_remove'>
    """
    if asked is not None and held is not None and asked is not held:
        raise PrivacyParameterError(MIXED_NEIGHBOURING)
    return asked if asked is not None else held


class Relation:
    """The relation an accountant (and the accountants made from it) is charged under.

    ``lock`` is held across the check and the charge, so two threads charging events of
    different relations cannot both pass the check.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value: Neighbouring | None = None

    def check(self, event: Event) -> Neighbouring | None:
        """The relation ``event`` declares; raises if the accountant holds the other one."""
        r = declared_neighbouring([event])
        check_relation(self.value, r)
        return r


def holding_under(event: Event, neighbouring: Neighbouring | None) -> Event:
    """``event`` with every basic event in it declaring ``neighbouring`` (None: undeclared).

    Only for the code that computed the event's sensitivities under ``neighbouring`` itself
    (a statistic's plan with its ``replace`` flag): it relabels, it does not rescale. An event
    already declaring another relation is refused, never relabelled. A subsampled event keeps
    its own relation (it must already be ``neighbouring``).
    """
    if neighbouring is None:
        return event
    if isinstance(event, ComposedEvent):
        return ComposedEvent(events=tuple(holding_under(e, neighbouring) for e in event.events))
    if isinstance(event, SelfComposedEvent):
        return SelfComposedEvent(holding_under(event.event, neighbouring), count=event.count)
    r = leaf_neighbouring(event)
    if r is not None:
        if r is not neighbouring:
            raise PrivacyParameterError(MIXED_NEIGHBOURING)
        return event
    if not any(f.name == "neighbouring" for f in fields(event)):
        raise PrivacyParameterError(
            f"internal: a {type(event).__name__} cannot declare a neighbouring relation."
        )
    return replace(event, neighbouring=neighbouring)  # type: ignore[call-arg]


def undeclared(event: Event) -> Event:
    """``event`` with its basic events' declared relations removed.

    For the accountants' internal pairs only: a privacy loss pair built around the event by a
    bound that already fixed the relation (a fixed-size sample's, computed via a Poisson pair).
    """
    if isinstance(event, ComposedEvent):
        return ComposedEvent(events=tuple(undeclared(e) for e in event.events))
    if isinstance(event, SelfComposedEvent):
        return SelfComposedEvent(undeclared(event.event), count=event.count)
    if isinstance(event, _BASIC_WITH_RELATION) and event.neighbouring is not None:
        return replace(event, neighbouring=None)
    return event


_BASIC_WITH_RELATION = (
    LaplaceEvent,
    GaussianEvent,
    DiscreteLaplaceEvent,
    DiscreteGaussianEvent,
    RandomizedResponseEvent,
    _PureEpsilon,
    ApproxDPEvent,
    ZCDPEvent,
)
