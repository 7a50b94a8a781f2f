"""Private kernel density by the Bernstein mechanism (Aldà and Rubinstein 2017).

The function to release, here the Gaussian KDE f_D, is evaluated on the lattice of points ν/k,
ν ∈ {0, …, k}^d, of the unit cube (the box, mapped affinely); Laplace noise of scale
λ = Δ·(k+1)^d/ε is added to each value, Δ the sensitivity of one value; the released function is
the Bernstein polynomial with those noisy coefficients,

    B̃(u) = Σ_ν (f_D(ν/k) + Lap(λ)) Π_i C(k, ν_i) u_i^{ν_i} (1 − u_i)^{k − ν_i}.

For the KDE, Δ ≤ 1/(n (2π)^{d/2} Π h_i) under add/remove (with n as the normaliser) and under
replace (each value lies in [0, 1/(n (2π)^{d/2} Π h_i)]). dpkit adds the noise exactly: the lattice
values are exact integer sums of rint(K · 2^P) ∈ [0, 2^P], whose ℓ1 sensitivity is at most
(k+1)^d 2^P, and discrete Laplace noise of scale (k+1)^d 2^P / ε (ε-DP, pure).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Neighbouring
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
    IntegerNoise,
    fixed_point_bits,
    integer_noise,
    split_count,
    total_event,
)
from dpkit.release._kde import check_bandwidth, kernel_matrix
from dpkit.stats._common import check_privacy
from dpkit.stats._events import declared, is_replace

__all__ = ["bernstein_degree", "bernstein_density", "bernstein_lattice", "bernstein_noise"]

_EVAL_CELLS = {1: 512, 2: 96, 3: 32}
_BLOCK = 2048


def bernstein_degree(bandwidth_unit: tuple[float, ...]) -> int:
    """Default lattice degree k: two lattice steps per bandwidth (on the unit cube), 2 … 64.

    It depends only on the public bandwidth, so the event is known before n.

    >>> bernstein_degree((0.05,))
    40
    """
    return int(min(64, max(2, math.ceil(2.0 / min(bandwidth_unit)))))


def bernstein_lattice(
    bounds: object, bandwidth: object, degree: object
) -> tuple[Box, tuple[float, ...], tuple[int, ...]]:
    """The checked box, bandwidths and lattice degrees (public parameters only)."""
    box = check_box(bounds)
    d = len(box)
    h = check_bandwidth(bandwidth, d)
    h_unit = tuple(hk / (hi - lo) for hk, (lo, hi) in zip(h, box, strict=True))
    k = per_dim_ints(bernstein_degree(h_unit) if degree is None else degree, d, "degree", 1)
    return box, h, k


def bernstein_noise(lattice: int, epsilon: float) -> tuple[int, IntegerNoise]:
    """The fixed-point bits and the calibrated noise of a lattice of this size at ε."""
    bits = fixed_point_bits(float(lattice), epsilon, 0.0)
    l1 = lattice << bits  # Aldà–Rubinstein: (k+1)^d coordinates, each moving by at most 2^P
    return bits, integer_noise(l1=l1, l2=0.0, dimension=lattice, epsilon=epsilon, delta=0.0)


def bernstein_density(
    x: object,
    *,
    bounds: object,
    bandwidth: object,
    epsilon: float,
    degree: object = None,
    n: int | None = None,
    count_fraction: float = 0.1,
    outside: str = "clamp",
    missing: Missing = MISSING_DEFAULT,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> DensityRelease:
    """Private Gaussian kernel density by the Bernstein mechanism (Aldà and Rubinstein 2017).

    Privacy guarantee: ε-DP (pure) under add/remove or replace-one neighbours, with Aldà and
    Rubinstein's calibration λ = Δ·(k+1)^d/ε on the lattice values (module docstring); a noisy
    count, when n is private, is bought with ``count_fraction`` of ε and charged with it.

    The bandwidth is public; choosing it by cross-validation on the private data leaks.

    Parameters
    ----------
    bandwidth : float or tuple of float
        Kernel bandwidth h per dimension, in data units.
    degree : int or tuple of int, optional
        Lattice degree k per dimension (k + 1 points per side); default
        :func:`bernstein_degree`.

    Notes
    -----
    Other parameters are as in :func:`histogram_density`.

    Returns
    -------
    DensityRelease
        The Bernstein polynomial projected onto densities on a fine grid; ``raw`` holds the noisy
        lattice values of the KDE (density units).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.release import bernstein_density
    >>> x = np.random.default_rng(0).normal(0.5, 0.1, size=20_000)
    >>> dens = bernstein_density(x, bounds=(0, 1), bandwidth=0.1, epsilon=1.0, n=20_000, rng=1)
    >>> dens.raw.shape, bool(abs(float(dens.sample(4000, rng=2).mean()) - 0.5) < 0.03)
    ((21,), True)
    """
    eps, _ = check_privacy(epsilon, 0.0)
    replace = is_replace(neighbouring)
    box, h, k = bernstein_lattice(bounds, bandwidth, degree)
    d = len(box)
    lattice = math.prod(kk + 1 for kk in k)
    evals = math.prod(_EVAL_CELLS.get(d, 8) for _ in box)
    check_memory(float(lattice) * (_BLOCK + evals / 64 + 8), 8, f"a Bernstein lattice of {lattice}")
    if d > 3:
        check_memory(float(evals) * lattice, 8, "the Bernstein evaluation grid")
    data = as_records(x, box, outside, missing, public_size=replace or n is not None)
    public_n = check_public_n(n, data.shape[0])
    if replace and public_n is None:
        public_n = data.shape[0]
    count, eps_b = split_count(
        epsilon=eps, public_n=public_n, replace=replace, needs_n=True, fraction=count_fraction
    )
    bits, noise = bernstein_noise(lattice, eps_b)
    event = total_event(count, noise.event)
    event = declared(event, replace)  # (the relation its sensitivities are for)
    charge(accountant, event, "kernel density (Bernstein)", rng=rng)
    gen = as_generator(rng)
    n_hat = count.value(data.shape[0], gen)
    axes = [lo + (np.arange(kk + 1) / kk) * (hi - lo) for kk, (lo, hi) in zip(k, box, strict=True)]
    nodes = np.stack([a.reshape(-1) for a in np.meshgrid(*axes, indexing="ij")], axis=1)
    sums = _lattice_sums(data, nodes, h, bits)
    noisy = sums + noise.draw(lattice, gen)
    const = math.prod(1.0 / math.sqrt(2.0 * math.pi * hk * hk) for hk in h)
    coef = (const / math.ldexp(n_hat, bits)) * noisy.astype(np.float64)
    cells = tuple(_EVAL_CELLS.get(d, 8) for _ in box)
    values = coef.reshape(tuple(kk + 1 for kk in k))
    for axis, (kk, mid, (lo, hi)) in enumerate(zip(k, midpoints(box, cells), box, strict=True)):
        basis = sps.binom.pmf(np.arange(kk + 1)[None, :], kk, ((mid - lo) / (hi - lo))[:, None])
        values = np.moveaxis(np.tensordot(basis, values, axes=([1], [axis])), 0, axis)
    volume = math.prod((hi - lo) / m for (lo, hi), m in zip(box, cells, strict=True))
    probs = project_density(values, volume)
    return DensityRelease(
        probs,
        uniform_edges(box, cells),
        event,
        "kernel (Bernstein)",
        coef,
        n_hat,
        noise_scale=float(noise.scale) * const / math.ldexp(n_hat, bits),
    )


def _lattice_sums(
    data: FloatArray, nodes: FloatArray, h: tuple[float, ...], bits: int
) -> npt.NDArray[np.object_]:
    """Exact Σ_i clip(rint(K(ν, X_i) 2^P), 0, 2^P) at every lattice node, as Python ints.

    A block of 2^11 values of at most 2^P ≤ 2^40 sums exactly in int64; the running totals are
    Python ints, so no number of records can overflow them (no refusal after the charge).
    """
    top = float(1 << bits)
    total = np.zeros(nodes.shape[0], dtype=np.int64).astype(object)
    for start in range(0, data.shape[0], _BLOCK):
        vals = np.clip(np.rint(kernel_matrix(data[start : start + _BLOCK], nodes, h) * top), 0, top)
        total = total + vals.astype(np.int64).sum(axis=0).astype(object)
    return total
