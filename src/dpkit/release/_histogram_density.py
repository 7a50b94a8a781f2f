"""Perturbed histogram density on a public box (Wasserman & Zhou 2010)."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import DiscreteLaplaceEvent, Event, Neighbouring
from dpkit.errors import DataError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.mechanisms._tails import discrete_gaussian_quantile, discrete_laplace_quantile
from dpkit.noise import discrete_gaussian, discrete_laplace
from dpkit.random import RNGLike, as_generator
from dpkit.release._density_data import (
    MAX_BYTES,
    FloatArray,
    as_records,
    check_box,
    check_memory,
    check_public_n,
    per_dim_ints,
)
from dpkit.release._density_grid import DensityRelease, project_simplex, uniform_edges
from dpkit.release._density_noise import SLACK, split_count, total_event
from dpkit.stats._common import check_privacy, warn_large_delta
from dpkit.stats._events import declared, is_replace
from dpkit.stats._histogram import _gaussian_event, _gaussian_sigma

__all__ = ["cell_noise", "histogram_bins", "histogram_density"]


def histogram_bins(n: float, d: int) -> int:
    """Bins per dimension by Wasserman and Zhou's rule: m = n^{d/(2+d)} cells in all.

    Each side gets ``ceil(n^{1/(2+d)})`` bins (h ≍ n^{−1/(2+d)}), which gives the minimax rate
    n^{−2/(2+d)} for Lipschitz densities, with or without the noise (Wasserman & Zhou 2010).

    >>> histogram_bins(1000, 1), histogram_bins(10_000, 2)
    (10, 10)
    """
    side: float = max(n, 1.0) ** (1.0 / (2 + d))
    return max(1, math.ceil(side - 1e-9))


def _atoms(atoms: object, box: tuple[tuple[float, float], ...]) -> tuple[tuple[float, ...], ...]:
    d = len(box)
    if atoms is None:
        return tuple(() for _ in box)
    items = list(atoms)  # type: ignore[call-overload]
    if d == 1 and all(isinstance(a, numbers.Real) for a in items):
        items = [items]
    if len(items) != d:
        raise DataError(f"atoms must give one list of public atoms per dimension ({d}).")
    out = []
    for (lo, hi), row in zip(box, items, strict=True):
        vals = tuple(sorted({float(a) for a in row}))
        if any(not (lo <= a <= hi) for a in vals):
            raise DataError("atoms must lie inside the bounds of their dimension.")
        out.append(vals)
    return tuple(out)


def _cell_index(
    data: FloatArray, edges: tuple[FloatArray, ...], atoms: tuple[tuple[float, ...], ...]
) -> list[npt.NDArray[np.int64]]:
    index = []
    for k, e in enumerate(edges):
        col = data[:, k]
        m = e.size - 1
        j = np.clip(np.floor((col - e[0]) / (e[1] - e[0])).astype(np.int64), 0, m - 1)
        j = j + len(atoms[k])
        for a_idx, a in enumerate(atoms[k]):
            j = np.where(col == a, a_idx, j)
        index.append(j)
    return index


def histogram_density(
    x: object,
    *,
    bounds: object,
    epsilon: float,
    delta: float = 0.0,
    bins: object = None,
    n: int | None = None,
    atoms: object = None,
    postprocess: str = "threshold",
    count_fraction: float = 0.1,
    outside: str = "clamp",
    missing: Missing = MISSING_DEFAULT,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> DensityRelease:
    """Private histogram density on a public box, in any dimension (Wasserman & Zhou 2010).

    Counts ``C_j`` of records in the cells of a grid on the box get exact noise: discrete Laplace
    of scale Δ/ε (ε-DP; the geometric mechanism, Ghosh et al. 2009), or, with δ > 0, discrete
    Gaussian calibrated exactly to (ε, δ) (Canonne, Kamath and Steinke 2020). Each record lies in
    one cell, so Δ = 1 under add/remove and 2 under replace (one record moves between cells).

    Privacy guarantee: (ε, δ)-DP under the chosen neighbouring relation, for the histogram and
    everything computed from it (pdf, cdf, samples). When ``n`` is not public and the bin count
    must be chosen, ``count_fraction`` of ε buys a noisy count first; both are charged together,
    before any noise is drawn.

    Parameters
    ----------
    x : array_like
        Records, shape (n,) for d = 1 or (n, d). Empty data are answered with noise.
    bounds : (lo, hi) or list of (lo, hi)
        The public box.
    epsilon, delta : float
        Privacy parameters (δ = 0: discrete Laplace; δ > 0: discrete Gaussian).
    bins : int or tuple of int, optional
        Bins per dimension; default ``ceil(n^{1/(2+d)})`` from a public or noisy n (Wasserman and
        Zhou 2010: m ≍ n^{d/(2+d)} cells attain the minimax rate n^{−2/(2+d)}).
    n : int, optional
        The public number of records, if it is public.
    atoms : list of float, or one list per dimension, optional
        Public points with mass of their own (e.g. 0 in a zero-inflated column). Records equal to
        an atom are counted in its own cell, so the released density keeps the point mass
        instead of smearing it over a bin.
    postprocess : {"threshold", "simplex", "clamp"}
        ``"threshold"`` (default): cells whose noisy count is below τ, the level pure noise
        exceeds with probability 1/(number of cells), are set to zero (so on average at most one
        empty cell survives), and the surviving cells alone are projected onto counts ≥ 0 with
        the released total (if none survives, all cells are, as with ``"simplex"``). Cells
        below τ keep exactly zero mass, so empty regions stay empty; the price is that cells
        with fewer than about τ records (τ ≈ ln(cells/2)/ε for Laplace noise) are dropped.
        ``"simplex"``: the Euclidean projection alone (Duchi et al. 2008), which zeroes cells
        below a data-driven common threshold and removes about half of the phantom mass.
        ``"clamp"``: the seed's
        ``max(D_j, 0)`` then renormalise, which leaves about (empty cells)·b/2 phantom records
        in empty cells (b the noise scale) and so "fills in" the empty cells (Wasserman & Zhou
        2010). All three are post-processing and cost no privacy.
    count_fraction : float
        Share of ε for the noisy count when n is needed and not public.
    outside : {"clamp"}
        Records outside the box are moved to its nearest face (clamped), which keeps the
        sensitivity; how many were moved is not released. They are never refused, since a
        refusal would reveal one record's value; ``"raise"`` is no longer offered. ±inf is a
        value beyond a bound and is clamped like any other.
    missing : {"raise", "drop"}
        What to do with a missing value (NaN, None, a non-number in an untyped list), which no
        box can hold. ``"raise"`` (default): refuse before anything is charged; that refusal
        reveals that the data hold one. ``"drop"``: remove its record before the release (a
        per-record filter, stable under add/remove neighbours; refused as a parameter when n
        is public, i.e. with ``n=`` or replace-one neighbours, since dropping makes it private).
    accountant : Accountant, optional
        Charged before any noise is drawn.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; a seed is reproducible and not secure.
    neighbouring : Neighbouring
        ``ADD_REMOVE`` (default) or ``REPLACE``.

    Returns
    -------
    DensityRelease
        With ``pdf``, ``cdf`` (1-d), ``sample``; ``raw`` holds the noisy counts.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.release import histogram_density
    >>> x = np.random.default_rng(0).beta(2, 5, size=5000)
    >>> dens = histogram_density(x, bounds=(0, 1), epsilon=1.0, rng=1)
    >>> dens.probabilities.shape, round(float(dens.probabilities.sum()), 6)
    ((18,), 1.0)
    >>> z = dens.sample(1000, rng=2)
    >>> bool(0.2 < z.mean() < 0.37)
    True
    """
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    box = check_box(bounds)
    d = len(box)
    if postprocess not in ("threshold", "simplex", "clamp"):
        raise DataError(
            f"postprocess must be 'threshold', 'simplex' or 'clamp', got {postprocess!r}."
        )
    data = as_records(x, box, outside, missing, public_size=replace or n is not None)
    public_n = check_public_n(n, data.shape[0])
    if replace and public_n is None:
        public_n = data.shape[0]  # replace-one neighbours have the same size: n is public
    warn_large_delta(dlt, public_n)
    atom_sets = _atoms(atoms, box)
    fixed_bins = None if bins is None else per_dim_ints(bins, d, "bins", 1)
    if fixed_bins is not None:
        _check_cells(fixed_bins, atom_sets)
    elif public_n is not None:
        _check_cells(tuple(histogram_bins(public_n, d) for _ in box), atom_sets)
    count, eps_h = split_count(
        epsilon=eps,
        public_n=public_n,
        replace=replace,
        needs_n=fixed_bins is None,
        fraction=count_fraction,
    )
    scale, main = cell_noise(eps_h, dlt, replace)
    sigma = float(scale)
    event = total_event(count, main)
    if fixed_bins is None and public_n is None:
        # the bin count depends on a noisy n: check the rule at a generous n before charging
        # (the caller holds the data; after the charge the grid is coarsened, never refused)
        _check_cells(
            tuple(histogram_bins(8.0 * max(data.shape[0], 1) + 64, d) for _ in box), atom_sets
        )
    event = declared(event, replace)  # (the relation its sensitivities are for)
    charge(accountant, event, "histogram density", delta=dlt, rng=rng)
    gen = as_generator(rng)
    n_hat = count.value(data.shape[0], gen)
    m = fixed_bins or _fitting_bins(histogram_bins(n_hat, d), atom_sets)
    edges = uniform_edges(box, m)
    shape = tuple(len(a) + k for a, k in zip(atom_sets, m, strict=True))
    counts = np.zeros(shape, dtype=np.int64)
    if data.shape[0]:
        np.add.at(counts, tuple(_cell_index(data, edges, atom_sets)), 1)
    if dlt == 0.0:
        noise = discrete_laplace(scale, size=shape, rng=gen)
    else:
        noise = discrete_gaussian(sigma, size=shape, rng=gen)
    released = counts + np.asarray(noise, dtype=np.int64)  # integral: kept as integers in raw
    noisy = released.astype(np.float64)
    scale_real = float(scale) if dlt == 0.0 else float(sigma)
    tau = _threshold(noisy.size, scale_real, dlt > 0.0) if postprocess == "threshold" else None
    how = "simplex" if postprocess == "threshold" else postprocess
    total = n_hat if count.public is not None else None
    probs = _postprocess(noisy, how, total, tau)
    if math.isnan(n_hat):  # n private and not bought: report the normaliser actually used
        n_hat = max(float(noisy.sum()), 1.0)
    return DensityRelease(probs, edges, event, "histogram", released, n_hat, atom_sets, scale_real)


def cell_noise(epsilon: float, delta: float, replace: bool) -> tuple[Fraction, Event]:
    """The noise on every cell count at the density's (ε, δ): the discrete Laplace scale, or the
    discrete Gaussian σ for δ > 0, and its event (public parameters only)."""
    if delta == 0.0:
        sens = 2 if replace else 1
        scale = Fraction(sens) / Fraction(epsilon * SLACK)
        return scale, DiscreteLaplaceEvent(scale=float(scale), sensitivity=sens)
    sigma = _gaussian_sigma(epsilon, delta, replace)
    return Fraction(sigma), _gaussian_event(sigma, replace)


def _fitting_bins(side: int, atoms: tuple[tuple[float, ...], ...]) -> tuple[int, ...]:
    """The rule's bins per side, lowered (never after an error) until the histogram fits.

    With a private n the rule is applied to a noisy count after the charge; a rare large draw
    must not turn into an error once budget is spent, so the grid is coarsened instead.
    """
    while side > 1 and math.prod(side + len(a) for a in atoms) * 40 > MAX_BYTES:
        side -= 1
    return tuple(side for _ in atoms)


def _check_cells(bins: tuple[int, ...], atoms: tuple[tuple[float, ...], ...]) -> None:
    cells = math.prod(k + len(a) for k, a in zip(bins, atoms, strict=True))
    check_memory(float(cells), 40, f"a histogram with {cells:.3g} cells")


def _threshold(cells: int, scale: float, gaussian: bool) -> float:
    """τ with P(noise > τ) ≤ 1/cells: a two-sided quantile at level 2/cells (public)."""
    alpha = min(0.5, 2.0 / cells)
    if gaussian:
        return float(discrete_gaussian_quantile(scale, alpha))
    return float(discrete_laplace_quantile(scale, alpha))


def _postprocess(
    noisy: FloatArray, how: str, public_n: float | None, tau: float | None
) -> FloatArray:
    if tau is not None:
        alive = noisy > tau
        if np.any(alive):
            total = public_n if public_n is not None else max(float(noisy.sum()), 1.0)
            # Projected over the surviving cells only: a projection over all cells would add
            # the removed mass back to the zeroed ones (phantom records in empty regions).
            out = np.zeros(noisy.shape, dtype=np.float64)
            out[alive] = project_simplex(noisy[alive], total) / total
            return out
    if how == "clamp":
        kept = np.maximum(noisy, 0.0)
        total = float(kept.sum())
        if total <= 0.0:
            return np.full(noisy.shape, 1.0 / noisy.size)
        return kept / total
    # the released total (public n, else the sum of the noisy counts) fixes the simplex's scale
    total = public_n if public_n is not None else max(float(noisy.sum()), 1.0)
    return project_simplex(noisy, total) / total
