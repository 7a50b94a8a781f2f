"""Private models with scikit-learn's conventions.

Every estimator takes its privacy parameters and data bounds as keyword arguments, checks
them in ``fit`` (a missing bound is an error: dpkit never reads bounds from the data), charges
the composed event of the whole fit to the ``accountant`` it was given *before* releasing
anything, and exposes what it cost as ``event_``. See ``docs/ml.md``.
"""

from __future__ import annotations

from dpkit.ml._linear import LinearRegression
from dpkit.ml._logistic import LogisticRegression

__all__ = [
    "LinearRegression",
    "LogisticRegression",
]
