"""Empirical privacy auditing: lower bounds on ε by hypothesis testing, for any mechanism.

Kamath (2020, "Intro to Differential Privacy", the hypothesis-testing view) shows that if a
mechanism is (ε, δ)-DP then *every* test telling neighbouring datasets ``D`` and ``D′`` apart from
one output has false positive rate ``p`` and false negative rate ``q`` with ``p + e^ε q ≥ 1 − δ``.
Running a mechanism many times on ``D`` and ``D′`` and bounding ``p`` and ``q`` with exact binomial
intervals therefore gives a **lower bound** on the ε it really provides. If that bound exceeds the
claimed ε, the implementation is wrong.

* :func:`epsilon_lower_bound` audits any callable; :func:`epsilon_from_counts` is the bound from
  error counts alone; :func:`clopper_pearson` the exact interval.
* :func:`one_run_audit` audits a training run in one run (Steinke, Nasr & Jagielski 2023):
  canaries included by secret coins, one score each, :func:`one_run_bound` the ε lower bound.
* Regions (:class:`Above`, :class:`Below`, :class:`Interval`, :class:`InBins`, :class:`InSet`,
  :class:`OnLattice`, :class:`Residue`, …) describe tests.
"""

from __future__ import annotations

from dpkit.audit._audit import epsilon_lower_bound, is_batched
from dpkit.audit._clopper_pearson import clopper_pearson
from dpkit.audit._one_run import (
    OneRunResult,
    draw_canary_coins,
    one_run_audit,
    one_run_bound,
    one_run_epsilon,
    one_run_p_value,
)
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
    "OneRunResult",
    "Predicate",
    "Region",
    "Residue",
    "RowsIn",
    "clopper_pearson",
    "draw_canary_coins",
    "epsilon_from_counts",
    "epsilon_lower_bound",
    "is_batched",
    "one_run_audit",
    "one_run_bound",
    "one_run_epsilon",
    "one_run_p_value",
]
