"""Private kernel density by Gaussian-process noise (Hall, Rinaldo, Wasserman 2013).

HRW release g = f_D + (C / (n ε h^{d/2})) G with G a Gaussian process whose covariance is the
kernel itself: on a finite grid t_1 … t_G, the vector (f_D(t_g)) gets N(0, σ² K_G) noise, K_G the
Gram matrix. The Mahalanobis distance of the change one record makes is at most its RKHS norm
(for the Gaussian kernel K(x, y) = exp(−‖x − y‖²/2h²), ‖K(·, x)‖_H = 1), so the grid release is a
Gaussian mechanism with sensitivity 1 in whitened coordinates, on any finite grid.

dpkit does this exactly, without random features (an approximation that voids the proof):

1. Public, before the data: the Gram matrix on the grid, plus a jitter λ = 10^-6 on its diagonal
   (the noise covariance σ²(K_G + λI) is larger, so privacy only improves); its Cholesky factor L;
   the fixed-point whitening matrix W = rint(L^{-1} 2^30); a bound on the whitened sensitivity
   that covers every rounding step (Cholesky, inverse, fixed point), checked numerically.
2. The kernel sums S(t_g) = Σ_i K(t_g, X_i) are exact integer sums of rint(K·2^30).
3. The whitened statistic W·S is computed exactly in integers, rounded to a grid of about 2^-20
   of the noise, and exact discrete Gaussian noise is added (Canonne, Kamath and Steinke 2020).
4. Mapping back by L and normalising by the kernel constant and n is post-processing.

The bandwidth h is a public parameter. Choosing it by cross-validation on the private data
leaks: the chosen h is a function of the data that is released without noise. Pick it from
domain knowledge, from a public sample, or by a rule of thumb applied to private statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import linalg

from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Neighbouring, gaussian_sigma
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.random import RNGLike, as_generator
from dpkit.release._density_data import (
    Box,
    FloatArray,
    as_records,
    check_box,
    check_memory,
    check_public_n,
    per_dim_ints,
)
from dpkit.release._density_grid import DensityRelease, midpoints, project_density, uniform_edges
from dpkit.release._density_noise import (
    NOISE_BITS,
    IntegerNoise,
    integer_noise,
    split_count,
    total_event,
)
from dpkit.stats._common import check_privacy, warn_large_delta
from dpkit.stats._events import declared, is_replace

__all__ = [
    "KDE_GRID",
    "K_BITS",
    "W_BITS",
    "check_bandwidth",
    "grid_points",
    "kde_density",
    "kde_noise",
    "kernel_matrix",
]

KDE_GRID = {1: 128, 2: 24, 3: 10}
"""Default grid points per side (G = 128, 576, 1000)."""

MAX_GRID = 2048  # the exact whitening is G² big-integer products
JITTER = 1e-6
K_BITS = 30  # per-record kernel values rint(K · 2^30) ∈ [0, 2^30]
W_BITS = 30  # whitening matrix rint(L^{-1} · 2^30)
_U = 2.0**-53
_BLOCK = 2048


def check_bandwidth(bandwidth: object, d: int) -> tuple[float, ...]:
    """A positive finite bandwidth, or one per dimension (public, in data units)."""
    items = list(bandwidth) if isinstance(bandwidth, list | tuple | np.ndarray) else [bandwidth] * d
    if len(items) != d:
        raise PrivacyParameterError(
            f"bandwidth must be a number or one number per dimension ({d})."
        )
    out = []
    for h in items:
        if isinstance(h, bool) or not isinstance(h, int | float | np.floating | np.integer):
            raise PrivacyParameterError(f"bandwidth must be a positive number, got {bandwidth!r}.")
        v = float(h)
        if not (math.isfinite(v) and v > 0):
            raise PrivacyParameterError(
                f"bandwidth must be positive and finite, got {bandwidth!r}."
            )
        out.append(v)
    return tuple(out)


def grid_points(box: Box, cells: tuple[int, ...]) -> FloatArray:
    """The public grid: cell midpoints of the box, one row per point (G × d)."""
    axes = midpoints(box, cells)
    return np.stack([a.reshape(-1) for a in np.meshgrid(*axes, indexing="ij")], axis=1)


def kernel_matrix(a: FloatArray, b: FloatArray, h: tuple[float, ...]) -> FloatArray:
    """K(a_i, b_j) = exp(−Σ_k (a_ik − b_jk)² / 2h_k²), the unnormalised Gaussian kernel."""
    sq = np.zeros((a.shape[0], b.shape[0]))
    for k, hk in enumerate(h):
        sq += np.square((a[:, k : k + 1] - b[None, :, k]) / hk)
    out: FloatArray = np.exp(-0.5 * sq)
    return out


@dataclass(frozen=True)
class _Whitening:
    chol: FloatArray
    matrix: Any  # object array of Python ints: rint(L^{-1} 2^W_BITS)
    inv_norm: float  # ‖L^{-1}‖₂ (upper bound)
    inv_error: float  # ‖M_float − L^{-1}‖₂ (upper bound)

    def sensitivity(self, replace: bool) -> float:
        """ℓ2 bound on W(s_x) (add/remove) or W(s_x − s_x') (replace), units 2^-(W+K)."""
        g = self.chol.shape[0]
        core = math.sqrt(2.0) if replace else 1.0
        v = math.sqrt(g) * (2.0**K_BITS + 1.0)  # ‖s‖: entries within 2^K + 1 in magnitude
        # ‖L^{-1} s‖: the kernel part, plus rounding (≤ 1/2 per entry and record, so ≤ 1 for a
        # difference) and float error of the kernel evaluations (≤ 2^30 · 4u ≈ 5e-7 per entry)
        whitened = 2.0**K_BITS * core + self.inv_norm * math.sqrt(g) * (1.0 + 1e-5)
        bound: float = 2.0**W_BITS * (whitened + self.inv_error * v) + 0.5 * g * v
        return bound * (1.0 + 1e-9)


@lru_cache(maxsize=16)
def _whitening(points_key: bytes, g: int, d: int, h: tuple[float, ...]) -> _Whitening:
    pts = np.frombuffer(points_key, dtype=np.float64).reshape(g, d)
    gram = kernel_matrix(pts, pts, h) + JITTER * np.eye(g)
    chol = linalg.cholesky(gram, lower=True)
    inv = linalg.solve_triangular(chol, np.eye(g), lower=True)
    norm_l = float(np.linalg.norm(chol))
    norm_m = float(np.linalg.norm(inv))
    # L Lᵀ must dominate the true Gram matrix: backward error of Cholesky, of the kernel
    # evaluations and of this check itself must stay below half the jitter.
    resid = float(np.linalg.norm(chol @ chol.T - gram)) + 4 * g * _U * norm_l**2 + 4 * g * _U
    if resid > JITTER / 2:
        raise DataError(
            "the kernel grid is numerically too large for an exact whitening; use fewer grid "
            "points or a smaller bandwidth."
        )
    r = float(np.linalg.norm(inv @ chol - np.eye(g))) + 4 * g * _U * norm_m * norm_l
    if r >= 0.5:
        raise DataError("the kernel grid is too ill-conditioned; use fewer grid points.")
    inv_norm = norm_m / (1.0 - r)
    matrix = np.rint(inv * 2.0**W_BITS).astype(np.int64).astype(object)
    return _Whitening(chol, matrix, inv_norm, r * inv_norm)


def kde_noise(
    box: Box,
    cells: tuple[int, ...],
    h: tuple[float, ...],
    epsilon: float,
    delta: float,
    replace: bool,
) -> tuple[FloatArray, _Whitening, int, IntegerNoise]:
    """The public grid, its whitening, the output shift and the calibrated noise (public
    parameters only: what :func:`kde_density` and its accuracy share)."""
    g = math.prod(cells)
    pts = grid_points(box, cells)
    white = _whitening(pts.tobytes(), g, len(box), h)
    sens = white.sensitivity(replace)
    sigma_y = sens * _unit_sigma(epsilon, delta)
    shift = max(0, math.frexp(sigma_y)[1] - NOISE_BITS - 1)
    l2 = math.nextafter(sens / 2.0**shift + math.sqrt(g), math.inf)  # + rounding to the grid
    noise = integer_noise(l1=0, l2=l2, dimension=g, epsilon=epsilon, delta=delta)
    return pts, white, shift, noise


def kde_density(
    x: object,
    *,
    bounds: object,
    bandwidth: object,
    epsilon: float,
    delta: float,
    grid: object = None,
    n: int | None = None,
    count_fraction: float = 0.1,
    outside: str = "clamp",
    missing: Missing = MISSING_DEFAULT,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> DensityRelease:
    """Private Gaussian kernel density on a public grid (Hall, Rinaldo and Wasserman 2013).

    Releases f̃(t) = c·S̃(t)/n on the grid, with S(t) = Σ_i exp(−‖t − X_i‖²/2h²) and
    c = Π_k (2πh_k²)^{−1/2}, where S̃ = S + σ·L z, L the Cholesky factor of the Gram matrix (plus
    a 10^-6 jitter) and z exact discrete Gaussian in whitened coordinates (module docstring).

    **Sensitivity.** ‖K(·, x)‖_H = 1, so S moves by 1 in RKHS norm when a record is added or
    removed, and by at most √2 when one is replaced (‖K(·, x) − K(·, x')‖²_H = 2 − 2K(x, x')).
    For the normalised KDE f_D = c S / n this is HRW's ‖f_D − f_D'‖²_H ≤ 2/(n²(2πh²)^d) under
    replace; mixing the normalised and unnormalised kernel conventions would mis-scale the noise
    by (2πh²)^{d/4}. The Mahalanobis distance on any finite grid is at most the RKHS norm, and
    dpkit's bound adds every rounding step, so the guarantee is exact.

    Privacy guarantee: (ε, δ)-DP (δ > 0 is required: Gaussian noise), via the zCDP bound of the
    discrete Gaussian on the whitened vector, under the chosen relation; n, when private, is a
    noisy count bought with ``count_fraction`` of ε and charged with it.

    The **bandwidth is public**. Choosing it by cross-validation on the private data leaks: the
    chosen value is released exactly and depends on the data.

    Parameters
    ----------
    bandwidth : float or tuple of float
        h per dimension, in data units.
    grid : int or tuple of int, optional
        Grid points per side (cell midpoints of the box); default 128, 24, 10 for d = 1, 2, 3.

    Notes
    -----
    Other parameters are as in :func:`histogram_density`.

    Returns
    -------
    DensityRelease
        Cells centred on the grid points; ``raw`` holds the noisy sums S̃ on the grid and
        ``noise_scale`` the σ of L^{-1}(S̃ − S) per coordinate.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.release import kde_density
    >>> x = np.random.default_rng(0).normal(0.5, 0.1, size=5000)
    >>> dens = kde_density(x, bounds=(0, 1), bandwidth=0.05, epsilon=1.0, delta=1e-6,
    ...                    n=5000, rng=1)
    >>> dens.raw.shape, bool(abs(float(dens.sample(2000, rng=2).mean()) - 0.5) < 0.02)
    ((128,), True)
    """
    eps, dlt = check_privacy(epsilon, delta)
    if dlt == 0.0:
        raise PrivacyParameterError(
            "kde_density adds Gaussian-process noise and needs delta > 0; for pure ε-DP use "
            "bernstein_density."
        )
    replace = is_replace(neighbouring)
    box = check_box(bounds)
    d = len(box)
    h = check_bandwidth(bandwidth, d)
    cells = per_dim_ints(KDE_GRID.get(d, 4) if grid is None else grid, d, "grid", 2)
    g = math.prod(cells)
    check_memory(float(g) * g * 24, 1, f"a kernel grid of {g} points")
    if g > MAX_GRID:
        raise DataError(
            f"a kernel grid of {g} points exceeds {MAX_GRID} (the exact whitening costs G² "
            f"big-integer products; {g}² · 8 B ≈ {g * g * 8 / 2**20:.0f} MiB per matrix); use "
            "fewer grid points per side."
        )
    data = as_records(x, box, outside, missing, public_size=replace or n is not None)
    public_n = check_public_n(n, data.shape[0])
    if replace and public_n is None:
        public_n = data.shape[0]
    warn_large_delta(dlt, public_n)
    count, eps_k = split_count(
        epsilon=eps, public_n=public_n, replace=replace, needs_n=True, fraction=count_fraction
    )
    pts, white, shift, noise = kde_noise(box, cells, h, eps_k, dlt, replace)
    event = total_event(count, noise.event)
    event = declared(event, replace)  # (the relation its sensitivities are for)
    charge(accountant, event, "kernel density (HRW)", delta=dlt, rng=rng)
    gen = as_generator(rng)
    n_hat = count.value(data.shape[0], gen)
    sums = _kernel_sums(data, pts, h)
    y = white.matrix.dot(np.array(sums, dtype=object))
    half = 1 << (shift - 1) if shift else 0
    rounded = np.array([(int(v) + half) >> shift for v in y], dtype=np.int64)
    noisy = rounded + noise.draw(g, gen)
    unit = math.ldexp(1.0, shift - W_BITS - K_BITS)
    s_tilde = white.chol @ (noisy.astype(np.float64) * unit)
    const = math.prod(1.0 / math.sqrt(2.0 * math.pi * hk * hk) for hk in h)
    values = (const * s_tilde / n_hat).reshape(cells)
    volume = math.prod((hi - lo) / m for (lo, hi), m in zip(box, cells, strict=True))
    probs = project_density(values, volume)
    return DensityRelease(
        probs,
        uniform_edges(box, cells),
        event,
        "kernel (HRW Gaussian process)",
        s_tilde,
        n_hat,
        noise_scale=float(noise.scale) * unit,
    )


def _unit_sigma(epsilon: float, delta: float) -> float:
    sigma: float = gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0)
    return sigma


def _kernel_sums(data: FloatArray, pts: FloatArray, h: tuple[float, ...]) -> list[int]:
    """Exact Σ_i clip(rint(K(t_g, X_i) 2^30), 0, 2^30) per grid point, as Python ints."""
    total = [0] * pts.shape[0]
    top = float(1 << K_BITS)
    for start in range(0, data.shape[0], _BLOCK):
        vals = np.clip(np.rint(kernel_matrix(data[start : start + _BLOCK], pts, h) * top), 0, top)
        # a block of 2048 values below 2^30 sums exactly in float64 (< 2^41 < 2^53)
        block = vals.sum(axis=0)
        total = [t + int(b) for t, b in zip(total, block, strict=True)]
    return total
