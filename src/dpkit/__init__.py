"""dpkit: differential privacy done exactly.

``import dpkit as dp`` reaches the common path:

>>> import numpy as np, dpkit as dp
>>> acct = dp.Accountant(dp.ApproxDP(epsilon=1.0, delta=1e-6))
>>> x = np.random.default_rng(0).uniform(0, 100, 10_000)
>>> m = dp.mean(x, bounds=(0, 100), epsilon=0.5, accountant=acct)
>>> lo, hi = m.ci(0.05)
>>> bool(lo < m.value < hi)
True
>>> acct.spent.epsilon
0.5

Submodules hold the rest:

* :mod:`dpkit.random` — secure default randomness (AES counter mode keyed from the OS);
* :mod:`dpkit.noise` — exact integer samplers and float-safe real noise on a power-of-two grid;
* :mod:`dpkit.accounting` — guarantees, events, composition (basic, optimal, zCDP, RDP, PLD),
  calibration and accountants that cannot be overspent;
* :mod:`dpkit.mechanisms` — Laplace, Gaussian, geometric, discrete Gaussian, randomized
  response, exponential mechanism, report-noisy-max, permute-and-flip, sparse vector;
* :mod:`dpkit.stats` — count, sum, mean, var, std, cov, corr, quantiles, histograms, bounds,
  each a :class:`~dpkit.stats.Release` with error bars;
* :mod:`dpkit.plan` — the smallest ε (or ρ) that meets an accuracy target, before spending;
* :mod:`dpkit.audit` — empirical lower bounds on ε for any mechanism;
* :mod:`dpkit.errors` — the exception tree.

Layers with optional dependencies are imported on their own (``import dpkit.frame``):
:mod:`dpkit.frame` (tables: Polars, pandas, Spark), :mod:`dpkit.release` (densities and
synthetic data), :mod:`dpkit.local` (the local model), :mod:`dpkit.ml` and
:mod:`dpkit.holdout` (models, the reusable holdout), :mod:`dpkit.server` and
:mod:`dpkit.client` (the curator service).

>>> dp.__version__ == __import__("importlib.metadata").metadata.version("dpkit")
True
"""

# No ``from __future__ import annotations`` here: this module defines nothing that needs it, and
# it would show ``annotations`` in ``dir(dpkit)``.
from dpkit import accounting, audit, errors, mechanisms, noise, plan, random, stats
from dpkit._version import __version__
from dpkit.accounting import ZCDP, Accountant, ApproxDP, Neighbouring, PureDP
from dpkit.errors import BudgetExceededError, DataError, DPKitError, PrivacyParameterError
from dpkit.stats import (
    Release,
    bounds,
    corr,
    count,
    cov,
    histogram,
    mean,
    median,
    quantile,
    std,
    sum,
    var,
)

__all__ = [
    "ZCDP",
    "Accountant",
    "ApproxDP",
    "BudgetExceededError",
    "DPKitError",
    "DataError",
    "Neighbouring",
    "PrivacyParameterError",
    "PureDP",
    "Release",
    "__version__",
    "accounting",
    "audit",
    "bounds",
    "corr",
    "count",
    "cov",
    "errors",
    "histogram",
    "mean",
    "mechanisms",
    "median",
    "noise",
    "plan",
    "quantile",
    "random",
    "stats",
    "std",
    "sum",
    "var",
]
