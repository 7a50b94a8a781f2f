"""Privacy-loss pairs of events, discretised pessimistically onto a grid of losses.

For each event we describe a pair (P, Q) of output distributions that dominates the mechanism on
*removing* a unit (P = M(D), Q = M(D') with D = D' ∪ {x}); the *add* direction is the swapped pair.
The pair is discretised with the "connect the dots" rule of Doroshenko, Ghazi, Kamath, Kumar &
Manurangsi (2022): the P-mass of losses inside a grid cell [ih, (i+1)h] is split between its two
ends so that both the P-mass and the Q-mass are kept. The discrete hockey-stick curve is then the
chord interpolation of the exact one (in e^ε), which lies above it by convexity, so ε is never
underestimated. Tails beyond ~1e-20 of mass are moved to a higher loss or to +∞.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpkit.accounting._discrete_gaussian import (
    discrete_gaussian_mass,
    discrete_gaussian_mass_bounds,
)
from dpkit.accounting._events import (
    ApproxDPEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PermuteAndFlipEvent,
    PoissonSubsampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
)
from dpkit.accounting._guarantees import Neighbouring
from dpkit.accounting._relation import undeclared

__all__ = ["Pmf", "Unsupported", "discrete_laplace_atoms", "event_pmfs"]

Array = NDArray[np.float64]
_Z = 9.5  # standard-normal tail cut: Φ(-9.5) ≈ 1e-21
MAX_BINS = 1 << 20  # a single event's loss grid; wider ones fall back to other methods


class Unsupported(Exception):
    """The PLD accountant cannot represent this event (another method must be used)."""


@dataclass
class Pmf:
    """A discrete privacy-loss distribution: P-mass ``probs[i]`` at loss (offset + i)·h, plus
    ``inf`` at loss +∞."""

    offset: int
    probs: Array
    inf: float


class _Builder:
    def __init__(self, h: float) -> None:
        self.h = h
        self.idx: list[NDArray[np.int64]] = []
        self.mass: list[Array] = []
        self.inf = 0.0

    def split(self, lo: NDArray[np.int64], p: Array, q: Array) -> None:
        """Connect-the-dots split of cells [lo·h, (lo+1)·h] with masses (p, q)."""
        keep = p > 0
        lo, p, q = lo[keep], p[keep], q[keep]
        h = self.h
        with np.errstate(divide="ignore"):
            qe = np.exp(np.log(q) + lo * h)  # q·e^{ε_lo} ≤ p in exact arithmetic
        a = np.clip((qe - math.exp(-h) * p) / -math.expm1(-h), 0.0, p)
        self.idx += [lo, lo + 1]
        self.mass += [a, p - a]

    def atoms(self, loss: Array, p: Array, q: Array) -> None:
        lo = np.floor(loss / self.h).astype(np.int64)
        self.split(lo, p, q)

    def point(self, index: int, p: float) -> None:
        self.idx.append(np.array([index], dtype=np.int64))
        self.mass.append(np.array([p]))

    def build(self) -> Pmf:
        idx = np.concatenate(self.idx) if self.idx else np.zeros(1, dtype=np.int64)
        mass = np.concatenate(self.mass) if self.mass else np.zeros(1)
        lo, hi = int(idx.min()), int(idx.max())
        if hi - lo + 1 > MAX_BINS:
            raise Unsupported("loss range too wide for the grid; use a coarser discretisation")
        probs = np.asarray(np.bincount(idx - lo, weights=mass, minlength=hi - lo + 1), np.float64)
        return Pmf(lo, probs, min(1.0, self.inf))


def _norm_mass(a: Array, b: Array) -> Array:
    """P[a < Z ≤ b] for Z ~ N(0, 1), accurate in both tails."""
    out = np.where(a > 0, special.ndtr(-a) - special.ndtr(-b), special.ndtr(b) - special.ndtr(a))
    return np.asarray(out, dtype=np.float64)


def _gaussian_pmfs(mu: float, q: float, h: float) -> tuple[Pmf, Pmf]:
    # Remove pair: P = (1-q)N(0,1) + qN(μ,1), Q = N(0,1); loss L(x) = log(1 - q + q e^{μx - μ²/2}).
    def loss(x: float) -> float:
        u = mu * x - mu * mu / 2
        return u if q == 1 else math.log1p(q * math.expm1(u)) if u < 700 else math.log(q) + u

    x_lo, x_hi = -_Z, mu + _Z
    i_lo, i_hi = math.floor(loss(x_lo) / h), math.ceil(loss(x_hi) / h)
    if i_hi - i_lo > MAX_BINS:
        raise Unsupported("loss range too wide for the grid")
    eps = np.arange(i_lo, i_hi + 1) * h
    with np.errstate(divide="ignore", invalid="ignore"):
        u = eps if q == 1 else np.log1p(np.expm1(eps) / q)
    x = np.clip(np.nan_to_num((u + mu * mu / 2) / mu, nan=-np.inf), x_lo, x_hi)
    a, b = x[:-1], x[1:]
    qm = _norm_mass(a, b)
    pm_in = _norm_mass(a - mu, b - mu)
    pm = pm_in if q == 1 else (1 - q) * qm + q * pm_in
    lo = np.arange(i_lo, i_hi, dtype=np.int64)
    p_left = (1 - q) * special.ndtr(x_lo) + q * special.ndtr(x_lo - mu)
    p_right = (1 - q) * special.ndtr(-x_hi) + q * special.ndtr(mu - x_hi)
    q_left, q_right = special.ndtr(x_lo), special.ndtr(-x_hi)
    rem = _Builder(h)
    rem.split(lo, pm, qm)
    rem.point(math.ceil(loss(x_lo) / h), float(p_left))
    rem.inf = float(p_right)
    add = _Builder(h)
    add.split(-lo - 1, qm, pm)
    add.point(math.ceil(-loss(x_hi) / h), float(q_right))
    add.inf = float(q_left)
    return rem.build(), add.build()


def _laplace_pmfs(t: float, q: float, h: float) -> tuple[Pmf, Pmf]:
    # Remove pair: P = (1-q)Lap(0,1) + qLap(t,1), Q = Lap(0,1); inner loss u = |x| - |x - t|.
    def lossu(u: Array) -> Array:
        return u if q == 1 else np.log1p(q * np.expm1(u))

    e = math.exp(-t)
    atom_loss = lossu(np.array([-t, t]))
    atom_p = np.array([(1 - q) / 2 + q * e / 2, (1 - q) * e / 2 + q / 2])
    atom_q = np.array([0.5, e / 2])
    i_lo, i_hi = math.floor(atom_loss[0] / h), math.ceil(atom_loss[1] / h)
    if i_hi - i_lo > MAX_BINS:
        raise Unsupported("loss range too wide for the grid")
    eps = np.arange(i_lo, i_hi + 1) * h
    with np.errstate(divide="ignore", invalid="ignore"):
        u = eps if q == 1 else np.log1p(np.expm1(eps) / q)
    x = np.clip(np.nan_to_num((u + t) / 2, nan=0.0), 0.0, t)
    a, b = x[:-1], x[1:]
    width = -np.expm1(-(b - a))
    qm = 0.5 * np.exp(-a) * width
    pm_in = 0.5 * np.exp(-(t - b)) * width
    pm = pm_in if q == 1 else (1 - q) * qm + q * pm_in
    lo = np.arange(i_lo, i_hi, dtype=np.int64)
    rem = _Builder(h)
    rem.split(lo, pm, qm)
    rem.atoms(atom_loss, atom_p, atom_q)
    add = _Builder(h)
    add.split(-lo - 1, qm, pm)
    add.atoms(-atom_loss, atom_q, atom_p)
    return rem.build(), add.build()


def discrete_laplace_atoms(scale: float, sens: int) -> tuple[Array, Array, Array]:
    """Exact (loss, P, Q) atoms of the discrete Laplace pair P = DL(Δ, b), Q = DL(0, b)."""
    r = math.exp(-1.0 / scale)
    c = -math.expm1(-1.0 / scale) / (1 + r)
    tail = c / -math.expm1(-1.0 / scale)
    k = np.arange(1, sens, dtype=np.float64)
    loss = np.concatenate([[-sens / scale], (2 * k - sens) / scale, [sens / scale]])
    p = np.concatenate([[tail * r**sens], c * np.exp(-(sens - k) / scale), [tail]])
    q = np.concatenate([[tail], c * np.exp(-k / scale), [tail * r**sens]])
    return loss, p, q


def _discrete_gaussian_atoms(sigma: float, sens: int) -> tuple[Array, Array, Array, float]:
    t = math.ceil(sigma * 12.0) + 2
    k = np.arange(-t, t + sens + 1, dtype=np.float64)
    z = np.exp(-(np.arange(-t - sens, t + sens + 1, dtype=np.float64) ** 2) / (2 * sigma**2)).sum()
    p = np.exp(-((k - sens) ** 2) / (2 * sigma**2)) / z
    q = np.exp(-(k**2) / (2 * sigma**2)) / z
    loss = (2 * k * sens - sens * sens) / (2 * sigma**2)
    # Mass outside the window, bounded by the continuous tail:
    # Σ_{k>t} e^{-k²/2σ²} ≤ σ√(π/2) erfc(t/σ√2).
    out = 2 * sigma * math.sqrt(math.pi / 2) * math.erfc(t / (sigma * math.sqrt(2))) / z
    return loss, p, q, out


_ATOMS_MAX_SIGMA = 1024.0  # above this the discrete Gaussian is bucketed, not enumerated


def _discrete_gaussian_pmfs(sigma: float, sens: int, h: float) -> Pmf:
    """Remove PLD of P = N_ℤ(D, σ²), Q = N_ℤ(0, σ²) from tail differences, one per loss cell.

    The loss L(k) = D(k − D/2)/σ² increases with k, so cell [ih, (i+1)h) holds the integers
    e_i ≤ k < e_{i+1} with e_i = ⌈ihσ²/D + D/2⌉; its P- and Q-masses are differences of discrete
    tails (:func:`discrete_gaussian_mass`, O(1) each), split by connect-the-dots as for the
    continuous Gaussian. Work is O(number of cells), independent of σ. Mass with k below
    −⌈9.5σ⌉ is moved up to that loss; mass above D + ⌈9.5σ⌉ (< 1e-20) is put at loss +∞. The
    pair is symmetric (P(k) = Q(D − k)), so the add PLD is the same.
    """
    d = float(sens)
    c = sigma * sigma / d
    k_lo = -float(math.ceil(_Z * sigma))
    k_hi = d + float(math.ceil(_Z * sigma))

    def loss(k: float) -> float:
        return (k - d / 2) / c

    i_lo, i_hi = math.floor(loss(k_lo) / h), math.ceil(loss(k_hi) / h) + 1
    if i_hi - i_lo > MAX_BINS:
        raise Unsupported("loss range too wide for the grid")
    cells = np.arange(i_lo, i_hi + 1, dtype=np.float64)
    edges = np.clip(np.ceil(cells * h * c + d / 2), k_lo, k_hi + 1)
    a, b = edges[:-1], edges[1:]
    qm, q_err = discrete_gaussian_mass_bounds(a, b, sigma)
    pm, p_err = discrete_gaussian_mass_bounds(a - d, b - d, sigma)
    lo = np.arange(i_lo, i_hi, dtype=np.int64)
    rem = _Builder(h)
    rem.split(lo, pm, qm)
    below = float(discrete_gaussian_mass(np.array([-np.inf]), np.array([k_lo - d]), sigma)[0])
    rem.point(math.ceil(loss(k_lo) / h), below)
    above = float(discrete_gaussian_mass(np.array([k_hi + 1 - d]), np.array([np.inf]), sigma)[0])
    # the cell masses are float estimates: their error bounds go to loss +∞ (pessimistic)
    rem.inf = above + float(np.sum(p_err) + np.sum(q_err))
    return rem.build()


def _atoms_pmfs(
    loss: Array, p: Array, q: Array, h: float, p_only: float = 0.0, q_only: float = 0.0
) -> tuple[Pmf, Pmf]:
    rem = _Builder(h)
    rem.atoms(loss, p, q)
    rem.inf = p_only
    add = _Builder(h)
    add.atoms(-loss, q, p)
    add.inf = q_only
    return rem.build(), add.build()


def _pure_atoms(epsilon: float, delta: float = 0.0) -> tuple[Array, Array, Array]:
    # Kairouz, Oh & Viswanath (2015): binary randomized response (with a δ-atom) dominates every
    # (ε, δ)-DP mechanism.
    hi = (1 - delta) / (1 + math.exp(-epsilon))
    lo = (1 - delta) / (1 + math.exp(epsilon))
    return np.array([epsilon, -epsilon]), np.array([hi, lo]), np.array([lo, hi])


def _subsample_atoms(
    loss: Array, p: Array, q: Array, p_only: float, q_only: float, s: float
) -> tuple[Array, Array, Array, float, float]:
    # Remove pair of the subsampled mechanism: ((1-s)Q + sP, Q) (Zhu, Dong & Wang 2022, Thm 10),
    # for a pair that dominates both directions (all atom pairs here are symmetric).
    new_p = (1 - s) * q + s * p
    with np.errstate(divide="ignore"):
        new_loss = np.log(new_p) - np.log(q)
    new_q = q.copy()
    # The P-only atom becomes a P-only atom of mass s·p_only; the Q-only atom keeps loss -∞.
    extra_loss = np.array([]) if q_only == 0 else np.array([math.log1p(-s)]) if s < 1 else None
    if extra_loss is not None and extra_loss.size:
        new_loss = np.concatenate([new_loss, extra_loss])
        new_p = np.concatenate([new_p, [(1 - s) * q_only]])
        new_q = np.concatenate([new_q, [q_only]])
        q_only = 0.0
    return new_loss, new_p, new_q, s * p_only, q_only


def _event_atoms(event: Event) -> tuple[Array, Array, Array, float, float] | None:
    # A discrete pair has about Δ + 24σ atoms: past a single event's loss grid (MAX_BINS) it is
    # not enumerated (Δ = 2³³ asked for a 64 GiB array) but left to the other methods.
    if isinstance(event, DiscreteLaplaceEvent) and event.sensitivity > MAX_BINS:
        raise Unsupported("too many atoms for the PLD method")
    if isinstance(event, DiscreteGaussianEvent) and (
        event.sensitivity + 24 * event.sigma > MAX_BINS
    ):
        raise Unsupported("too many atoms for the PLD method")
    if isinstance(event, DiscreteLaplaceEvent):
        loss, p, q = discrete_laplace_atoms(event.scale, event.sensitivity)
        return loss, p, q, 0.0, 0.0
    if isinstance(event, DiscreteGaussianEvent):
        if event.dimension != 1 or event.sensitivity != round(event.sensitivity):
            return None
        loss, p, q, out = _discrete_gaussian_atoms(event.sigma, int(event.sensitivity))
        return loss, p, q, out, out
    if isinstance(event, RandomizedResponseEvent):
        e, k = event.epsilon, event.categories
        z = math.exp(e) + k - 1
        loss = np.array([e, -e] + ([0.0] if k > 2 else []))
        p = np.array([math.exp(e) / z, 1 / z] + ([(k - 2) / z] if k > 2 else []))
        q = np.array([1 / z, math.exp(e) / z] + ([(k - 2) / z] if k > 2 else []))
        return loss, p, q, 0.0, 0.0
    if isinstance(event, ExponentialEvent | ReportNoisyMaxEvent | PermuteAndFlipEvent):
        return (*_pure_atoms(event.epsilon), 0.0, 0.0)
    if isinstance(event, PureDPEvent):
        return (*_pure_atoms(event.epsilon), 0.0, 0.0)
    if isinstance(event, ApproxDPEvent):
        return (*_pure_atoms(event.epsilon, event.delta), event.delta, event.delta)
    return None


def _symmetrised(pmf: Pmf, h: float) -> Pmf:
    """The symmetric PLD that agrees with ``pmf`` on positive losses (Dong, Roth & Su 2022).

    Mass ``p`` at loss ``l > 0`` is kept and mirrored to ``−l`` with mass ``p·e^{−l}`` (the other
    distribution's mass there), the rest sits at loss 0 (the tradeoff curve's segment of slope
    −1). δ(ε) for ε ≥ 0 is unchanged; the pair it describes has the same PLD in both orders.
    """
    idx = pmf.offset + np.arange(pmf.probs.size)
    pos = idx > 0
    top = int(idx[pos].max()) if pos.any() else 0
    full = np.zeros(2 * top + 1)
    p = pmf.probs[pos]
    full[top + idx[pos]] = p
    full[top - idx[pos]] = p * np.exp(-idx[pos] * h)
    zero = 1.0 - pmf.inf - float(full.sum())
    if zero < -1e-9:  # pragma: no cover - the pair's tradeoff would not be a valid one
        raise Unsupported("no symmetric dominating pair for this event")
    full[top] = max(zero, 0.0)
    # the mirrored far-negative losses carry mass p·e^{−l}: below 1e-15 in all it is moved up to
    # the first kept loss (pessimistic, as in composition), which keeps the grid short
    cut = int(np.searchsorted(np.cumsum(full), 1e-15, side="right"))
    cut = min(cut, top)
    if cut > 0:
        full[cut] += float(full[:cut].sum())
        full = full[cut:]
    return Pmf(cut - top, full, pmf.inf)


def event_pmfs(event: Event, h: float) -> tuple[Pmf, Pmf | None]:
    """(remove, add) PLDs of one leaf event on the grid h·ℤ; add is None when it equals remove."""
    if isinstance(event, SampledWithoutReplacementEvent):
        inner_event = event.event
        if isinstance(inner_event, PoissonSubsampledEvent | SampledWithoutReplacementEvent):
            raise Unsupported("nested subsampling")
        # ((1−γ)Q + γP, Q) is the Poisson remove pair of the same inner pair at rate γ
        rem, _ = event_pmfs(
            PoissonSubsampledEvent(undeclared(inner_event), sampling_rate=event.sampling_rate), h
        )
        return _symmetrised(rem, h), None
    q = 1.0
    inner = event
    replace = False
    if isinstance(event, PoissonSubsampledEvent):
        q, inner = event.sampling_rate, event.event
        replace = event.neighbouring is Neighbouring.REPLACE
        if isinstance(inner, PoissonSubsampledEvent | SampledWithoutReplacementEvent):
            raise Unsupported("nested subsampling")
    if replace:
        # Common-atom mixture: loss 0 with probability 1 - q, the inner loss with probability q.
        rem, add = event_pmfs(inner, h)
        out = []
        for pmf in (rem, add if add is not None else rem):
            probs = pmf.probs * q
            lo, hi = min(pmf.offset, 0), max(pmf.offset + probs.size - 1, 0)
            full = np.zeros(hi - lo + 1)
            full[pmf.offset - lo : pmf.offset - lo + probs.size] += probs
            full[-lo] += 1 - q
            out.append(Pmf(lo, full, q * pmf.inf))
        return out[0], (out[1] if add is not None else None)
    if isinstance(inner, GaussianEvent):
        rem, add = _gaussian_pmfs(inner.sensitivity / inner.sigma, q, h)
        return rem, (add if q < 1 else None)
    if isinstance(inner, LaplaceEvent):
        rem, add = _laplace_pmfs(inner.sensitivity / inner.scale, q, h)
        return rem, (add if q < 1 else None)
    if isinstance(inner, DiscreteGaussianEvent) and inner.sigma > _ATOMS_MAX_SIGMA:
        if q < 1 or inner.dimension != 1 or not float(inner.sensitivity).is_integer():
            raise Unsupported("no bucketed PLD for this discrete Gaussian")
        return _discrete_gaussian_pmfs(inner.sigma, int(inner.sensitivity), h), None
    atoms = _event_atoms(inner)
    if atoms is None:
        raise Unsupported(f"no privacy loss distribution for {type(inner).__name__}")
    loss, p, qq, p_only, q_only = atoms
    if q < 1:
        loss, p, qq, p_only, q_only = _subsample_atoms(loss, p, qq, p_only, q_only, q)
    rem, add = _atoms_pmfs(loss, p, qq, h, p_only, q_only)
    return rem, (add if q < 1 else None)
