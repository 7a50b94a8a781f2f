"""Empirical privacy auditing: lower bounds on ε by hypothesis testing, for any mechanism.

Kamath (2020, "Intro to Differential Privacy", the hypothesis-testing view) shows that if a
mechanism is (ε, δ)-DP then *every* test telling neighbouring datasets ``D`` and ``D′`` apart from
one output has false positive rate ``p`` and false negative rate ``q`` with ``p + e^ε q ≥ 1 − δ``.
Running a mechanism many times on ``D`` and ``D′`` and bounding ``p`` and ``q`` with exact binomial
intervals therefore gives a **lower bound** on the ε it really provides. If that bound exceeds the
claimed ε, the implementation is wrong.

* :func:`epsilon_lower_bound` audits any callable; :func:`epsilon_from_counts` is the bound from
  error counts alone; :func:`clopper_pearson` the exact interval.
* Regions (:class:`Above`, :class:`Below`, :class:`Interval`, :class:`InBins`, :class:`InSet`,
  :class:`OnLattice`, :class:`Residue`, …) describe tests.
"""

from __future__ import annotations

from dpkit.audit._audit import epsilon_lower_bound, is_batched
from dpkit.audit._clopper_pearson import clopper_pearson
from dpkit.audit._regions import (
    Above,
    Below,
    Coordinate,
    InBins,
    InSet,
    Interval,
    LinearScore,
    OffLattice,
    OnLattice,
    Predicate,
    Region,
    Residue,
    RowsIn,
)
from dpkit.audit._result import AuditResult, epsilon_from_counts

__all__ = [
    "Above",
    "AuditResult",
    "Below",
    "Coordinate",
    "InBins",
    "InSet",
    "Interval",
    "LinearScore",
    "OffLattice",
    "OnLattice",
    "Predicate",
    "Region",
    "Residue",
    "RowsIn",
    "clopper_pearson",
    "epsilon_from_counts",
    "epsilon_lower_bound",
    "is_batched",
]
