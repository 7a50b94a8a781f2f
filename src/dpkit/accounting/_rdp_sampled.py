"""Rényi divergences of the Poisson-subsampled Gaussian mechanism at any order α > 1.

Mironov, Talwar & Zhang (2019), "Rényi Differential Privacy of the Sampled Gaussian Mechanism":
with μ = Δ/σ, μ₀ = N(0, 1/μ²) and μ₁ = N(1, 1/μ²), the mechanism's ε_α is log(A_α)/(α - 1) with
A_α = E_{z~μ₀}[(1 - q + q r(z))^α], r = μ₁/μ₀ (their Theorem 4 shows this direction is the larger).

- Integer α (their §3.3): A_α = Σ_k C(α,k) (1-q)^{α-k} q^k e^{(k²-k)μ²/2}. Since the binomial
  weights sum to 1, A_α - 1 = Σ_{k≥2} C(α,k) (1-q)^{α-k} q^k (e^{(k²-k)μ²/2} - 1), a sum of positive
  terms, so log A_α = log1p(A_α - 1) keeps its relative precision even when A_α is 1 + 1e-12.
- Fractional α (their §3.3): the integral is split at z₀ = log(1/q - 1)/μ² + 1/2, where
  q r(z₀) = 1 - q, and (1 - q + q r)^α is expanded by the binomial series in the smaller of the two
  summands on each side. Term by term, with Φ the normal distribution function,

      A_α = Σ_{i≥0} C(α,i) [(1-q)^{α-i} q^i e^{(i²-i)μ²/2} Φ((z₀ - i)μ)
                            + q^{α-i} (1-q)^i e^{((α-i)²-(α-i))μ²/2} Φ((α - i - z₀)μ)].

  For i > α the coefficients C(α,i) alternate in sign and decrease in size, and the rest of each
  term, ∫ μ₀ (q r/(1-q))^i over z ≤ z₀ (and its mirror over z ≥ z₀), is non-increasing in i. The
  remainder of each series after a term is therefore at most the next term's size, and that bound
  is *added*, so a truncated sum is still an upper bound. Where a Φ is a far tail it is written
  with the scaled complementary error function, which cancels the quadratic exponents exactly:
  the term becomes C(α,i) (1-q)^α e^{-z₀²μ²/2} erfcx(·)/2.

Every value is rounded up: by the series remainder and by a bound on the floating-point error of
the sum (a few units in the last place of each term's logarithm, scaled by its size).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import special

__all__ = ["SERIES_MAX_ORDER", "mixture_bound", "sampled_gaussian_rdp"]

Orders = NDArray[np.float64]

SERIES_MAX_ORDER = 4096.0
"""Above this order the series is not summed; the joint-convexity bound is used instead."""

_FIRST_CHUNK = 24  # terms in the first pass; each further pass doubles it
_MAX_TERMS = 20_000
_ULP = 1e-15  # a generous bound on the relative error of one term's logarithm per unit of size
_SQRT2 = math.sqrt(2.0)


def _lse(
    x: NDArray[np.float64], b: NDArray[np.float64] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log|Σ b e^x| along the last axis and the sum's sign (SciPy's logsumexp, without its
    per-call overhead, which dominates for the small arrays here)."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(x - m)
    total = np.sum(w if b is None else b * w, axis=-1)
    with np.errstate(divide="ignore"):
        return np.log(np.abs(total)) + m[..., 0], np.sign(total)


def _log_expm1(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """log(e^x - 1) for x > 0, without overflow for large x or cancellation for small x."""
    return np.asarray(x + np.log(-np.expm1(-x)), dtype=np.float64)


def _integer_orders(q: float, mu: float, a: Orders) -> Orders:
    # Small orders share one array; each large one has its own (a shared array would be mostly
    # padding).
    small = a <= 128
    out = np.empty(a.shape)
    if small.any():
        out[small] = _integer_block(q, mu, a[small])
    for n in np.flatnonzero(~small):
        out[n] = _integer_block(q, mu, a[n : n + 1])[0]
    return out


def _integer_block(q: float, mu: float, a: Orders) -> Orders:
    m2 = mu * mu / 2
    lq, l1q = math.log(q), math.log1p(-q)
    # All orders at once: row α holds k = 2 … α (terms past α are masked out with -∞).
    alpha = a[:, None]
    k = np.arange(2, int(np.max(a)) + 1, dtype=np.float64)[None, :]
    valid = k <= alpha
    kk = np.where(valid, k, 2.0)
    logc = special.gammaln(alpha + 1) - special.gammaln(kk + 1) - special.gammaln(alpha - kk + 1)
    parts = [logc, (alpha - kk) * l1q, kk * lq, _log_expm1((kk * kk - kk) * m2)]
    terms = np.where(valid, np.sum(parts, axis=0), -np.inf)
    size = np.max(np.where(valid, np.sum(np.abs(parts), axis=0), 0.0), axis=1)
    # log(A - 1), rounded up by the error of each term's logarithm and of the sum.
    log_excess = _lse(terms)[0] + _ULP * (40 + size)
    return np.asarray(np.logaddexp(0.0, log_excess) / (a - 1), dtype=np.float64)


def _tail_log(
    x: NDArray[np.float64], direct: NDArray[np.float64], cancelled: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log of a term without its coefficient, and the size of the pieces it was summed from.

    ``direct`` + log Φ(-x) for x ≤ 0, and the cancelled form ``cancelled`` + log(erfcx(x/√2)/2)
    for x > 0 (Φ(-x) = erfcx(x/√2) e^{-x²/2}/2, whose e^{-x²/2} cancels the quadratic exponents
    of ``direct`` exactly).
    """
    out = np.empty(x.shape)
    size = np.empty(x.shape)
    pos = x > 0
    tail = np.log(special.erfcx(x[pos] / _SQRT2) / 2)
    out[pos] = cancelled[pos] + tail
    size[pos] = np.abs(cancelled[pos]) + np.abs(tail)
    tail = special.log_ndtr(-x[~pos])
    out[~pos] = direct[~pos] + tail
    size[~pos] = np.abs(direct[~pos]) + np.abs(tail)
    return out, size


def _fractional_orders(q: float, mu: float, a: Orders) -> Orders:
    m2 = mu * mu / 2
    lq, l1q = math.log(q), math.log1p(-q)
    z0 = (l1q - lq) / (mu * mu) + 0.5
    n = a.size
    log_sum = np.full(n, -np.inf)  # log of the signed partial sum (it stays positive)
    log_err = np.full(n, -np.inf)  # log of a bound on the floating-point error of the sum
    tail = np.full(n, np.inf)
    active = np.ones(n, dtype=bool)
    log_gamma_a = special.gammaln(a + 1)
    start, width = 0, _FIRST_CHUNK
    while active.any() and start < _MAX_TERMS:
        rows = np.flatnonzero(active)
        alpha = a[rows][:, None]
        i = np.arange(start, start + width + 1, dtype=np.float64)[None, :]
        i, alpha = np.broadcast_arrays(i, alpha)
        j = alpha - i
        logc = log_gamma_a[rows][:, None] - special.gammaln(i + 1) - special.gammaln(j + 1)
        sign = special.gammasgn(j + 1)
        c0 = -z0 * z0 * m2
        direct1 = j * l1q + i * lq + (i * i - i) * m2
        direct2 = j * lq + i * l1q + (j * j - j) * m2
        c_alpha = alpha * l1q + c0
        first, size1 = _tail_log((i - z0) * mu, direct1, c_alpha)
        second, size2 = _tail_log((z0 - j) * mu, direct2, c_alpha)
        first += logc
        second += logc
        size_c = (
            np.abs(log_gamma_a[rows][:, None])
            + np.abs(special.gammaln(i + 1))
            + np.abs(special.gammaln(j + 1))
        )
        body = np.concatenate([first[:, :-1], second[:, :-1]], axis=1)
        signs = np.concatenate([sign[:, :-1], sign[:, :-1]], axis=1)
        # Each term's logarithm is off by at most _ULP per unit of the pieces summed into it
        # (and the sum itself by a few units more): a bound on each term's absolute error.
        size = np.concatenate([(size_c + size1)[:, :-1], (size_c + size2)[:, :-1]], axis=1)
        rel = _ULP * (40 + size)
        chunk, chunk_sign = _lse(body, signs)
        both = np.stack([log_sum[rows], chunk], axis=1)
        both_sign = np.stack([np.ones(rows.size), chunk_sign], axis=1)
        log_sum[rows], total_sign = _lse(both, both_sign)
        log_sum[rows[total_sign <= 0]] = np.nan  # cannot happen (A ≥ 1); answered with ∞ below
        log_err[rows] = np.logaddexp(log_err[rows], _lse(body, rel)[0])
        # The alternating-series bound holds once the next index is past α. Summing stops when the
        # bound (which is added) is below 1e-8 of log A_α: the answer is then within 1e-8 of the
        # exact ε_α, and the slowly decaying terms near α = 1 are not summed to the last digit.
        nxt = start + width
        tail[rows] = np.logaddexp(first[:, -1], second[:, -1])
        ls = log_sum[rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            small = tail[rows] - ls <= math.log(1e-8) + np.log(np.maximum(ls, 1e-300))
        done = (nxt > a[rows]) & (small | np.isnan(ls))
        active[rows[done]] = False
        start, width = nxt, 2 * width
    # Partial sum + remainder bound + floating-point error bound, all added.
    log_a = _lse(np.stack([log_sum, tail, log_err], axis=1))[0]
    return np.where(np.isnan(log_sum), np.inf, log_a / (a - 1))


def mixture_bound(q: float, inner: Orders, a: Orders) -> Orders:
    """Joint convexity of e^{(α-1)D_α} (van Erven & Harremoës 2014): a mixture with weight q on a
    pair within ``inner`` = ε_α of each other and 1 - q on a common part is within
    log(1 - q + q e^{(α-1)ε_α})/(α - 1) of the other mixture, in both directions, at every α.
    It covers Poisson subsampling under add/remove, where one side is M(D) = (1-q)M(D) + qM(D),
    and under replace-one, with the common part (1-q)ω."""
    with np.errstate(over="ignore"):
        first = math.log1p(-q) if q < 1 else -np.inf
        val = np.logaddexp(first, math.log(q) + (a - 1) * inner)
    return np.asarray(val / (a - 1), dtype=np.float64)


def sampled_gaussian_rdp(q: float, mu: float, a: Orders) -> Orders:
    """ε_α of the Poisson-subsampled Gaussian with rate ``q`` and Δ/σ = ``mu`` at the orders ``a``.

    Privacy guarantee: each returned value is an upper bound on the Rényi divergence of order α
    between the outputs on add/remove neighbours, in both directions (Mironov, Talwar & Zhang 2019).

    Examples
    --------
    >>> import numpy as np
    >>> [f"{v:.6g}" for v in sampled_gaussian_rdp(0.01, 1 / 2.5, np.array([1.5, 2.0, 5.0]))]
    ['1.30014e-05', '1.73509e-05', '4.36151e-05']
    """
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(over="ignore"):
        gauss = np.asarray(a * (mu * mu / 2), dtype=np.float64)
    if q == 1.0 or mu == 0.0:
        return gauss
    out = mixture_bound(q, gauss, a)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        series = a <= SERIES_MAX_ORDER
        integer = series & (a == np.round(a))
        fractional = series & ~integer
        if integer.any():
            out[integer] = np.minimum(out[integer], _integer_orders(q, mu, a[integer]))
        if fractional.any():
            out[fractional] = np.minimum(out[fractional], _fractional_orders(q, mu, a[fractional]))
    # Rounded one step up: the conversions below rely on an upper bound.
    return np.asarray(np.nextafter(out, np.inf), dtype=np.float64)
