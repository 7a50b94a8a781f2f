"""Utility bounds before release for statistics made of several noisy parts, and for quantiles.

The variance and the covariance are functions of a few noisy sums, so their error is not one
noise term: it depends on the (private) mean of the data. What public parameters allow is a
**worst-case bound over every dataset within the bounds**: each part is within its half-width
``H_j`` at ``1 − alpha/m`` (Bonferroni over the ``m`` parts), and the estimate then moves by at
most the bound below, whatever the data. It holds with probability at least ``1 − alpha``; it is
conservative (the parts rarely all reach their half-widths together, and the data's mean is
rarely at a bound) and the released ``ci()``, which reads the noisy parts, is usually narrower.

Quantiles by the exponential mechanism have no data-free bound on the value (it depends on how
densely the data fill the bounds). Their accuracy is a **rank error**: the exponential mechanism's
utility theorem (McSherry and Talwar 2007; Dwork and Roth 2014, Theorem 3.11) bounds the gap
between the released value's score and the best score, ``|(1 − q)·#{x < v} − q·#{x > v}|``,
which for data without ties is the distance between the released value's rank and ``q·n``
(within one record).
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.stats._accuracy_var import known_n_var_error
from dpkit.stats._accuracy_var_count import CountLaw, NoiseLaw, private_n_var_error
from dpkit.stats._bivariate import cov_parts, cov_plan
from dpkit.stats._common import normalise
from dpkit.stats._moments import var_plan
from dpkit.stats._noisy import PartNoise, Plan
from dpkit.stats._quantile import _grid_data, quantile_grid

__all__ = ["cov_bound", "quantile_rank_error", "var_bound"]


def _ddof_bound(err: float, top: float, n: float, h_n: float, ddof: int) -> float:
    """Error of ``c(N)·v̂ − c(n)·v`` with ``c(m) = m / max(m − ddof, 1)``, given ``|v̂ − v| ≤ err``,
    ``|v| ≤ top`` and ``|N − n| ≤ h_n`` (``h_n = 0``: the count is public)."""
    if ddof == 0:
        return err
    low = n - h_n
    c_max = low / max(low - ddof, 1.0) if low > ddof else max(n / max(n - ddof, 1.0), 1.0)
    if h_n == 0.0:
        return c_max * err
    if low - ddof < 1.0:
        return math.inf
    dc = ddof * h_n / ((low - ddof) * max(n - ddof, 1.0))
    return c_max * err + top * dc


def _count_share(pl: Plan, known: bool, alpha: float) -> tuple[list[float], float]:
    """Each noisy part's half-width at ``alpha / m`` (Bonferroni), and the count's (0 if public)."""
    m = len(pl.parts)
    hs = [p.half_width(alpha / m) for p in pl.parts]
    if known:
        return hs, 0.0
    return hs[:-1], hs[-1]


def var_bound(
    bounds: tuple[float, float],
    epsilon: float,
    delta: float,
    replace: bool,
    n: int,
    known: bool,
    alpha: float,
    ddof: int,
    statistic: str,
) -> float:
    """A bound ``w`` with ``P(|released − exact| ≤ w) ≥ 1 − alpha`` for every dataset of ``n``
    records within ``bounds`` (the variance or standard deviation of the clamped data).

    Normalised records ``u ∈ [−A, A]`` (``A ≈ 1``) give ``v = b + 1/2 − a²`` with ``a = Σu/n``
    and ``b = Σ(u² − 1/2)/n``. In both cases the smallest ``w`` with ``P(|v̂ − v| ≤ w) ≥ 1 −
    alpha`` whatever the private ``a`` (and ``b``), from the joint law of the noises, with no
    Bonferroni split between them:

    * known n: the two sums' noises (:mod:`dpkit.stats._accuracy_var`);
    * unknown n: the two sums' and the count's, the ddof factor taken at the noisy count as
      the release takes it (:mod:`dpkit.stats._accuracy_var_count`); ``inf`` when the noisy
      count may come out at or below ``ddof`` (n too small for ε).

    Truncation at 0 only brings the estimate nearer (the variance is ≥ 0). The standard
    deviation's error is at most the square root of the variance's (``|√x − √y| ≤ √|x − y|``).
    """
    lo, hi = bounds
    pl, _ = var_plan(bounds, epsilon, delta, replace, known)
    _, ulo, uhi = normalise(np.empty(0), bounds)
    big_a = max(abs(ulo), abs(uhi))
    size = float(n)
    if known:
        # the exact joint law of the two noises, worst case over the private mean
        err = known_n_var_error(pl.parts[0], pl.parts[1], size, big_a, alpha)
        err = _ddof_bound(err, big_a * big_a, size, 0.0, ddof)
    else:
        # the joint law of the three noises, the count's included (ddof with the noisy count)
        s1, s2, cnt = pl.parts
        err = private_n_var_error(
            _law(s1), _law(s2), _count_law(cnt), size, big_a, 0.5, alpha, ddof
        )
    w = ((hi - lo) / 2) ** 2 * err
    return math.sqrt(w) if statistic == "std" else w


def _law(p: PartNoise) -> NoiseLaw:
    return NoiseLaw(p.kind, p.real_scale, 0.5 * p.unit if p.shift > 0 else 0.0)


def _count_law(p: PartNoise) -> CountLaw:
    return CountLaw(p.kind, float(p.scale), p.unit, 0.5 * p.unit if p.shift > 0 else 0.0)


def cov_bound(
    bx: tuple[float, float],
    by: tuple[float, float],
    epsilon: float,
    delta: float,
    replace: bool,
    n: int,
    known: bool,
    alpha: float,
    ddof: int,
) -> float:
    """A bound ``w`` with ``P(|released − exact| ≤ w) ≥ 1 − alpha`` for the covariance of every
    dataset of ``n`` pairs within the bounds.

    With ``a_u = Σu/n ∈ [−A_u, A_u]`` (likewise v), noisy sums within ``H_u, H_v, H_uv`` and a
    noisy count within ``H_n`` (0 when n is public; ``D = n − H_n``):
    ``|Σ̂uv/N − Σuv/n| ≤ (H_uv + A_u A_v H_n)/D``, ``|Σ̂u/N − a_u| ≤ e_u = (H_u + A_u H_n)/D`` and
    the product of the means moves by at most ``A_u e_v + A_v e_u + e_u e_v``.
    """
    hxy = (bx[1] - bx[0]) / 2 * (by[1] - by[0]) / 2
    parts = cov_parts(bx, by, replace)
    pl = cov_plan(parts, epsilon, delta, hxy, ddof, known=known, replace=replace)
    _, ulo, uhi = normalise(np.empty(0), bx)
    _, vlo, vhi = normalise(np.empty(0), by)
    au, av = max(abs(ulo), abs(uhi)), max(abs(vlo), abs(vhi))
    (hu, hv, huv), h_n = _count_share(pl, known, alpha)
    size = float(n)
    low = size - h_n
    if low < 1.0:
        return math.inf
    eu, ev = (hu + au * h_n) / low, (hv + av * h_n) / low
    err = (huv + au * av * h_n) / low + au * ev + av * eu + eu * ev
    return hxy * _ddof_bound(err, au * av, size, h_n, ddof)


def quantile_rank_error(
    bounds: tuple[float, float], epsilon: float, qs: list[float], replace: bool, alpha: float
) -> float:
    """The score gap ``t`` that each released quantile stays within with probability at least
    ``1 − alpha``: ``OPT − u(v) ≤ t = 2Δ_u / ε_q · ln(G / alpha)``.

    ``G`` is the number of grid points of the output space inside the bounds (the same grid as
    :func:`~dpkit.stats.quantile`), ``ε_q = ε/m`` each of the ``m`` quantiles' share and
    ``Δ_u = max(q, 1 − q)`` (add/remove) or 1 (replace-one) the score's sensitivity: the grid
    points whose score is more than ``t`` below the best weigh at most ``G·exp(−ε_q t / (2Δ_u))``
    times the best point's weight (McSherry and Talwar 2007). The largest ``t`` over ``qs``.
    """
    lo, hi = bounds
    g = quantile_grid(lo, hi)
    _, kl, kh = _grid_data(np.empty(0), lo, hi, g)
    points = kh - kl + 1
    eps_each = epsilon / len(qs) * (1.0 - 2.0**-40)
    worst = max(1.0 if replace else max(q, 1.0 - q) for q in qs)
    return 2.0 * worst / eps_each * (math.log(points) + math.log(1.0 / alpha))
