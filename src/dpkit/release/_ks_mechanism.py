"""Synthetic data from the exponential mechanism with Kolmogorov–Smirnov utility (seed 000 §5.1).

Wasserman and Zhou (2010) draw a synthetic sample Z = (Z_1, …, Z_k) from

    q(z | x) ∝ exp(−n ε ‖F_x − F_z‖∞ / 2),

with k ≍ n^{2/3}, and show ‖F − F_z‖∞ = O_P(n^{−1/3}). dpkit samples it *exactly* on a public grid
t_1 < … < t_m (no MCMC, whose finite chains certify nothing).

A multiset Z on the grid is a monotone lattice path C_1 ≤ … ≤ C_m = k (C_j = #{Z ≤ t_j}), and
n‖F_x − F_z‖∞ = max_j e_j(C_j) splits over the gaps [t_j, t_{j+1}), where
e_j(C) = max(|nC/k − A_j|, |nC/k − B_j|) with A_j = #{x ≤ t_j}, B_j = #{x < t_{j+1}}. Multiplying by
k makes every utility an integer. The maximum does not factor over j, so a latent *level* v is
introduced: exp(−βU) is a mixture over levels of indicators 1{U ≤ v}, and the number N(v) of
paths with every e_j ≤ v is a dynamic programme over the path (O(m·k) per level, in log space).
The sampler draws a level, then a uniform path under it by backward sampling, then accepts with
probability exp(−β(U − v_prev)) ≥ e^{−1} (adaptive rejection sampling with levels refined where
the mass is; exact, since acceptance corrects any envelope). The work is O(levels·m·k).

Privacy: the utility −n‖F_x − F_z‖∞ = −max_t |N_x(t) − n F_z(t)| moves by at most 1 when one
record is added, removed or replaced (N_x(t) moves by 1{x ≤ t}, n F_z(t) by F_z(t) ∈ [0, 1]), so
this is ε-DP under both relations (McSherry and Talwar 2007), with the seed's Δ = 1/n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.accounting import Event, ExponentialEvent, Neighbouring
from dpkit.errors import DataError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.random import RNGLike, as_generator
from dpkit.release._density_data import (
    FloatArray,
    as_records,
    check_box,
    check_memory,
    check_public_n,
)
from dpkit.release._density_noise import SLACK, split_count, total_event
from dpkit.stats._common import check_privacy
from dpkit.stats._events import is_replace

__all__ = ["KSSampler", "SyntheticSample", "ks_synthetic"]

IntArray = npt.NDArray[np.int64]

_SUBDIVIDE = 16  # a band that carries mass is cut into this many when refined
_NEGLIGIBLE = 60.0  # bands below max·e^{-60} are not refined up front (still exact if drawn)
_WIDTH = 1.0  # refined bands span at most 1/β: each proposal is accepted w.p. ≥ e^{-1}
_CACHE = 64  # forward tables kept per sampler (levels drawn again reuse them)


def _logcumsumexp(a: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        out: FloatArray = np.logaddexp.accumulate(a, axis=-1)
    return out


@dataclass
class KSSampler:
    """Exact sampler of monotone lattice paths with weight exp(−β max_j E[j, C_j]).

    ``utility[j, c]`` is the integer utility of gap j when C_j = c (j = 0 … m−2; C_{m−1} = k),
    ``beta`` the factor per integer unit. Holds no data beyond these public-shape tables; it is
    built inside the mechanism after the charge.
    """

    utility: IntArray
    beta: float

    def __post_init__(self) -> None:
        top = int(self.utility.max()) if self.utility.size else 0
        self.levels = np.unique(np.r_[-1, np.linspace(0, top, 33).round().astype(np.int64), top])
        self.log_n = self._count(self.levels)
        self._tables: dict[int, list[FloatArray]] = {}
        self._cum = np.zeros(0)
        self._refine()

    def _count(self, levels: IntArray) -> FloatArray:
        """log N(v) for each level v: paths whose every gap utility is at most v."""
        k1 = self.utility.shape[1] if self.utility.size else 1
        f = np.zeros((levels.size, k1))
        first = True
        for row in self.utility:
            if not first:
                f = _logcumsumexp(f)
            first = False
            f = np.where(row[None, :] <= levels[:, None], f, -np.inf)
        if self.utility.shape[0] == 0:
            return np.zeros(levels.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            out: FloatArray = np.logaddexp.reduce(f, axis=1)
        return out

    def _weights(self) -> FloatArray:
        """log mixture weight of each level ℓ ≥ 1: log N(v_ℓ) + log c_ℓ (module docstring)."""
        v = self.levels.astype(np.float64)
        b = self.beta
        gap = np.diff(v)
        with np.errstate(divide="ignore"):
            log_c = -b * v[:-1] + np.log(-np.expm1(-b * gap))
        log_c[-1] = -b * v[-2]
        out: FloatArray = self.log_n[1:] + log_c
        return out

    def _refine(self, only: int | None = None) -> None:
        """Cut bands wider than the target that carry non-negligible mass.

        With ``only`` (the upper level *value* of one band), cut just that band: adaptive
        rejection sampling stays exact whatever the envelope, so refining after a rejection is
        allowed.
        """
        while True:
            w = self._weights()
            gap = np.diff(self.levels)
            wide = (gap > 1) & (self.beta * gap > _WIDTH)
            if only is None:
                need = wide & (w >= np.max(w) - _NEGLIGIBLE)
            else:
                need = wide & (self.levels[1:] == only)
            fresh = np.zeros(0, dtype=np.int64)
            if np.any(need):
                new = [
                    np.linspace(self.levels[i], self.levels[i + 1], _SUBDIVIDE + 1)[1:-1]
                    for i in np.nonzero(need)[0]
                ]
                fresh = np.unique(np.concatenate(new).round().astype(np.int64))
                fresh = np.setdiff1d(fresh, self.levels)
            if fresh.size == 0:
                self._cum = np.cumsum(np.exp(w - np.max(w)))
                return
            levels = np.concatenate([self.levels, fresh])
            log_n = np.concatenate([self.log_n, self._count(fresh)])
            order = np.argsort(levels)
            self.levels, self.log_n = levels[order], log_n[order]
            if only is not None:
                self._cum = np.cumsum(np.exp(self._weights() - np.max(self._weights())))
                return

    def _path(self, level: int, gen: np.random.Generator) -> IntArray:
        """A uniform path with every gap utility at most ``level`` (backward sampling)."""
        rows = self.utility.shape[0]
        k = self.utility.shape[1] - 1 if rows else 0
        tables = self._tables.get(level)
        if tables is None:
            tables = []
            f = np.zeros(k + 1)
            for j, row in enumerate(self.utility):
                if j:
                    f = _logcumsumexp(f)
                f = np.where(row <= level, f, -np.inf)
                tables.append(f)
            if len(self._tables) < _CACHE:
                self._tables[level] = tables
        path = np.empty(rows + 1, dtype=np.int64)
        path[rows] = k
        upper = k
        for j in range(rows - 1, -1, -1):
            t = tables[j][: upper + 1]
            p = np.exp(t - np.max(t))
            c = np.cumsum(p)
            upper = int(np.searchsorted(c, gen.random() * c[-1], side="right"))
            upper = min(upper, t.size - 1)
            path[j] = upper
        return path

    def draw(self, gen: np.random.Generator) -> IntArray:
        """One path C_0 ≤ … ≤ C_{m−1} = k from the exact target distribution."""
        while True:
            c = self._cum
            band = int(np.searchsorted(c, gen.random() * c[-1], side="right")) + 1
            band = min(band, self.levels.size - 1)
            path = self._path(int(self.levels[band]), gen)
            u = self.utility_of(path)
            own = int(np.searchsorted(self.levels, u, side="left"))  # smallest level >= U
            gamma = self.beta * (u - int(self.levels[own - 1]))
            if gen.random() < math.exp(-gamma):
                return path
            if self.beta * (int(self.levels[own]) - int(self.levels[own - 1])) > _WIDTH:
                self._refine(only=int(self.levels[own]))

    def utility_of(self, path: IntArray) -> int:
        if self.utility.shape[0] == 0:
            return 0
        rows = np.arange(self.utility.shape[0])
        return int(np.max(self.utility[rows, path[:-1]]))


@dataclass(frozen=True)
class SyntheticSample:
    """A private synthetic sample: sorted values on the public grid, and the event that paid."""

    values: FloatArray
    grid: FloatArray
    event: Event
    k: int

    def __array__(self, dtype: object = None, copy: object = None) -> npt.NDArray[np.float64]:
        return np.asarray(self.values, dtype=dtype)  # type: ignore[call-overload, no-any-return]

    def cdf(self, t: object) -> FloatArray:
        """The synthetic sample's empirical CDF F_z at ``t`` (post-processing)."""
        pts = np.asarray(t, dtype=np.float64)
        out: FloatArray = np.searchsorted(self.values, pts, side="right") / max(self.k, 1)
        return out


def gap_utilities(data: FloatArray, grid: FloatArray, k: int) -> IntArray:
    """e_j(C)·k for every gap j and C = 0 … k (integers; see the module docstring)."""
    x = np.sort(data)
    n = x.size
    a = np.searchsorted(x, grid[:-1], side="right")  # #{x ≤ t_j}
    b = np.searchsorted(x, grid[1:], side="left")  # #{x < t_{j+1}}
    c = np.arange(k + 1, dtype=np.int64)[None, :] * n
    out: IntArray = np.maximum(np.abs(c - k * a[:, None]), np.abs(c - k * b[:, None]))
    return out


def ks_synthetic(
    x: object,
    *,
    bounds: object,
    epsilon: float,
    size: int | None = None,
    grid: int | None = None,
    n: int | None = None,
    count_fraction: float = 0.1,
    outside: str = "raise",
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> SyntheticSample:
    """A private synthetic sample from the KS exponential mechanism (seed 000 §5.1).

    Draws Z of size k on the public grid with probability ∝ exp(−n ε ‖F_x − F_z‖∞ / 2), exactly
    (see the module docstring for the sampler). The base measure is uniform over multisets of
    grid points (monotone lattice paths).

    Privacy guarantee: ε-DP under add/remove or replace-one neighbours (the utility
    n‖F_x − F_z‖∞ has sensitivity 1 in both). When k or the grid must be chosen from n and n is
    not public, ``count_fraction`` of ε buys a noisy count; both are charged together first.

    Parameters
    ----------
    x : array_like
        1-d records inside ``bounds``.
    bounds : (lo, hi)
        The public interval; the grid is ``linspace(lo, hi, grid)``.
    epsilon : float
        Privacy parameter.
    size : int, optional
        k, the synthetic sample size; default ``ceil(n^{2/3})`` (Wasserman and Zhou 2010).
    grid : int, optional
        Number of grid points m ≥ 2; default ``ceil(2 n^{1/3}) + 1``, fine enough that the grid
        adds no more than the n^{−1/3} error of the mechanism itself.
    n : int, optional
        The public number of records, if public.

    Returns
    -------
    SyntheticSample
        ``values`` (sorted, on the grid), ``grid``, ``event``, ``k``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.release import ks_synthetic
    >>> x = np.random.default_rng(0).uniform(size=1000)
    >>> z = ks_synthetic(x, bounds=(0, 1), epsilon=1.0, n=1000, rng=1)
    >>> z.k, z.grid.size, z.values.size
    (100, 21, 100)
    """
    eps, _ = check_privacy(epsilon, 0.0)
    replace = is_replace(neighbouring)
    box = check_box(bounds)
    if len(box) != 1:
        raise DataError("ks_synthetic is for 1-d data (the KS distance is on the line).")
    data = as_records(x, box, outside)[:, 0]
    public_n = check_public_n(n, data.size)
    if replace and public_n is None:
        public_n = data.size
    fixed_k = _positive(size, "size", 1)
    fixed_m = _positive(grid, "grid", 2)
    needs_n = fixed_k is None or fixed_m is None
    count, eps_z = split_count(
        epsilon=eps, public_n=public_n, replace=replace, needs_n=needs_n, fraction=count_fraction
    )
    guess = float(public_n if public_n is not None else 8 * max(data.size, 1) + 64)
    _check_size(fixed_k or _default_k(guess), fixed_m or _default_m(guess))
    main = ExponentialEvent(epsilon=eps_z * SLACK)
    event = total_event(count, main)
    charge(accountant, event, "KS synthetic sample")
    gen = as_generator(rng)
    n_hat = count.value(data.size, gen)
    k = fixed_k or _default_k(n_hat)
    m = fixed_m or _default_m(n_hat)
    points = np.linspace(box[0][0], box[0][1], m)
    sampler = KSSampler(gap_utilities(data, points, k), main.epsilon / (2.0 * k))
    path = sampler.draw(gen)
    counts = np.diff(np.r_[0, path])
    return SyntheticSample(np.repeat(points, counts), points, event, k)


def _default_k(n: float) -> int:
    side: float = max(n, 1.0) ** (2.0 / 3.0)
    return max(1, math.ceil(side - 1e-9))


def _default_m(n: float) -> int:
    side: float = max(n, 1.0) ** (1.0 / 3.0)
    return max(2, math.ceil(2.0 * side - 1e-9) + 1)


def _positive(value: object, name: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise DataError(f"{name} must be an int of at least {minimum}, got {value!r}.")
    return int(value)


def _check_size(k: int, m: int) -> None:
    # the level search holds (levels ≤ 33 + refinements) × (k + 1) floats and m × (k + 1) tables
    check_memory(
        float(m) * (k + 1) * 3 + 512.0 * (k + 1), 8, f"a KS sample of size {k} on {m} points"
    )
