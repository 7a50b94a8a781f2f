"""Differentially private mechanisms: additive noise, randomized response, selection.

Every mechanism is built from its privacy parameters (keyword-only), validates and calibrates
them at construction without seeing any data, and knows its accounting ``event``. Releasing
charges that event to an optional accountant *first*, then validates nothing more and adds
exact noise:

* additive noise for real queries, float-safe (outputs on a data-independent grid):
  :class:`Laplace` (ℓ1, ε-DP), :class:`Gaussian` (ℓ2, (ε, δ)-DP, analytic calibration);
* additive noise for integer queries, integer in and out: :class:`Geometric` (alias
  :class:`DiscreteLaplace`), :class:`DiscreteGaussian`;
* the local model: :class:`RandomizedResponse` (binary and k-ary) with its unbiased estimator;
* selection: :class:`Exponential` (finite sets, and intervals with a base measure, for medians
  and quantiles), :class:`ReportNoisyMax`, :class:`PermuteAndFlip` (exact), and
  :class:`SparseVector` (AboveThreshold).

See ``docs/mechanisms.md``.

>>> from dpkit.mechanisms import Laplace
>>> Laplace(epsilon=1.0).release(3.0, rng=0) != 3.0
True
"""

from __future__ import annotations

from dpkit.mechanisms._discrete_gaussian import DiscreteGaussian
from dpkit.mechanisms._exponential import Exponential
from dpkit.mechanisms._gaussian import Gaussian
from dpkit.mechanisms._geometric import DiscreteLaplace, Geometric
from dpkit.mechanisms._interval import interval_grid
from dpkit.mechanisms._laplace import Laplace
from dpkit.mechanisms._noisy_max import ReportNoisyMax
from dpkit.mechanisms._permute_and_flip import PermuteAndFlip
from dpkit.mechanisms._randomized_response import ProportionEstimate, RandomizedResponse
from dpkit.mechanisms._sparse_vector import SparseVector

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Exponential",
    "Gaussian",
    "Geometric",
    "Laplace",
    "PermuteAndFlip",
    "ProportionEstimate",
    "RandomizedResponse",
    "ReportNoisyMax",
    "SparseVector",
    "interval_grid",
]
