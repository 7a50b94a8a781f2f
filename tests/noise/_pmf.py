"""Exact reference distributions and a chi-square helper for the sampler tests."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import stats

CHI2_P_MIN = 1e-4
"""A correct sampler gives p ~ U(0, 1): a fixed seed fails this by chance with probability 1e-4."""


def dlap_cdf(k: npt.NDArray[np.float64], scale: float) -> npt.NDArray[np.float64]:
    """P(X <= k) for the discrete Laplace distribution, P(k) ∝ exp(-|k|/scale)."""
    # With r = e^{-1/b}: P(X >= m) = r^m / (1 + r) for m >= 1, and symmetry.
    one_plus_r = 1.0 + math.exp(-1.0 / scale)
    neg = np.exp(np.minimum(k, 0) / scale) / one_plus_r
    pos = 1.0 - np.exp(-(np.maximum(k, -1) + 1) / scale) / one_plus_r
    return np.where(k < 0, neg, pos)


def dgauss_pmf(sigma: float) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Support points and probabilities of the discrete Gaussian, truncated where mass < 1e-300."""
    half = math.ceil(40 * sigma) + 2
    k = np.arange(-half, half + 1)
    logw = -(k.astype(np.float64) ** 2) / (2 * sigma * sigma)
    w = np.exp(logw - logw.max())
    return k, w / w.sum()


def chi2_pvalue(
    samples: npt.NDArray[np.int64], edges: npt.NDArray[np.float64], probs: npt.NDArray[np.float64]
) -> float:
    """Chi-square goodness of fit of integer samples to bins [edges[i], edges[i+1])."""
    counts = np.histogram(samples, bins=edges)[0]
    expected = probs * samples.size
    assert counts.sum() == samples.size, "samples fell outside the bins"
    assert expected.min() >= 5, "bins too thin for the chi-square approximation"
    return float(stats.chisquare(counts, expected).pvalue)
