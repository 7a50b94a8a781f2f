"""The variance's half-width with a private n, from the joint law of its three noises.

With the number of records private, the variance is released from three noisy totals: the sum
``n·a + Z₁`` of the normalised records (``a`` their mean, ``|a| ≤ A``), the sum of squares
``n·b + Z₂`` and the count ``m = n + Z_n`` (``b`` the mean square, centred by ``offset``: the
variance is ``v = b + offset − a²``). With ``D = q − a²``, ``q = ((n·a + Z₁)/m)²`` (clipped at 1
where the estimator clips the mean to the bounds), the released variance is within ``w`` of
``v`` exactly when Z₂ lies in an interval ``[f₋, f₊]``:

    f± = m·D + v·(c(n)(m − ddof) − m) ± w·(m − ddof) + (m − n)·b,   c(k) = k / (k − ddof),

the ``ddof`` factor computed with the noisy count, as the release does; truncation at 0 (and
the frame's clip to the bounds) only brings the estimate nearer. The half-width is the
smallest ``w`` with ``P(Z₂ ∈ [f₋, f₊]) ≥ 1 − alpha`` for **every** dataset of n records
within the bounds: the worst case over the private ``(a, b)``, computed by conditioning on the
count and on Z₁, with only the count's and Z₁'s far tails (``alpha/50`` and ``alpha/1000``)
counted as misses (no Bonferroni split between the parts):

* the count's range ``±K`` is cut into at most 48 bins of integers (each integer its own bin
  when there are few) carrying their exact discrete Laplace or discrete Gaussian mass; Z₁'s
  range into 201 bins, over each of which ``D`` is bounded exactly (``q`` is valley-shaped in Z₁);
* ``(a, b)`` runs over a grid of cells; between a cell's corner and any point of the cell,
  and between a count bin's centre and any count in it, ``f±`` moves by at most the sup of
  its partial derivatives over the cell times the cell's width (``slack``), which is taken
  off the interval: the coverage found at the corner holds on the whole cell;
* the frame's inner clip of the mean square to ``[0, 1]`` keeps the interval valid as long as
  its lower end stays below 1 (checked with the slack; otherwise the cell counts as a miss).

The laws of Z₁, Z₂ are the continuous Laplace / normal laws of the exact noise's scale (as in
:mod:`dpkit.stats._accuracy_var`); the count's is the exact discrete law. The minimum over the
cells is found by bisection on the few cells that bind, each candidate checked on all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dpkit.mechanisms._tails import discrete_gaussian_quantile, discrete_laplace_quantile
from dpkit.stats._accuracy_var import _cdf, _tail

__all__ = ["CountLaw", "NoiseLaw", "private_n_var_error"]

Floats = npt.NDArray[np.float64]

_Z_BINS = 201  # bins of Z₁ (odd: one centred on 0)
_M_BINS = 48  # bins of the count's noise, at most
_A_STEPS = 32  # cells of the private mean a over [0, A]
_A_FINE = 24  # of which, with the clip, near A
_B_STEPS = 8  # cells of the private mean square b, per a
_COUNT_SHARE = 50  # the count's far tail: alpha / 50 counted as a miss


@dataclass(frozen=True)
class NoiseLaw:
    """A noisy total's continuous noise law: ``kind``, real scale and rounding (half a step)."""

    kind: str
    scale: float
    rounding: float


@dataclass(frozen=True)
class CountLaw:
    """The count's integer noise: ``kind``, scale in grid units, grid unit and rounding."""

    kind: str
    scale: float
    unit: float
    rounding: float


def _count_mass(law: CountLaw, alpha: float) -> tuple[Floats, Floats]:
    """The integers ``k`` within the count's ``alpha`` quantile and their exact probabilities."""
    if law.kind == "gaussian":
        top = discrete_gaussian_quantile(law.scale, alpha)
    else:
        top = discrete_laplace_quantile(law.scale, alpha)
    k = np.arange(-top, top + 1, dtype=np.float64)
    if law.kind == "gaussian":
        s = law.scale
        if s < 2.0:
            j = np.arange(-math.ceil(40 * s) - 2, math.ceil(40 * s) + 3, dtype=np.float64)
            norm = float(np.exp(-(j * j) / (2 * s * s)).sum())
        else:  # Poisson summation, its first correction as an upper bound (the mass only falls)
            e = math.exp(-2.0 * math.pi**2 * s * s)
            norm = s * math.sqrt(2 * math.pi) * (1.0 + 2.0 * e / (1.0 - e))
        mass = np.exp(-(k * k) / (2 * s * s)) / norm
    else:
        p = math.exp(-1.0 / law.scale)
        mass = (1.0 - p) / (1.0 + p) * np.power(p, np.abs(k))
    return k, mass


def _count_bins(law: CountLaw, n: float, alpha: float) -> tuple[Floats, Floats, Floats, Floats]:
    """``(centre, half-width, lowest, mass)`` of each bin of the noisy count, in records."""
    k, mass = _count_mass(law, alpha)
    width = max(1, math.ceil(k.size / _M_BINS))
    starts = np.arange(0, k.size, width)
    ends = np.minimum(starts + width, k.size) - 1
    bin_mass = np.add.reduceat(mass, starts)
    centre = n + law.unit * (k[starts] + k[ends]) / 2
    half = law.unit * (k[ends] - k[starts]) / 2 + law.rounding
    return centre, half, centre - half, bin_mass


@lru_cache(maxsize=256)
def private_n_var_error(
    z1: NoiseLaw,
    z2: NoiseLaw,
    count: CountLaw,
    n: float,
    big_a: float,
    offset: float,
    alpha: float,
    ddof: int = 0,
    clip: bool = False,
) -> float:
    """The smallest ``w`` (normalised variance units) with ``P(|released − v| ≤ w) ≥ 1 − alpha``
    for every dataset of n records with normalised values in ``[−big_a, big_a]`` (module
    notes); ``inf`` when the noisy count may come out at or below ``max(0, ddof)``."""
    m_c, m_h, m_lo, m_mass = _count_bins(count, n, alpha / _COUNT_SHARE)
    if float(m_lo.min()) < ddof + 1.0:
        return math.inf
    top = _tail(z1.kind, z1.scale, alpha / 1000.0) if z1.scale > 0 else 0.0
    edges = np.linspace(-top, top, _Z_BINS + 1)
    z_mass = np.diff(_cdf(z1.kind, z1.scale, edges))
    z_lo, z_hi = edges[:-1] - z1.rounding, edges[1:] + z1.rounding
    z_abs = np.maximum(np.abs(z_lo), np.abs(z_hi))

    # axes: (a, b, count, Z₁)
    if clip:
        # where the mean may be clipped (n·a + |Z₁| ≥ m), f moves by 2·m·a per unit of a: the
        # cells there are fine
        reach = (top + z1.rounding + n - float(m_lo.min())) / n
        kappa = min(big_a, max(reach, 0.0))
        a_edges = np.concatenate(
            (np.linspace(0.0, big_a - kappa, _A_STEPS - _A_FINE + 1)[:-1],
             np.linspace(big_a - kappa, big_a, _A_FINE + 1))
        )  # fmt: skip
    else:
        a_edges = np.linspace(0.0, big_a, _A_STEPS + 1)
    a = a_edges[:-1, None, None, None]
    a_top = a_edges[1:, None, None, None]
    da = a_top - a
    steps = np.arange(_B_STEPS)[None, :, None, None]
    db = (big_a * big_a - a * a) / _B_STEPS  # b in [a² − offset, A² − offset] for |u| ≤ A
    b = a * a - offset + steps * db
    v = b + offset - a * a
    mc, mh, ml = (x[None, None, :, None] for x in (m_c, m_h, m_lo))
    mt = mc + mh
    full = (_A_STEPS, _B_STEPS, m_c.size, _Z_BINS)
    zl, zh, za = (x[None, None, None, :] for x in (z_lo, z_hi, z_abs))

    # D = q − a² over each Z₁ bin at the cell's corner and the bin's centre count (exact)
    s_lo, s_hi = n * a + zl, n * a + zh
    s2_max = np.maximum(s_lo * s_lo, s_hi * s_hi)
    s2_min = np.where((s_lo <= 0) & (s_hi >= 0), 0.0, np.minimum(s_lo * s_lo, s_hi * s_hi))
    q_max, q_min = s2_max / (mc * mc), s2_min / (mc * mc)
    if clip:
        q_max, q_min = np.minimum(q_max, 1.0), np.minimum(q_min, 1.0)
    cn = n / (n - ddof)
    g_c = cn * (mc - ddof) - mc  # v's coefficient, at the bin's centre
    g_abs = np.maximum(np.abs(cn * (ml - ddof) - ml), np.abs(cn * (mt - ddof) - mt))
    base = g_c * v + (mc - n) * b
    lower0 = np.broadcast_to(mc * (q_max - a * a) + base, full)
    upper0 = np.broadcast_to(mc * (q_min - a * a) + base, full)

    # slack: sup of each partial derivative of f± over the cell times its half/whole width
    s_abs = n * a_top + za
    n2 = np.maximum(np.abs(n * n / ml - ml), np.abs(n * n / mt - mt))
    d_a = 2 * a_top * n2 + 2 * n * za / ml
    if clip:
        d_a = np.maximum(d_a, np.where(s_abs >= ml, 2 * mt * a_top, 0.0))
    d_a = d_a + 2 * a_top * g_abs
    d_b = np.maximum(np.abs(cn * (ml - ddof) - n), np.abs(cn * (mt - ddof) - n))
    b_abs = max(abs(offset), abs(big_a * big_a - offset))
    # ∂f/∂m = −s²/m² − a² (q unclipped) or 1 − a² (clipped) + v·(c(n) − 1) + b, as an interval
    c_lo, c_hi = n * a + zl, n * a_top + zh  # s over the whole cell
    s2_least = np.where((c_lo <= 0) & (c_hi >= 0), 0.0, np.minimum(c_lo * c_lo, c_hi * c_hi))
    x_lo = -(s_abs * s_abs) / (ml * ml) - a_top * a_top
    x_hi = -s2_least / (mt * mt) - a * a
    if clip:
        x_hi = np.maximum(x_hi, np.where(s_abs >= ml, 1.0 - a * a, -np.inf))
    v_lo = b + offset - a_top * a_top  # (not clamped at 0: the path may cross v < 0)
    x_lo = x_lo + v_lo * (cn - 1) + b
    x_hi = x_hi + (b + db + offset - a * a) * (cn - 1) + b + db
    d_m = np.maximum(np.abs(x_lo), np.abs(x_hi))
    slack = np.broadcast_to(da * d_a + db * d_b + mh * d_m + z2.rounding, full)
    b_top = np.broadcast_to(b + db, (_A_STEPS, _B_STEPS, 1, 1))
    mw = mc - ddof  # the w term's coefficient at the centre; its variation is mh per unit w
    weights = m_mass[:, None] * z_mass[None, :]  # (count, Z₁)

    def coverage(w: float, cells: tuple[slice | npt.NDArray[np.intp], ...]) -> Floats:
        lo = lower0[cells] - w * mw + slack[cells] + w * mh
        hi = upper0[cells] + w * mw - slack[cells] - w * mh
        g = _cdf(z2.kind, z2.scale, hi) - _cdf(z2.kind, z2.scale, lo)
        g = np.where(hi > lo, np.maximum(g, 0.0), 0.0)
        if clip:  # the inner clip of the mean square keeps the interval while its lower end ≤ 1
            g = np.where(lo + n * b_top[cells] <= ml, g, 0.0)
        return np.asarray((g * weights).sum(axis=(-2, -1)), dtype=np.float64)

    every = (slice(None), slice(None))
    ok = 1.0 - alpha
    b_top_abs = float(np.max(np.abs(m_c - n) + m_h))
    high = (_tail(z2.kind, z2.scale, alpha / 4) + 2 * big_a * top + b_abs * b_top_abs) / n
    high = max(high, 1e-12)
    low = 0.0
    # the cells that bind are near a = A (data at one bound) in practice: start with them, and
    # add any cell that the check on all of them finds short
    active = {(i, k) for i in (_A_STEPS - 2, _A_STEPS - 1) for k in range(_B_STEPS)}
    while True:
        ia = np.array([p[0] for p in sorted(active)], dtype=np.intp)
        ib = np.array([p[1] for p in sorted(active)], dtype=np.intp)
        some = (ia, ib)
        while float(np.min(coverage(high, some))) < ok:
            low, high = high, 2.0 * high
            if high > 1e6 * (1.0 + big_a) ** 2:  # pragma: no cover - no finite width does
                return math.inf
        while high - low > 1e-4 * high:  # (the result is a covered width: it is safe)
            mid = 0.5 * (low + high)
            if float(np.min(coverage(mid, some))) >= ok:
                high = mid
            else:
                low = mid
        cov = coverage(high, every)
        if float(np.min(cov)) >= ok:
            return high
        # the active cells need at least ``high``; the cells short at it join them
        low = high
        short = np.argsort(cov, axis=None)[:4]
        active |= {(int(i) // _B_STEPS, int(i) % _B_STEPS) for i in short}
