"""Rényi differential privacy (RDP) curves of events and their conversion to (ε, δ).

A mechanism is (α, ε_α)-RDP when D_α(M(D) ‖ M(D')) ≤ ε_α (Mironov 2017). RDP curves add under
composition, including adaptive composition; the curve is kept on a fixed grid of orders α, and
every producer below also evaluates at any other order α > 1, which the conversion to (ε, δ) uses
to search between grid points.
"""

from __future__ import annotations

import math
from collections.abc import Callable

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
from dpkit.accounting._rdp_sampled import mixture_bound, sampled_gaussian_rdp

__all__ = ["ORDERS", "rdp_curve", "rdp_delta", "rdp_epsilon"]

Curve = NDArray[np.float64]
Orders = NDArray[np.float64]

ORDERS: Orders = np.unique(
    np.concatenate(
        [
            1.0 + np.arange(1, 10) / 100.0,  # 1.01 … 1.09
            1.0 + np.arange(2, 100) / 20.0,  # 1.1 … 5.95 (every 0.05)
            6.0 + np.arange(0, 50) / 10.0,  # 6.0 … 10.9
            np.arange(11.0, 65.0),
            np.array([72.0, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512, 768, 1024]),
            np.array([1536.0, 2048, 4096, 16384, 1e5, 1e6, 1e8, 1e10]),
        ]
    )
)
"""The Rényi orders every curve is evaluated on, so that curves of different events add.

A superset of the default orders of Google's dp_accounting, TensorFlow Privacy and Opacus; the
conversion to (ε, δ) then searches between these orders too (see :func:`rdp_epsilon`)."""

_ZHU_WANG_MAX = 1024
"""The largest integer order at which the general subsampling bound is summed (O(α) terms)."""


def _binary_rr_curve(epsilon: float, a: Orders) -> Curve:
    # RDP of binary randomized response, the worst case for every ε-DP mechanism (Mironov 2017,
    # Proposition 5): D_α = log(p^α q^{1-α} + q^α p^{1-α})/(α - 1), p = e^ε/(1 + e^ε). With
    # d = (α - 1)ε and B = ε/2 the sum is cosh(B + d)/cosh(B) = cosh d + tanh(B) sinh d, written
    # without cancellation (a sum of positive terms near α = 1, factored by e^d for large d).
    d = (a - 1) * epsilon
    t = math.tanh(epsilon / 2)
    num = np.empty(a.shape)
    small = d <= 1
    ds, db = d[small], d[~small]
    num[small] = np.log1p(2 * np.sinh(ds / 2) ** 2 + t * np.sinh(ds))
    num[~small] = db + np.log(((1 + t) + (1 - t) * np.exp(-2 * db)) / 2)
    return np.asarray(num / (a - 1) * (1 + 1e-14))  # rounded up


def _laplace_curve(t: float, a: Orders) -> Curve:
    # Mironov (2017), Table II, Laplace with λ = 1/t, as
    # t + log1p((α - 1)(e^{(1-2α)t} - 1)/(2α - 1))/(α - 1): no cancellation near α = 1.
    corr = np.log1p((a - 1) * np.expm1((1 - 2 * a) * t) / (2 * a - 1)) / (a - 1)
    val = t + corr + 4e-16 * (t + np.abs(corr))  # rounded up
    return np.asarray(np.minimum(val, t))


def _bounded_range_curve(epsilon: float, a: Orders) -> Curve:
    # An ε-bounded-range mechanism's privacy loss lies in an interval of length ε, so by Hoeffding's
    # lemma (α - 1)D_α ≤ (α - 1)KL + (α - 1)²ε²/8, with KL ≤ x - 1 - log x, x = ε/(e^ε - 1)
    # (Cesar & Rogers 2021, Section 3); at α → 1 this is the KL bound, and it is never above
    # the ε²/8-zCDP line αε²/8.
    if epsilon < 1:  # x near 1: x - 1 - log x = u - log1p(u), u = x - 1
        u = epsilon / math.expm1(epsilon) - 1 if epsilon > 0 else 0.0
        kl = u - math.log1p(u)
        kl += 4e-16 * (abs(u) + abs(math.log1p(u)) + 1e-300)  # rounded up
    else:  # log x without e^ε (which overflows past ε ≈ 709)
        log_x = math.log(epsilon) - epsilon - math.log(-math.expm1(-epsilon))
        kl = math.exp(log_x) - 1 - log_x
        kl += 4e-16 * (2 + abs(log_x) + epsilon)
    return np.asarray(np.minimum(kl + (a - 1) * epsilon**2 / 8, a * epsilon**2 / 8))


def _atoms_curve(p: NDArray[np.float64], q: NDArray[np.float64], a: Orders) -> Curve:
    # D_α(P‖Q) for discrete P, Q (both orders of the pair).
    mask = (p > 0) & (q > 0)
    lp, lq = np.log(p[mask]), np.log(q[mask])
    col = a[:, None]
    x_fwd = col * lp + (1 - col) * lq
    x_bwd = col * lq + (1 - col) * lp
    fwd = special.logsumexp(x_fwd, axis=1)
    bwd = special.logsumexp(x_bwd, axis=1)
    # Near α = 1 the sum is close to 1: round up by the error of its terms' exponents.
    size = np.maximum(np.max(np.abs(x_fwd), axis=1), np.max(np.abs(x_bwd), axis=1))
    err = 4e-16 * (size + math.log(lp.size + 1) + 1)
    return np.asarray((np.maximum(fwd, bwd) + err) / (a - 1), dtype=np.float64)


def _rr_atoms(epsilon: float, k: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    z = math.exp(epsilon) + k - 1
    p = np.array([math.exp(epsilon) / z, 1 / z] + ([(k - 2) / z] if k > 2 else []))
    q = np.array([1 / z, math.exp(epsilon) / z] + ([(k - 2) / z] if k > 2 else []))
    return p, q


def _zhu_wang(q: float, by_order: NDArray[np.float64], a: int) -> float:
    # Zhu & Wang (2019), Theorem 6 (general Poisson-subsampled RDP bound, integer α ≥ 2):
    # (1-q)^{α-1}(αq - q + 1) + C(α,2) q² (1-q)^{α-2} e^{ε(2)}
    #   + 3 Σ_{ℓ=3}^α C(α,ℓ) (1-q)^{α-ℓ} q^ℓ e^{(ℓ-1) ε(ℓ)};  by_order[j] = ε(j).
    lq, l1q = math.log(q), math.log1p(-q)
    if not np.isfinite(by_order[2 : a + 1]).all():
        return math.inf
    j = np.arange(3, a + 1, dtype=np.float64)
    logb = special.gammaln(a + 1) - special.gammaln(j + 1) - special.gammaln(a - j + 1)
    rest = math.log(3) + logb + (a - j) * l1q + j * lq + (j - 1) * by_order[3 : a + 1]
    head = [(a - 1) * l1q + math.log(a * q - q + 1)]
    head.append(math.log(a * (a - 1) / 2) + 2 * lq + (a - 2) * l1q + float(by_order[2]))
    return float(special.logsumexp(np.concatenate([head, rest]))) / (a - 1)


def _subsampled_general_curve(q: float, inner_at: Callable[[Orders], Curve], a: Orders) -> Curve:
    """Poisson subsampling of any event: the smaller of the mixture bound (every α) and Zhu &
    Wang's bound (integer α ≤ 1024, and between them by the convexity of (α - 1)ε_α in α,
    van Erven & Harremoës 2014, applied to the bounds at the two neighbouring integers)."""
    out = mixture_bound(q, inner_at(a), a)
    if q == 1.0:
        return out
    small = a <= _ZHU_WANG_MAX
    if not small.any():
        return out
    top = math.ceil(float(np.max(a[small])))
    by_order = np.full(top + 1, np.inf)
    by_order[2:] = inner_at(np.arange(2.0, top + 1))
    ints = sorted({math.floor(x) for x in a[small]} | {math.ceil(x) for x in a[small]})
    zw = {n: (_zhu_wang(q, by_order, n) if n >= 2 else 0.0) for n in ints}
    for idx in np.flatnonzero(small):
        x = float(a[idx])
        lo, hi = math.floor(x), math.ceil(x)
        if lo == hi:
            val = zw[lo]
        else:  # (x-1)ε(x) ≤ the chord of (n-1)ε(n) between lo and hi (ε at order 1 is 0)
            t = x - lo
            val = ((1 - t) * (lo - 1) * zw[lo] + t * (hi - 1) * zw[hi]) / (x - 1)
        out[idx] = min(float(out[idx]), val)
    return out


def rdp_curve(event: Event, orders: Orders | None = None) -> Curve:
    """ε_α of ``event`` at ``orders`` (default :data:`ORDERS`); ``inf`` where no bound is known.

    Privacy guarantee: each value is an upper bound on the Rényi divergence of that order between
    the event's outputs on neighbouring inputs, in both directions, so curves of a sequence of
    events (even adaptively chosen) add (Mironov 2017, Proposition 1).

    Examples
    --------
    >>> import numpy as np
    >>> rdp_curve(GaussianEvent(sigma=2.0), np.array([2.0, 10.0]))
    array([0.25, 1.25])
    """
    a = ORDERS if orders is None else np.asarray(orders, dtype=np.float64)
    with np.errstate(over="ignore"):  # an overflow to +∞ is a valid (vacuous) upper bound
        return np.asarray(_curve(event, a), dtype=np.float64)


def _curve(event: Event, a: Orders) -> Curve:
    if isinstance(event, GaussianEvent):
        return np.asarray(a * (event.sensitivity / event.sigma) ** 2 / 2, dtype=np.float64)
    if isinstance(event, DiscreteGaussianEvent):
        rho = event.sensitivity**2 / (2 * event.sigma**2)
        return np.asarray(a * rho, dtype=np.float64)
    if isinstance(event, ZCDPEvent):
        return np.asarray(a * event.rho, dtype=np.float64)
    if isinstance(event, LaplaceEvent):
        return _laplace_curve(event.sensitivity / event.scale, a)
    if isinstance(event, DiscreteLaplaceEvent):
        from dpkit.accounting._pld_pairs import MAX_BINS, discrete_laplace_atoms

        pure = _binary_rr_curve(event.sensitivity / event.scale, a)
        if event.sensitivity > MAX_BINS:  # too many atoms to list: the ε-DP curve alone
            return pure
        _, p, q = discrete_laplace_atoms(event.scale, event.sensitivity)
        return np.minimum(_atoms_curve(p, q, a), pure)
    if isinstance(event, RandomizedResponseEvent):
        return _atoms_curve(*_rr_atoms(event.epsilon, event.categories), a)
    if isinstance(event, ExponentialEvent):
        em = event.epsilon
        return np.minimum(_binary_rr_curve(em, a), _bounded_range_curve(em, a))
    if isinstance(event, ComposedEvent):
        return np.asarray(sum(_curve(e, a) for e in event.events), dtype=np.float64)
    if isinstance(event, SelfComposedEvent):
        return event.count * _curve(event.event, a)
    if isinstance(event, PoissonSubsampledEvent):
        rate = event.sampling_rate
        if event.neighbouring is Neighbouring.REPLACE:
            return mixture_bound(rate, _curve(event.event, a), a)
        if isinstance(event.event, GaussianEvent):
            return sampled_gaussian_rdp(rate, event.event.sensitivity / event.event.sigma, a)
        inner = event.event
        return _subsampled_general_curve(rate, lambda b: _curve(inner, b), a)
    if isinstance(event, ApproxDPEvent) and event.delta > 0:
        return np.full(a.shape, np.inf)
    e = pure_epsilon(event)
    if e is not None:
        return _binary_rr_curve(e, a)
    return np.full(a.shape, np.inf)


# Conversion to (ε, δ). Every order α > 1 gives a valid (ε, δ) from the curve's value there, so
# the search may look anywhere: the grid first, then finer orders around the grid's best (when the
# events are at hand to evaluate there). Each candidate is rounded up by a bound on the float error
# of its few operations, and the smallest candidate is returned.

_ROUNDS = 3
_POINTS = 16


def _eps_at(curve: Curve, a: Orders, log_delta: float) -> NDArray[np.float64]:
    # Balle et al. (2020, Theorem 21) / Canonne, Kamath & Steinke (2020, Proposition 12):
    # (α, ε_α)-RDP ⇒ (ε, δ)-DP with ε = ε_α + log(1 - 1/α) - (log δ + log α)/(α - 1).
    with np.errstate(invalid="ignore", over="ignore"):
        shift = np.log1p(-1 / a)
        tail = (log_delta + np.log(a)) / (a - 1)
        eps = curve + shift - tail
        eps = eps + 4e-16 * (np.abs(curve) + np.abs(shift) + np.abs(tail) + np.abs(eps))
    return np.where(np.isnan(eps), np.inf, eps)


def _log_delta_at(curve: Curve, a: Orders, epsilon: float) -> NDArray[np.float64]:
    # The same theorem solved for δ: log δ = (α - 1)(ε_α - ε + log(1 - 1/α)) - log α.
    with np.errstate(invalid="ignore", over="ignore"):
        inner = curve - epsilon + np.log1p(-1 / a)
        logd = (a - 1) * inner - np.log(a)
        size = (a - 1) * (np.abs(curve) + epsilon + np.abs(np.log1p(-1 / a))) + np.log(a)
        logd = logd + 4e-16 * (size + np.abs(logd))
    return np.where(np.isnan(logd), np.inf, logd)


def _search(
    values: NDArray[np.float64],
    objective: Callable[[Orders], NDArray[np.float64]] | None,
    orders: Orders,
) -> float:
    """The smallest objective over the grid, refined between the best point's neighbours."""
    if not np.isfinite(values).any():
        return math.inf
    best_i = int(np.argmin(values))
    best = float(values[best_i])
    if objective is None or orders.size < 2:
        return best
    lo = float(orders[max(best_i - 1, 0)])
    hi = float(orders[min(best_i + 1, orders.size - 1)])
    mid = float(orders[best_i])
    for _ in range(_ROUNDS):
        # Spaced evenly in log(α - 1): the grid is roughly geometric in α - 1.
        t = np.linspace(math.log(lo - 1), math.log(hi - 1), _POINTS + 1)[1:-1]
        inner = np.union1d(1 + np.exp(t), [mid])
        inner = inner[(inner > lo) & (inner < hi) & (inner > 1)]
        vals = objective(inner)
        k = int(np.argmin(vals))
        if vals[k] < best:
            best = float(vals[k])
        pts = np.concatenate([[lo], inner, [hi]])
        mid = float(pts[k + 1])
        lo, hi = float(pts[k]), float(pts[k + 2])
    return best


def _tv_bound(curve: Curve) -> float:
    # δ(0) = TV(P, Q) ≤ sqrt(1 - e^{-KL}) (Bretagnolle & Huber 1979) and KL ≤ D_α for α ≥ 1, so
    # δ(ε) ≤ sqrt(1 - e^{-ε_α}) at every ε ≥ 0 and every order; rounded up.
    finite = curve[np.isfinite(curve)]
    if not finite.size:
        return 1.0
    r = max(float(np.min(finite)), 0.0)
    return min(1.0, math.sqrt(-math.expm1(-r)) * (1 + 1e-12) + 1e-300)


def rdp_epsilon(
    curve: Curve,
    delta: float,
    *,
    orders: Orders | None = None,
    evaluate: Callable[[Orders], Curve] | None = None,
) -> float:
    """Smallest ε found for the RDP → (ε, δ) conversion of Balle et al. (2020, Theorem 21).

    ε = min_α ε_α + log(1 - 1/α) - (log δ + log α)/(α - 1), floored at 0; ``curve`` holds ε_α at
    ``orders`` (default :data:`ORDERS`). With ``evaluate`` (ε_α at any orders), the search goes
    on between the grid's best order and its neighbours. ε = 0 when δ ≥ sqrt(1 - e^{-ε_α}) for
    some α (Bretagnolle & Huber 1979), which bounds δ at ε = 0.

    Examples
    --------
    >>> import numpy as np
    >>> round(rdp_epsilon(ORDERS / (2 * 4.530877117**2), 1e-6), 6)   # σ = 4.53: ε = 1
    1.0
    """
    if delta <= 0:
        return math.inf
    a = ORDERS if orders is None else orders
    if delta >= _tv_bound(curve):
        return 0.0
    log_delta = math.log(delta)
    objective = None
    if evaluate is not None:
        fn = evaluate

        def objective(b: Orders) -> NDArray[np.float64]:
            return _eps_at(fn(b), b, log_delta)

    return max(_search(_eps_at(curve, a, log_delta), objective, a), 0.0)


def rdp_delta(
    curve: Curve,
    epsilon: float,
    *,
    orders: Orders | None = None,
    evaluate: Callable[[Orders], Curve] | None = None,
) -> float:
    """Smallest δ found with (``epsilon``, δ)-DP implied by the curve (same theorem, inverted,
    and the bound of Bretagnolle & Huber; see :func:`rdp_epsilon`)."""
    a = ORDERS if orders is None else orders
    objective = None
    if evaluate is not None:
        fn = evaluate

        def objective(b: Orders) -> NDArray[np.float64]:
            return _log_delta_at(fn(b), b, epsilon)

    logd = _search(_log_delta_at(curve, a, epsilon), objective, a)
    # Rounded up, and never to 0: exp underflows below 1e-323 though the bound is not 0.
    found = math.nextafter(math.exp(min(logd, 0.0)) * (1 + 1e-12), 1.0) if logd < math.inf else 1.0
    return float(min(1.0, found, _tv_bound(curve)))
