"""What every density release returns: cell probabilities on a public box, and their use.

A released density is post-processing of a private statistic, so evaluating it, integrating it
and sampling from it cost no privacy (Wasserman & Zhou 2010: "if p̂ is differentially private then
so is Z = (Z_1, …, Z_N)").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.accounting import Event
from dpkit.errors import DataError
from dpkit.random import RNGLike, as_generator
from dpkit.release._density_data import Box, FloatArray

__all__ = [
    "DensityRelease",
    "midpoints",
    "project_density",
    "project_simplex",
    "uniform_edges",
]


def uniform_edges(box: Box, bins: tuple[int, ...]) -> tuple[FloatArray, ...]:
    """Equal-width bin edges on each side of the box (public: from the bounds and counts only)."""
    return tuple(np.linspace(lo, hi, m + 1) for (lo, hi), m in zip(box, bins, strict=True))


def project_simplex(v: FloatArray, total: float) -> FloatArray:
    """Euclidean projection of ``v`` onto ``{c ≥ 0, Σ c = total}``: ``c = max(v − τ, 0)``.

    Held, Wolfe and Crowder (1974); Duchi et al. (2008), Fig. 1. Cells whose noisy value is below
    the threshold τ (empty cells, mostly) get exactly zero mass, unlike clamping at 0, which
    leaves every positive noise draw in place (Wasserman & Zhou 2010: noise "fills in" the empty
    cells).
    """
    flat = v.reshape(-1)
    u = np.sort(flat)[::-1]
    css = np.cumsum(u) - total
    idx = np.arange(1, u.size + 1)
    ok = u - css / idx > 0
    rho = int(np.nonzero(ok)[0][-1]) if np.any(ok) else 0
    tau = css[rho] / (rho + 1)
    out: FloatArray = np.maximum(v - tau, 0.0)
    return out


def midpoints(box: Box, cells: tuple[int, ...]) -> tuple[FloatArray, ...]:
    """Cell midpoints of the equal-width grid on each side of the box."""
    out: list[FloatArray] = [
        lo + (np.arange(m, dtype=np.float64) + 0.5) * ((hi - lo) / m)
        for (lo, hi), m in zip(box, cells, strict=True)
    ]
    return tuple(out)


def project_density(values: FloatArray, volume: float) -> FloatArray:
    """L2 projection of a function given on equal cells onto densities: ``max(f − c, 0)``.

    The constant c makes the result integrate to one; this is the closest density in L2 (Gajek
    1986; Glad, Hjort and Ushakov 2003), and it never raises a cell the estimate put at zero.
    Returns the cell probabilities.
    """
    probs = project_simplex(values * volume, 1.0)
    return probs


@dataclass(frozen=True)
class DensityRelease:
    """A private density on a public box: cell probabilities, the event that paid, the method.

    Cells are the products of per-dimension cells: first the public atoms of that dimension
    (points that carry mass of their own, e.g. 0 in a zero-inflated column), then equal-width
    intervals given by ``edges``. Everything here is post-processing of the private release.

    Attributes
    ----------
    probabilities : numpy.ndarray
        Mass of each cell, shape ``(len(atoms[k]) + len(edges[k]) − 1 for each k)``; sums to 1.
    edges : tuple of numpy.ndarray
        Interval edges per dimension.
    atoms : tuple of tuples
        Public atoms per dimension (empty for none).
    event : Event
        The privacy event charged for the release.
    method : str
        Which mechanism produced it.
    raw : numpy.ndarray
        The released noisy statistic before post-processing (counts, as integers; coefficients
        or values, as floats).
    n : float
        The number of records used to normalise: public, a noisy count, or (histogram with
        fixed bins and a private n) the total of the noisy counts. Never the exact private n.
    noise_scale : float
        Scale of the noise in the units of ``raw`` (Laplace b or Gaussian σ per coordinate; for
        the kernel density, σ of the whitened values, see :func:`kde_density`).
    """

    probabilities: FloatArray
    edges: tuple[FloatArray, ...]
    event: Event
    method: str
    raw: npt.NDArray[np.float64] | npt.NDArray[np.int64] = field(repr=False)
    n: float
    atoms: tuple[tuple[float, ...], ...] = ()
    noise_scale: float = 0.0

    def __post_init__(self) -> None:
        if not self.atoms:
            object.__setattr__(self, "atoms", tuple(() for _ in self.edges))

    @property
    def dimension(self) -> int:
        return len(self.edges)

    def _points(self, x: object) -> FloatArray:
        arr = np.asarray(x, dtype=np.float64)
        d = self.dimension
        if arr.ndim == 0 and d == 1:
            arr = arr.reshape(1, 1)
        elif arr.ndim == 1:
            arr = arr[:, None] if d == 1 else arr[None, :]
        if arr.ndim != 2 or arr.shape[1] != d:
            raise DataError(f"points must have shape (N, {d}), got {arr.shape}.")
        if not np.all(np.isfinite(arr)):
            raise DataError("points contain NaN or infinite values.")
        return arr

    def pdf(self, x: object) -> FloatArray:
        """Density of the continuous part at the points ``x`` (0 outside the box).

        Mass on atoms is a point mass and is not part of this density; see :meth:`cdf` (1-d)
        and :meth:`sample`, which include it.
        """
        pts = self._points(x)
        out = np.ones(pts.shape[0])
        index: list[Any] = []
        for k, e in enumerate(self.edges):
            j = np.searchsorted(e, pts[:, k], side="right") - 1
            j = np.where(pts[:, k] == e[-1], e.size - 2, j)
            inside = (j >= 0) & (j < e.size - 1)
            out = np.where(inside, out / (e[1] - e[0]), 0.0)
            index.append(np.clip(j, 0, e.size - 2) + len(self.atoms[k]))
        result: FloatArray = out * self.probabilities[tuple(index)]
        return result

    def cdf(self, x: object) -> FloatArray:
        """P(X ≤ x) for a 1-d density, atoms included (piecewise linear between edges)."""
        if self.dimension != 1:
            raise DataError("cdf is defined for 1-d densities; use sample() or pdf() in d > 1.")
        pts = self._points(x)[:, 0]
        e = self.edges[0]
        a = len(self.atoms[0])
        atom_p = self.probabilities[:a]
        cont = self.probabilities[a:]
        cum = np.concatenate([[0.0], np.cumsum(cont)])
        pos = np.clip((pts - e[0]) / (e[1] - e[0]), 0.0, float(cont.size))
        j = np.minimum(np.floor(pos).astype(np.int64), cont.size - 1)
        out = cum[j] + (pos - j) * cont[j]
        for value, p in zip(self.atoms[0], atom_p, strict=True):
            out = out + np.where(pts >= value, p, 0.0)
        result: FloatArray = np.clip(out, 0.0, 1.0)
        return result

    def sample(self, size: int, *, rng: RNGLike = None) -> FloatArray:
        """Draw ``size`` synthetic records (shape ``(size,)`` in 1-d, else ``(size, d)``).

        Free post-processing of the private release. ``rng=None`` is secure.
        """
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
            raise DataError(f"size must be a non-negative int, got {size!r}.")
        gen = as_generator(rng)
        flat = self.probabilities.reshape(-1)
        cum = np.cumsum(flat)
        cells = np.searchsorted(cum, gen.random(int(size)) * cum[-1], side="right")
        cells = np.minimum(cells, flat.size - 1)
        idx = np.unravel_index(cells, self.probabilities.shape)
        out = np.empty((int(size), self.dimension))
        for k, e in enumerate(self.edges):
            a = len(self.atoms[k])
            j = idx[k] - a
            width = e[1] - e[0]
            cont = e[0] + (np.maximum(j, 0) + gen.random(int(size))) * width
            atom_values = np.asarray(self.atoms[k] + (0.0,), dtype=np.float64)
            out[:, k] = np.where(j < 0, atom_values[np.minimum(idx[k], max(a - 1, 0))], cont)
        return out[:, 0] if self.dimension == 1 else out

    def __repr__(self) -> str:
        shape = "×".join(str(s) for s in self.probabilities.shape)
        # the event names its kind; its parameters are in the noise's units (``.event``)
        return f"DensityRelease(method={self.method!r}, cells={shape}, event={_kind(self.event)})"


def _kind(event: object) -> str:
    """An event's kind, with its pure ε where it has one, for the repr."""
    from dpkit.accounting import epsilon_of
    from dpkit.accounting._guarantees import shown
    from dpkit.errors import DPKitError

    try:
        eps = float(epsilon_of(event))  # type: ignore[arg-type]
    except DPKitError:
        return type(event).__name__
    if not math.isfinite(eps):  # a privacy curve has no ε without a δ: its kind only
        return type(event).__name__
    return f"{type(event).__name__}(epsilon={shown(eps, 'up')})"
