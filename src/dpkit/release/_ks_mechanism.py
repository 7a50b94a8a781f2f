"""Synthetic data from the exponential mechanism with Kolmogorov–Smirnov utility (Wasserman & Zhou
2010).

Wasserman and Zhou (2010) draw a synthetic sample Z = (Z_1, …, Z_k) from

    q(z | x) ∝ exp(−n ε ‖F_x − F_z‖∞ / 2),

with k ≍ n^{2/3}, and show ‖F − F_z‖∞ = O_P(n^{−1/3}). dpkit samples it *exactly* on a public grid
t_1 < … < t_m (no MCMC, whose finite chains certify nothing).

A multiset Z on the grid is a monotone lattice path C_1 ≤ … ≤ C_m = k (C_j = #{Z ≤ t_j}), and
n‖F_x − F_z‖∞ = max_j e_j(C_j) splits over the gaps [t_j, t_{j+1}), where
e_j(C) = max(|nC/k − A_j|, |nC/k − B_j|) with A_j = #{x ≤ t_j}, B_j = #{x < t_{j+1}}. Multiplying by
k makes every utility an integer. The maximum does not factor over j, so a latent *level* v is
introduced: exp(−βU) is a mixture over levels of indicators 1{U ≤ v}, and the number N(v) of
paths with every e_j ≤ v is a dynamic programme over the path (O(m·k) big-integer additions per
level). The sampler draws a level with integer weights (dyadic upper bounds of the mixture
weights), then a uniform path under it by backward sampling, then accepts with probability
exactly e^{−β(U − v_0)}/A(own) (adaptive rejection sampling with levels refined where the mass
is; exact, since acceptance corrects any envelope). Every draw is exact (``_exact_draws``): a
float sampler drops outcomes whose weight vanishes in a float sum on one dataset and not on its
neighbour, which breaks pure ε-DP. The work is O(levels·m·k); its running time depends on the
data (only the sample is protected).

Privacy: the utility −n‖F_x − F_z‖∞ = −max_t |N_x(t) − n F_z(t)| moves by at most 1 when one
record is added, removed or replaced (N_x(t) moves by 1{x ≤ t}, n F_z(t) by F_z(t) ∈ [0, 1]), so
this is ε-DP under both relations (McSherry and Talwar 2007), with the seed's Δ = 1/n.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._missing import MISSING_DEFAULT, Missing
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
from dpkit.release._exact_draws import Dyadic, bernoulli_exp_over, exp_neg_bounds, uniform_below
from dpkit.stats._common import check_privacy
from dpkit.stats._events import declared, is_replace

__all__ = ["KSSampler", "SyntheticSample", "ks_synthetic"]

IntArray = npt.NDArray[np.int64]

_SUBDIVIDE = 16  # a band that carries mass is cut into this many when refined
_NEGLIGIBLE = 10.0  # bands below max·e^{-10} are refined only once drawn (exact either way)
_WIDTH = 1.0  # refined bands span at most 1/β: each proposal is accepted w.p. ≥ e^{-1}
_TABLE_ITEMS = 4_000_000  # big-integer path tables kept in memory (levels drawn again reuse them)
MAX_TABLE = 2_000_000  # entries of the big-integer path table (n ≈ 10^6 with the default rule)
_PREC = 64  # mantissa bits of the dyadic upper bounds on the band weights
_FLOOR = 256  # band weights are raised to at least 2^-256 of the largest (keeps integers small)


@dataclass
class KSSampler:
    """Exact sampler of monotone lattice paths with weight exp(−β max_j E[j, C_j]).

    ``utility[j, c]`` is the integer utility of gap j when C_j = c (j = 0 … m−2; C_{m−1} = k),
    ``beta`` the factor per integer unit, taken at its exact rational value. Holds no data beyond
    these public-shape tables; it is built inside the mechanism after the charge.

    Exactness: path counts are Python integers, every categorical choice is a uniform integer
    drawn by rejection on random bits, the band weights are dyadic upper bounds of the mixture
    weights, and the acceptance step is an exact Bernoulli(e^{−βU}/A) (see ``_exact_draws``);
    floating point only decides where the levels go, which affects speed, never the law.
    """

    utility: IntArray
    beta: float | Fraction

    def __post_init__(self) -> None:
        self._beta = Fraction(self.beta)
        self._bf = float(self._beta)
        top = int(self.utility.max()) if self.utility.size else 0
        self.levels = np.unique(np.r_[-1, np.linspace(0, top, 33).round().astype(np.int64), top])
        self._counts: dict[int, int] = {}
        self._tables: dict[int, list[Any]] = {}
        self._exp: dict[int, tuple[Dyadic, Dyadic]] = {}
        self.log_n = self._count(self.levels)
        self._refine()

    def _table(self, level: int, keep: bool) -> list[Any]:
        """Cumulative path counts per row: G_j[c] = #{C_0 ≤ … ≤ C_j ≤ c, all gaps ≤ level}."""
        cached = self._tables.get(level)
        if cached is not None:
            return cached
        tables: list[Any] = []
        prev: Any = None
        for j, row in enumerate(self.utility):
            ok = row <= level
            f = ok.astype(np.int64).astype(object) if j == 0 else np.where(ok, prev, 0)
            prev = np.cumsum(f, dtype=object)
            tables.append(prev)
        self._counts[level] = int(prev[-1]) if tables else 1
        size = self.utility.size or 1
        if keep and (len(self._tables) + 1) * size <= _TABLE_ITEMS:
            self._tables[level] = tables
        return tables

    def _count(self, levels: IntArray) -> FloatArray:
        """log N(v) for each level v (N exact, kept), −inf where no path qualifies."""
        out = np.empty(levels.size)
        for i, v in enumerate(levels.tolist()):
            if v not in self._counts:
                self._table(v, keep=False)
            c = self._counts[v]
            out[i] = math.log(c) if c else -math.inf
        return out

    def _weights(self) -> FloatArray:
        """log mixture weight of each level ℓ ≥ 1: log N(v_ℓ) + log c_ℓ (module docstring)."""
        v = self.levels.astype(np.float64)
        b = self._bf
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
            wide = (gap > 1) & (self._bf * gap > _WIDTH)
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
            if fresh.size:
                levels = np.concatenate([self.levels, fresh])
                log_n = np.concatenate([self.log_n, self._count(fresh)])
                order = np.argsort(levels)
                self.levels, self.log_n = levels[order], log_n[order]
            if fresh.size == 0 or only is not None:
                self._envelope()
                return

    def _enclose(self, level: int) -> tuple[Dyadic, Dyadic]:
        """Dyadic bounds on e^{−β(v − v_0)}, v_0 = −1 the lowest level."""
        out = self._exp.get(level)
        if out is None:
            out = exp_neg_bounds(self._beta * (level + 1), _PREC)
            self._exp[level] = out
        return out

    def _envelope(self) -> None:
        """Integer band weights W_ℓ = N_ℓ a_ℓ and tail sums A(ℓ) = Σ_{j ≥ ℓ} a_j, exactly.

        a_ℓ is a dyadic upper bound of c_ℓ = e^{−βv_{ℓ−1}} − e^{−βv_ℓ} (c_L = e^{−βv_{L−1}}), all
        relative to e^{−βv_0}; so A(ℓ) ≥ e^{−β(v_{ℓ−1} − v_0)}, which is what the acceptance step
        needs. Raising an a_ℓ only lowers the acceptance rate, so weights far below the largest
        are raised to 2^-256 of it, which keeps the integers a few thousand bits long.
        """
        lv = self.levels.tolist()
        bands = len(lv) - 1
        a: list[Dyadic] = []
        for ell in range(1, bands + 1):
            up = self._enclose(lv[ell - 1])[1]
            if ell == bands:
                a.append(up)
                continue
            low = self._enclose(lv[ell])[0]
            if up[1] - low[1] > 4 * _PREC:  # the subtraction would change nothing that matters
                a.append(up)
                continue
            base = min(up[1], low[1])
            diff = (up[0] << (up[1] - base)) - (low[0] << (low[1] - base))
            a.append(_round_up(max(diff, 1), base))
        n = [self._counts[v] for v in lv[1:]]
        size = [
            nn.bit_length() + m.bit_length() + e if nn else -math.inf
            for nn, (m, e) in zip(n, a, strict=True)
        ]
        floor = max(size) - _FLOOR
        for i, nn in enumerate(n):
            if nn and size[i] < floor:
                a[i] = (1, int(floor) - nn.bit_length())
        emin = min(e for _, e in a)
        ints = [m << (e - emin) for m, e in a]
        self._emin = emin
        self._tail = list(itertools.accumulate(reversed(ints)))[::-1]
        self._wcum = list(itertools.accumulate(nn * w for nn, w in zip(n, ints, strict=True)))

    def _path(self, level: int, gen: np.random.Generator) -> IntArray:
        """A uniform path with every gap utility at most ``level`` (backward sampling)."""
        rows = self.utility.shape[0]
        k = self.utility.shape[1] - 1 if rows else 0
        tables = self._table(level, keep=True)
        path = np.empty(rows + 1, dtype=np.int64)
        path[rows] = k
        upper = k
        for j in range(rows - 1, -1, -1):
            g = tables[j]
            r = uniform_below(gen, int(g[upper]))
            upper = bisect.bisect_right(g, r, 0, upper + 1)
            path[j] = upper
        return path

    def draw(self, gen: np.random.Generator) -> IntArray:
        """One path C_0 ≤ … ≤ C_{m−1} = k from the exact target distribution.

        A band ℓ is drawn with probability W_ℓ/ΣW, a uniform path π under its level, and π is
        kept with probability e^{−β(U(π) − v_0)}/A(own(π)) ≤ 1, own(π) the lowest band whose
        level is at least U(π). A path is then proposed with probability A(own)/ΣW and kept
        with probability ∝ e^{−βU(π)}/A(own): the output has law ∝ e^{−βU}, exactly.
        """
        while True:
            band = bisect.bisect_right(self._wcum, uniform_below(gen, self._wcum[-1])) + 1
            path = self._path(int(self.levels[band]), gen)
            u = self.utility_of(path)
            own = int(np.searchsorted(self.levels, u, side="left"))  # smallest level >= U
            scale = (self._tail[own - 1], self._emin)
            if bernoulli_exp_over(gen, self._beta * (u - int(self.levels[0])), scale):
                return path
            if self._bf * (int(self.levels[own]) - int(self.levels[own - 1])) > _WIDTH:
                self._refine(only=int(self.levels[own]))

    def utility_of(self, path: IntArray) -> int:
        if self.utility.shape[0] == 0:
            return 0
        rows = np.arange(self.utility.shape[0])
        return int(np.max(self.utility[rows, path[:-1]]))


def _round_up(m: int, e: int) -> Dyadic:
    shift = m.bit_length() - _PREC
    if shift <= 0:
        return m, e
    q = m >> shift
    return (q + 1 if (q << shift) != m else q), e + shift


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
    outside: str = "clamp",
    missing: Missing = MISSING_DEFAULT,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> SyntheticSample:
    """A private synthetic sample from the KS exponential mechanism (Wasserman & Zhou 2010).

    Draws Z of size k on the public grid with probability ∝ exp(−n ε ‖F_x − F_z‖∞ / 2), exactly
    (see the module docstring for the sampler). The base measure is uniform over multisets of
    grid points (monotone lattice paths).

    Privacy guarantee: ε-DP under add/remove or replace-one neighbours (the utility
    n‖F_x − F_z‖∞ has sensitivity 1 in both). When k or the grid must be chosen from n and n is
    not public, ``count_fraction`` of ε buys a noisy count; both are charged together first.

    Parameters
    ----------
    x : array_like
        1-d records; values outside ``bounds`` (±inf included) are clamped to them
        (``outside="clamp"``, the only choice); missing values follow ``missing=``, as in
        :func:`~dpkit.release.histogram_density`.
    bounds : (lo, hi)
        The public interval; the grid is ``linspace(lo, hi, grid)``.
    epsilon : float
        Privacy parameter.
    size : int, optional
        k, the synthetic sample size; default ``ceil(n^{2/3})`` (Wasserman and Zhou 2010).
    grid : int, optional
        Number of grid points m ≥ 2; default ``ceil(2 n^{1/3}) + 1``, fine enough that the grid
        adds no more than the n^{−1/3} error of the mechanism itself. Default k and m are
        lowered together (as if n were smaller) when the path table (m − 1)(k + 1) would exceed
        2·10^6 big integers, i.e. beyond n ≈ 10^6; a size or grid given explicitly is refused,
        before the charge, if it exceeds that.
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
    data = as_records(x, box, outside, missing, public_size=replace or n is not None)[:, 0]
    public_n = check_public_n(n, data.size)
    if replace and public_n is None:
        public_n = data.size
    fixed_k = _positive(size, "size", 1)
    fixed_m = _positive(grid, "grid", 2)
    needs_n = fixed_k is None or fixed_m is None
    count, eps_z = split_count(
        epsilon=eps, public_n=public_n, replace=replace, needs_n=needs_n, fraction=count_fraction
    )
    # only sizes fixed by the caller can be refused (before the charge); sizes from the rule
    # are coarsened to fit after it, whatever the (noisy) n
    _check_size(fixed_k or 1, fixed_m or 3)
    # (no relation here: declared below at the charge, stats.declared)
    main = ExponentialEvent(epsilon=eps_z * SLACK)
    event = total_event(count, main)
    event = declared(event, replace)  # (the relation its sensitivities are for)
    charge(accountant, event, "KS synthetic sample", rng=rng)
    gen = as_generator(rng)
    n_hat = count.value(data.size, gen)
    k, m = _fitting_size(n_hat, fixed_k, fixed_m)
    points = np.linspace(box[0][0], box[0][1], m)
    sampler = KSSampler(gap_utilities(data, points, k), Fraction(main.epsilon) / (2 * k))
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


def _fitting_size(n: float, fixed_k: int | None, fixed_m: int | None) -> tuple[int, int]:
    """k and m: the caller's, or the rule's at n, lowered (never refused) until they fit.

    With a private n the rule is applied to a noisy count after the charge; a large draw (a
    small ε makes the count's noise large) must not turn into an error, or into gigabytes of
    big-integer tables, once the budget is spent. The result depends only on public values.
    """
    while True:
        k = fixed_k or _default_k(n)
        m = fixed_m or _default_m(n)
        if (m - 1) * (k + 1) <= MAX_TABLE or n <= 1.0:
            return k, m
        n = math.floor(n * 0.9)


def _check_size(k: int, m: int) -> None:
    # the sampler holds one (m − 1) × (k + 1) table of big integers (a few hundred bytes each)
    if (m - 1) * (k + 1) > MAX_TABLE:
        raise DataError(
            f"a KS sample of size {k} on {m} grid points needs a path table of "
            f"{(m - 1) * (k + 1):,} big integers (limit {MAX_TABLE:,}); use a smaller size or "
            "grid. Nothing was charged."
        )
    check_memory(
        float(m) * (k + 1) * 3 + 512.0 * (k + 1), 8, f"a KS sample of size {k} on {m} points"
    )
