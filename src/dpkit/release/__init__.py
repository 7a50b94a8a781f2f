"""Private release of whole datasets: public domains, synthetic tables and utility reports.

Seed 000 §5 asks for a private *dataset* rather than a query interface. This package builds
synthetic tables from noisy low-order marginals under one zCDP budget (:class:`Synthesizer`,
MST- and AIM-style), on a public :class:`Domain` (or one estimated privately with
:func:`discover_domain`), and measures their utility against the real data
(:func:`utility_report`). See ``docs/synthetic.md``.
"""

from __future__ import annotations

from dpkit.release._discovery import discover_domain, partition_threshold
from dpkit.release._domain import Categorical, Column, Domain, Numeric
from dpkit.release._report import ColumnUtility, TrainTestScore, UtilityReport, utility_report
from dpkit.release._synth import Synthesizer, SyntheticModel

__all__ = [
    "Categorical",
    "Column",
    "ColumnUtility",
    "Domain",
    "Numeric",
    "Synthesizer",
    "SyntheticModel",
    "TrainTestScore",
    "UtilityReport",
    "discover_domain",
    "partition_threshold",
    "utility_report",
]
