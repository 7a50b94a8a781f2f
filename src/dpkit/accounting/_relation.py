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

from dpkit.accounting._events import MIXED_NEIGHBOURING, Event, declared_neighbouring
from dpkit.accounting._guarantees import Neighbouring
from dpkit.errors import PrivacyParameterError

__all__ = ["Relation", "check_relation"]


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
