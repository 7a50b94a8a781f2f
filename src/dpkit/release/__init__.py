"""Private release of whole datasets and densities (Wasserman & Zhou 2010).

Wasserman & Zhou (2010) ask for a private *dataset* rather than a query interface. This package
gives:

* densities on a public box — perturbed histogram (§5.2), orthogonal series (§5.3), kernel
  density by Gaussian-process noise and by the Bernstein mechanism (§5.4) — and a synthetic
  sample from the exponential mechanism with Kolmogorov–Smirnov utility (§5.1); see
  ``docs/release.md``;
* synthetic tables from noisy low-order marginals under one zCDP budget (:class:`Synthesizer`,
  MST- and AIM-style) on a public :class:`Domain` (or one estimated privately with
  :func:`discover_domain`), and their utility against the real data (:func:`utility_report`);
  see ``docs/synthetic.md``.

Every release is charged to an accountant before any noise is drawn and carries its privacy event.
"""

from __future__ import annotations

from dpkit.release._bernstein import bernstein_degree, bernstein_density
from dpkit.release._density_accuracy import histogram_density_accuracy
from dpkit.release._density_accuracy_kernels import bernstein_density_accuracy, kde_density_accuracy
from dpkit.release._density_grid import DensityRelease
from dpkit.release._discovery import discover_domain, partition_threshold
from dpkit.release._domain import Categorical, Column, Domain, Numeric
from dpkit.release._histogram_density import histogram_bins, histogram_density
from dpkit.release._kde import kde_density
from dpkit.release._ks_mechanism import SyntheticSample, ks_synthetic
from dpkit.release._report import ColumnUtility, TrainTestScore, UtilityReport, utility_report
from dpkit.release._series import series_degree, series_density
from dpkit.release._series_accuracy import series_density_accuracy
from dpkit.release._synth import Synthesizer, SyntheticModel

__all__ = [
    "Categorical",
    "Column",
    "ColumnUtility",
    "DensityRelease",
    "Domain",
    "Numeric",
    "Synthesizer",
    "SyntheticModel",
    "SyntheticSample",
    "TrainTestScore",
    "UtilityReport",
    "bernstein_degree",
    "bernstein_density",
    "bernstein_density_accuracy",
    "discover_domain",
    "histogram_bins",
    "histogram_density",
    "histogram_density_accuracy",
    "kde_density",
    "kde_density_accuracy",
    "ks_synthetic",
    "partition_threshold",
    "series_degree",
    "series_density",
    "series_density_accuracy",
    "utility_report",
]
