"""Kernel densities' accuracy before release: the noise of the released function stays within
``bernstein_density_accuracy`` (sup-norm) and ``kde_density_accuracy`` (pointwise, and uniform
over the grid) as often as promised.

Bernstein: the half-width is the union bound over the lattice at ``alpha/L`` of the exact discrete
Laplace tail, so the chance that every coefficient is within it is about ``(1 − alpha/L)^L`` ≈
``e^{−alpha}`` (0.905 at alpha = 0.1): over 300 releases (fixed seed) the share must lie within ±4
binomial sd of [0.9, 0.91]. KDE: a sub-Gaussian tail bound, conservative, so the shares over 150
releases (pointwise: every grid point of every release) must be at least 0.9 minus 4 binomial sd.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.random import seeded
from dpkit.release import (
    bernstein_density,
    bernstein_density_accuracy,
    kde_density,
    kde_density_accuracy,
)
from dpkit.release._bernstein import _lattice_sums, bernstein_noise
from dpkit.release._kde import grid_points, kernel_matrix

ALPHA = 0.1
X = np.random.default_rng(0).beta(2.0, 5.0, 400)


def _band(m: int) -> float:
    return 4 * math.sqrt(ALPHA * (1 - ALPHA) / m)


def test_bernstein_sup_norm_half_width_covers() -> None:
    kw = {"bounds": (0, 1), "bandwidth": 0.25, "epsilon": 1.0, "n": X.size}
    w = bernstein_density_accuracy(alpha=ALPHA, **kw)
    k = 8  # the default degree at this bandwidth: two lattice steps per bandwidth
    bits, _ = bernstein_noise(k + 1, 1.0)
    nodes = (np.arange(k + 1) / k)[:, None]
    const = 1.0 / math.sqrt(2.0 * math.pi * 0.25**2)
    exact = const * np.array(_lattice_sums(X[:, None], nodes, (0.25,), bits), dtype=float)
    exact /= math.ldexp(float(X.size), bits)
    gen = seeded(4)
    m = 300
    hits = 0
    for _ in range(m):
        r = bernstein_density(X, rng=gen, **kw)
        assert r.raw.shape == (k + 1,)
        hits += float(np.max(np.abs(r.raw - exact))) <= w
    assert 1 - ALPHA - _band(m) <= hits / m <= 1 - ALPHA + 0.01 + _band(m)


def test_kde_pointwise_and_uniform_half_widths_cover() -> None:
    kw = {"bounds": (0, 1), "bandwidth": 0.1, "epsilon": 1.0, "delta": 1e-6, "n": X.size}
    grid = 16
    point = kde_density_accuracy(alpha=ALPHA, grid=grid, **kw)
    sup = kde_density_accuracy(alpha=ALPHA, grid=grid, uniform=True, **kw)
    assert point < sup
    pts = grid_points(((0.0, 1.0),), (grid,))
    const = 1.0 / math.sqrt(2.0 * math.pi * 0.1**2)
    exact = const * kernel_matrix(X[:, None], pts, (0.1,)).sum(axis=0) / X.size
    gen = seeded(5)
    m = 150
    err = np.array([const * kde_density(X, grid=grid, rng=gen, **kw).raw / X.size - exact
                    for _ in range(m)])  # fmt: skip
    assert float(np.mean(np.abs(err) <= point)) >= 1 - ALPHA - _band(m * grid)
    assert float(np.mean(np.max(np.abs(err), axis=1) <= sup)) >= 1 - ALPHA - _band(m)
    # not vacuous: the pointwise bound is a sub-Gaussian tail, ≈ 2.45/1.645 of the 90% quantile
    assert float(np.quantile(np.abs(err), 1 - ALPHA)) >= 0.5 * point


def test_histogram_density_releases_its_counts_as_integers() -> None:
    from dpkit.release import histogram_density

    r = histogram_density(X, bounds=(0, 1), epsilon=1.0, bins=8, rng=seeded(1))
    assert r.raw.dtype == np.int64 and r.raw.shape == (8,)
