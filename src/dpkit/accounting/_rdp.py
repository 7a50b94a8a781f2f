"""Rényi differential privacy (RDP) curves of events and their conversion to (ε, δ).

A mechanism is (α, ε_α)-RDP when D_α(M(D) ‖ M(D')) ≤ ε_α (Mironov 2017). RDP curves add under
composition, including adaptive composition; the curve is kept on a fixed grid of orders α.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpkit.accounting._bounds import pure_epsilon
from dpkit.accounting._events import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSubsampledEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpkit.accounting._guarantees import Neighbouring

__all__ = ["ORDERS", "rdp_curve", "rdp_delta", "rdp_epsilon"]

Curve = NDArray[np.float64]

ORDERS: NDArray[np.float64] = np.unique(
    np.concatenate(
        [
            1.0 + np.arange(1, 40) / 20.0,  # 1.05 … 2.95
            np.arange(3.0, 12.0, 0.5),
            np.arange(12.0, 65.0),
            np.array([72.0, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512, 768, 1024]),
        ]
    )
)
"""The Rényi orders every curve is evaluated on (integer orders are needed for subsampling)."""

_INTEGER = np.round(ORDERS) == ORDERS


def _binary_rr_curve(epsilon: float) -> Curve:
    # RDP of binary randomized response, the worst case for every ε-DP mechanism (Mironov 2017,
    # Proposition 5): D_α = log(p^α q^{1-α} + q^α p^{1-α})/(α - 1), p = e^ε/(1 + e^ε).
    lp = -math.log1p(math.exp(-epsilon))
    lq = -math.log1p(math.exp(epsilon))
    a = ORDERS
    return np.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp) / (a - 1)


def _laplace_curve(t: float) -> Curve:
    # Mironov (2017), Table II, Laplace with λ = 1/t.
    a = ORDERS
    s = np.logaddexp(np.log(a / (2 * a - 1)) + (a - 1) * t, np.log((a - 1) / (2 * a - 1)) - a * t)
    return np.minimum(s / (a - 1), t)


def _atoms_curve(p: NDArray[np.float64], q: NDArray[np.float64]) -> Curve:
    # D_α(P‖Q) for discrete P, Q (both orders of the pair), on the grid.
    mask = (p > 0) & (q > 0)
    lp, lq = np.log(p[mask]), np.log(q[mask])
    a = ORDERS[:, None]
    fwd = special.logsumexp(a * lp + (1 - a) * lq, axis=1)
    bwd = special.logsumexp(a * lq + (1 - a) * lp, axis=1)
    return np.asarray(np.maximum(fwd, bwd) / (ORDERS - 1), dtype=np.float64)


def _rr_atoms(epsilon: float, k: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    z = math.exp(epsilon) + k - 1
    p = np.array([math.exp(epsilon) / z, 1 / z] + ([(k - 2) / z] if k > 2 else []))
    q = np.array([1 / z, math.exp(epsilon) / z] + ([(k - 2) / z] if k > 2 else []))
    return p, q


def _subsampled_gaussian_curve(q: float, mu: float) -> Curve:
    # Mironov, Talwar & Zhang (2019), Section 3.3, integer α:
    # A_α = Σ_k C(α,k) (1-q)^{α-k} q^k exp((k² - k) μ²/2), ε_α = log A_α/(α - 1).
    out = np.full(ORDERS.shape, np.inf)
    if q == 1.0:
        return np.asarray(ORDERS * mu * mu / 2, dtype=np.float64)
    lq, l1q = math.log(q), math.log1p(-q)
    for i in np.flatnonzero(_INTEGER):
        a = int(ORDERS[i])
        k = np.arange(a + 1, dtype=np.float64)
        logb = special.gammaln(a + 1) - special.gammaln(k + 1) - special.gammaln(a - k + 1)
        terms = logb + (a - k) * l1q + k * lq + (k * k - k) * mu * mu / 2
        out[i] = special.logsumexp(terms) / (a - 1)
    return out


def _subsampled_general_curve(q: float, inner: Curve) -> Curve:
    # Zhu & Wang (2019), Theorem 6 (general Poisson-subsampled RDP bound, integer α ≥ 2):
    # (1-q)^{α-1}(αq - q + 1) + C(α,2) q² (1-q)^{α-2} e^{ε(2)}
    #   + 3 Σ_{ℓ=3}^α C(α,ℓ) (1-q)^{α-ℓ} q^ℓ e^{(ℓ-1) ε(ℓ)}.
    out = np.full(ORDERS.shape, np.inf)
    by_order = {int(a): float(v) for a, v in zip(ORDERS[_INTEGER], inner[_INTEGER], strict=True)}
    if q == 1.0:
        return inner.copy()
    lq, l1q = math.log(q), math.log1p(-q)
    for i in np.flatnonzero(_INTEGER):
        a = int(ORDERS[i])
        needed = range(2, a + 1)
        if any(j not in by_order or not math.isfinite(by_order[j]) for j in needed):
            continue
        terms = [(a - 1) * l1q + math.log(a * q - q + 1)]
        terms.append(math.log(a * (a - 1) / 2) + 2 * lq + (a - 2) * l1q + by_order[2])
        for j in range(3, a + 1):
            logb = math.lgamma(a + 1) - math.lgamma(j + 1) - math.lgamma(a - j + 1)
            terms.append(math.log(3) + logb + (a - j) * l1q + j * lq + (j - 1) * by_order[j])
        out[i] = float(special.logsumexp(terms)) / (a - 1)
    return out


def rdp_curve(event: Event) -> Curve:
    """ε_α of ``event`` on :data:`ORDERS` (``inf`` where no RDP bound is known)."""
    if isinstance(event, GaussianEvent):
        return np.asarray(ORDERS * (event.sensitivity / event.sigma) ** 2 / 2, dtype=np.float64)
    if isinstance(event, DiscreteGaussianEvent):
        rho = event.sensitivity**2 / (2 * event.sigma**2)
        return np.asarray(ORDERS * rho, dtype=np.float64)
    if isinstance(event, ZCDPEvent):
        return np.asarray(ORDERS * event.rho, dtype=np.float64)
    if isinstance(event, LaplaceEvent):
        return _laplace_curve(event.sensitivity / event.scale)
    if isinstance(event, DiscreteLaplaceEvent):
        from dpkit.accounting._pld_pairs import discrete_laplace_atoms

        _, p, q = discrete_laplace_atoms(event.scale, event.sensitivity)
        return np.minimum(_atoms_curve(p, q), _binary_rr_curve(event.sensitivity / event.scale))
    if isinstance(event, RandomizedResponseEvent):
        return _atoms_curve(*_rr_atoms(event.epsilon, event.categories))
    if isinstance(event, ExponentialEvent):
        return np.minimum(_binary_rr_curve(event.epsilon), ORDERS * event.epsilon**2 / 8)
    if isinstance(event, ComposedEvent):
        return np.asarray(sum(rdp_curve(e) for e in event.events), dtype=np.float64)
    if isinstance(event, SelfComposedEvent):
        return event.count * rdp_curve(event.event)
    if isinstance(event, PoissonSubsampledEvent):
        rate = event.sampling_rate
        if event.neighbouring is Neighbouring.REPLACE:
            # Joint convexity with a common atom: E[(P/Q)^α] ≤ (1 - q) + q e^{(α-1)ε_α}.
            inner = rdp_curve(event.event)
            with np.errstate(over="ignore"):
                val = np.logaddexp(
                    math.log1p(-rate) if rate < 1 else -np.inf,
                    math.log(rate) + (ORDERS - 1) * inner,
                )
            return np.asarray(val / (ORDERS - 1), dtype=np.float64)
        if isinstance(event.event, GaussianEvent):
            return _subsampled_gaussian_curve(rate, event.event.sensitivity / event.event.sigma)
        return _subsampled_general_curve(rate, rdp_curve(event.event))
    if isinstance(event, ApproxDPEvent) and event.delta > 0:
        return np.full(ORDERS.shape, np.inf)
    e = pure_epsilon(event)
    if e is not None:
        return _binary_rr_curve(e)
    return np.full(ORDERS.shape, np.inf)


def rdp_epsilon(curve: Curve, delta: float) -> float:
    """Smallest ε over the grid from the RDP → (ε, δ) conversion of Balle et al. (2020, Thm 21).

    ε = min_α ε_α + log(1 - 1/α) - (log δ + log α)/(α - 1), floored at 0.
    """
    if delta <= 0:
        return math.inf
    a = ORDERS
    with np.errstate(invalid="ignore"):
        eps = curve + np.log1p(-1 / a) - (math.log(delta) + np.log(a)) / (a - 1)
    eps = eps[np.isfinite(eps)]
    return max(float(np.min(eps)), 0.0) if eps.size else math.inf


def rdp_delta(curve: Curve, epsilon: float) -> float:
    """Smallest δ over the grid with (ε, δ)-DP implied by the curve (same theorem, inverted)."""
    a = ORDERS
    with np.errstate(invalid="ignore", over="ignore"):
        logd = (a - 1) * (curve - epsilon + np.log1p(-1 / a)) - np.log(a)
    logd = logd[~np.isnan(logd)]
    return float(min(1.0, math.exp(min(float(np.min(logd)), 0.0)))) if logd.size else 1.0
