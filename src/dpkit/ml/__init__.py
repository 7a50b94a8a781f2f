"""Private models with scikit-learn's conventions.

Every estimator takes its privacy parameters and data bounds as keyword arguments, checks
them in ``fit`` (a missing bound is an error: dpkit never reads bounds from the data), charges
the composed event of the whole fit to the ``accountant`` it was given *before* releasing
anything, and exposes what it cost as ``event_``. Every attribute of a fitted model is a DP
output or a public parameter (nothing per record, no exact count); a classifier's label set is
the declared ``classes``, and records with other labels are dropped, never refused. Per-record
answers (``predict``, ``fit_predict``, ...) are given only on request and, on the training
records, are not private. The lecture notes "Differential Privacy" (on machine
learning) motivate the layer. See ``docs/ml.md``.

* :class:`LinearRegression` — AdaSSP (Wang 2018), (ε, δ)-DP;
* :class:`LogisticRegression` — objective perturbation (ε-DP) or DP-SGD ((ε, δ)-DP);
* :class:`GaussianNB`, :class:`StandardScaler`, :class:`KMeans` — noisy moments, ε-DP;
* :class:`PCA` — Analyze Gauss, (ε, δ)-DP;
* :func:`dpsgd_plan` — calibrate a DP-SGD run with dpkit's DP-SGD accountant.
"""

from __future__ import annotations

from dpkit.ml._dpsgd import DPSGDPlan, dpsgd_plan
from dpkit.ml._kmeans import KMeans
from dpkit.ml._linear import LinearRegression
from dpkit.ml._logistic import LogisticRegression, objective_perturbation_noise
from dpkit.ml._naive_bayes import GaussianNB
from dpkit.ml._pca import PCA
from dpkit.ml._scaler import StandardScaler

__all__ = [
    "PCA",
    "DPSGDPlan",
    "GaussianNB",
    "KMeans",
    "LinearRegression",
    "LogisticRegression",
    "StandardScaler",
    "dpsgd_plan",
    "objective_perturbation_noise",
]
