"""How far a kernel density's noise can move it, before anything is spent.

Both bounds are on the released function *before* its projection onto densities (the ``raw``
values and the function they define), in density units at a stated number of records; the
projection is post-processing whose effect depends on the data.

* Bernstein mechanism (Aldà and Rubinstein 2017): the released polynomial is
  ``Σ_ν (f(ν/k) + Z_ν) b_ν(u)`` with Bernstein weights ``b_ν(u) ≥ 0`` summing to 1, so its noise at
  every point is a weighted average of the lattice noises and ``sup_u |noise(u)| ≤ max_ν |Z_ν|``.
  A union bound over the ``(k+1)^d`` coefficients (each at ``alpha/(k+1)^d``, from the exact
  discrete Laplace tail) gives a **sup-norm** half-width: with probability at least ``1 − alpha``
  the whole polynomial is within it of the exact one, everywhere.
* Gaussian-process noise (Hall, Rinaldo and Wasserman 2013): the noise at grid point ``t_g`` is
  ``(L z)_g``, ``L`` the Cholesky factor of the kernel's Gram matrix and ``z`` exact discrete
  Gaussian of parameter σ, which is σ-sub-Gaussian (Canonne, Kamath and Steinke 2020), so
  ``(L z)_g`` is ``σ‖L_g‖``-sub-Gaussian: ``P(|(L z)_g| > σ‖L_g‖·√(2 ln(2/alpha))) ≤ alpha``.
  That is the **pointwise** half-width (every grid point: ``‖L_g‖² = 1 + 10⁻⁶``); with
  ``uniform=True``, a union bound over the G grid points gives the **sup-norm** one. Conservative
  (a sub-Gaussian tail, not the Gaussian quantile: 2.45 against 1.96 standard deviations at 95%).

With a private n the release divides by a noisy count: the half-width is then that of a release
whose noisy count comes out at ``expected_n`` (a public guess; approximate).
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting import Neighbouring
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._tails import check_alpha, discrete_laplace_quantile
from dpkit.release._bernstein import bernstein_lattice, bernstein_noise
from dpkit.release._density_data import check_box, per_dim_ints
from dpkit.release._density_noise import split_count
from dpkit.release._kde import K_BITS, KDE_GRID, W_BITS, check_bandwidth, kde_noise
from dpkit.stats._common import check_privacy
from dpkit.stats._data import check_n
from dpkit.stats._events import is_replace

__all__ = ["bernstein_density_accuracy", "kde_density_accuracy"]


def _size(n: int | None, expected_n: int | None) -> tuple[int | None, int]:
    """The public n (or None) and the size the half-width is given at."""
    public = check_n(n)
    size = public if public is not None else check_n(expected_n)
    if size is None:
        raise PrivacyParameterError(
            "a density's noise is divided by the number of records: pass n= (public) or "
            "expected_n= (a public guess)."
        )
    return public, size


def _const(h: tuple[float, ...]) -> float:
    return math.prod(1.0 / math.sqrt(2.0 * math.pi * hk * hk) for hk in h)


def bernstein_density_accuracy(
    *,
    bounds: object,
    bandwidth: object,
    epsilon: float,
    degree: object = None,
    n: int | None = None,
    expected_n: int | None = None,
    count_fraction: float = 0.1,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    alpha: float = 0.05,
) -> float:
    """Sup-norm half-width of the noise of a :func:`~dpkit.release.bernstein_density` release.

    With probability at least ``1 − alpha`` the released Bernstein polynomial (before its
    projection onto densities) is within this of the exact one at every point of the box, and
    so is every noisy lattice value (``raw``). The same lattice, budget split and exact noise as
    the release; density units, at the public ``n`` or at ``expected_n`` (see the module notes).
    Charges nothing.

    Examples
    --------
    >>> from dpkit.release import bernstein_density_accuracy
    >>> round(bernstein_density_accuracy(bounds=(0, 1), bandwidth=0.1, epsilon=1.0, n=20_000), 3)
    0.025
    """
    a = check_alpha(alpha)
    eps, _ = check_privacy(epsilon, 0.0)
    replace = is_replace(neighbouring)
    _, h, k = bernstein_lattice(bounds, bandwidth, degree)
    public, size = _size(n, expected_n)
    lattice = math.prod(kk + 1 for kk in k)
    _, eps_b = split_count(epsilon=eps, public_n=public, replace=replace, needs_n=True,
                           fraction=count_fraction)  # fmt: skip
    bits, noise = bernstein_noise(lattice, eps_b)
    m = discrete_laplace_quantile(float(noise.scale), a / lattice)
    return float(m) * _const(h) / math.ldexp(float(size), bits)


def kde_density_accuracy(
    *,
    bounds: object,
    bandwidth: object,
    epsilon: float,
    delta: float,
    grid: object = None,
    n: int | None = None,
    expected_n: int | None = None,
    count_fraction: float = 0.1,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    alpha: float = 0.05,
    uniform: bool = False,
) -> float:
    """Half-width of the noise of a :func:`~dpkit.release.kde_density` release on its grid.

    With probability at least ``1 − alpha`` the released density at a grid point (before the
    projection onto densities: ``c·raw/n``, ``c = Π(2πh²)^{-1/2}``) is within this of the exact
    kernel density there; with ``uniform=True``, at every grid point at once. The same grid,
    whitening and exact noise as the release; a sub-Gaussian tail bound (module notes). Density
    units, at the public ``n`` or at ``expected_n``. Charges nothing.

    Examples
    --------
    >>> from dpkit.release import kde_density_accuracy
    >>> kw = dict(bounds=(0, 1), bandwidth=0.05, epsilon=1.0, delta=1e-6, n=5000)
    >>> round(kde_density_accuracy(**kw), 3), round(kde_density_accuracy(**kw, uniform=True), 3)
    (0.02, 0.03)
    """
    a = check_alpha(alpha)
    eps, dlt = check_privacy(epsilon, delta)
    if dlt == 0.0:
        raise PrivacyParameterError("kde_density needs delta > 0 (Gaussian-process noise).")
    replace = is_replace(neighbouring)
    box = check_box(bounds)
    d = len(box)
    h = check_bandwidth(bandwidth, d)
    cells = per_dim_ints(KDE_GRID.get(d, 4) if grid is None else grid, d, "grid", 2)
    public, size = _size(n, expected_n)
    _, eps_k = split_count(epsilon=eps, public_n=public, replace=replace, needs_n=True,
                           fraction=count_fraction)  # fmt: skip
    _, white, shift, noise = kde_noise(box, cells, h, eps_k, dlt, replace)
    unit = math.ldexp(1.0, shift - W_BITS - K_BITS)
    rows = float(np.max(np.linalg.norm(white.chol, axis=1)))
    points = math.prod(cells) if uniform else 1
    z = math.sqrt(2.0 * math.log(2.0 * points / a))
    return float(noise.scale) * unit * rows * z * _const(h) / size
