"""Private statistics on arrays, each returned as a :class:`Release` with its error bars.

McSherry (2016, "Differential privacy: an illustrated primer") walks through counts, noisy sums of
clamped values, the mean, the second moment, variance, standard deviation, Pearson's correlation
and the median by the exponential mechanism; this package implements each of them exactly:

* bounds are always given (or estimated privately with :func:`bounds`), never read from data;
* sums are exact fixed-point integer sums (no floating-point sensitivity bugs);
* noise is exact discrete Laplace / Gaussian on a data-independent grid;
* the accountant, if given, is charged with the whole statistic before anything is released.

See ``docs/statistics.md``.
"""

from __future__ import annotations

from dpkit.stats._accuracy import accuracy
from dpkit.stats._bivariate import corr, cov
from dpkit.stats._bounds import bounds
from dpkit.stats._histogram import histogram
from dpkit.stats._moments import count, mean, std, sum, var
from dpkit.stats._quantile import median, quantile
from dpkit.stats._release import Release

__all__ = [
    "Release",
    "accuracy",
    "bounds",
    "corr",
    "count",
    "cov",
    "histogram",
    "mean",
    "median",
    "quantile",
    "std",
    "sum",
    "var",
]
