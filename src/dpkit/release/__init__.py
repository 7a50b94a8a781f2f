"""Private release of whole datasets and densities (seed 000 §5).

Densities on a public box — perturbed histogram (§5.2), orthogonal series (§5.3), kernel density
by Gaussian-process noise and by the Bernstein mechanism (§5.4) — and a synthetic sample from the
exponential mechanism with Kolmogorov–Smirnov utility (§5.1). Every release is charged to an
accountant before any noise is drawn and carries its privacy event. See ``docs/release.md``.
"""

from __future__ import annotations

from dpkit.release._bernstein import bernstein_degree, bernstein_density
from dpkit.release._density_grid import DensityRelease
from dpkit.release._histogram_density import histogram_bins, histogram_density
from dpkit.release._kde import kde_density
from dpkit.release._ks_mechanism import SyntheticSample, ks_synthetic
from dpkit.release._series import series_degree, series_density

__all__ = [
    "DensityRelease",
    "SyntheticSample",
    "bernstein_degree",
    "bernstein_density",
    "histogram_bins",
    "histogram_density",
    "kde_density",
    "ks_synthetic",
    "series_degree",
    "series_density",
]
