"""The reusable holdout: differential privacy against adaptive overfitting (Dwork et al. 2015).

:class:`Thresholdout` (Dwork et al. 2015) answers adaptively chosen queries about a holdout set
so that the answers stay accurate for the population; :func:`reusable_holdout_experiment`
reproduces the paper's demonstration. See ``docs/holdout.md``.
"""

from __future__ import annotations

from dpkit.holdout._experiment import HoldoutCurves, reusable_holdout_experiment
from dpkit.holdout._thresholdout import Thresholdout

__all__ = ["HoldoutCurves", "Thresholdout", "reusable_holdout_experiment"]
