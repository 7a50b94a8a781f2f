"""How far an orthogonal-series density's noise moves it, before anything is spent.

The released function (before its projection onto densities) is ``1 + Σ_J β̃_J ψ_J`` with
``β̃_J = β̂_J + Z_J / (n·2^P)``: ``Z_J`` the exact integer noise (discrete Laplace of scale b, or
discrete Gaussian of parameter σ), ``P`` the fixed-point bits. The cosine basis is orthonormal on
``[0, 1]^d``, so the noise function's **L2 norm** is exactly ``‖Z‖₂ / (n·2^P)`` — no union bound
and no slack from the basis: its ``1 − alpha`` quantile is that of ``‖Z‖₂``, computed here.

``‖Z‖₂`` is bounded in distribution by ``s·‖X‖₂ + √M`` with ``X`` M independent continuous
Laplace(1) or N(0, 1) variables and ``s`` the noise scale: each ``|Z_J|`` is stochastically at
most ``s|X_J| + 1`` (discrete Laplace: ``P(|Z| ≥ k) = 2q^k/(1+q) ≤ q^(k−1)``, ``q = e^(−1/b)``;
discrete Gaussian: ``Σ_{j≥k} e^(−j²/2σ²) ≤ ∫_{k−1}^∞ e^(−x²/2σ²)dx`` and the normaliser is at
least ``√(2π)σ`` by Poisson summation). The distribution of ``Σ X_J²`` is computed by convolving
the law of ``X²`` rounded *up* to a grid (so the quantile found is never below the true one; the
grid's step adds at most a relative ``M/K`` ≈ 1/64 to ``Σ X²``), mass beyond the grid counted
as infinite. ``s`` is about 2^20 integer units, so the ``√M`` is a relative 10⁻⁵.

In density units on the box ``B`` (volume ``V``), the L2 norm over ``B`` of the noise of
``p(x) = f(u(x))/V`` is the unit-cube norm divided by ``√V``.

**Private n.** The release then divides by a noisy count ``n̂ = max(n + W, 1)`` (W discrete
Laplace of scale ``1/ε_count``, ``ε_count = count_fraction·ε``), so
``β̃ − β̂ = Z/(n̂·2^P) + β̂·(n − n̂)/n̂``. ``alpha`` is split in two halves: ``‖Z‖₂ ≤ z`` (the
quantile above at ``alpha/2``) and ``|W| ≤ t`` (the exact two-sided quantile at ``alpha/2``),
so both hold together with probability at least ``1 − alpha`` (union bound). On that event
``|n − n̂| ≤ t`` (the clamp at 1 only moves n̂ towards n ≥ 1) and ``n̂ ≥ max(n − t, 1)``, and the
fixed-point sums are clipped to ``|S_J| ≤ n·cap_J``, so ``‖β̂‖₂ ≤ ‖cap‖₂/2^P`` (the basis'
sup-norms, ``√(Σ_J sup|ψ_J|²)``, up to the fixed-point rounding) whatever the data. Hence
``‖β̃ − β̂‖₂ ≤ (z + ‖cap‖₂·t) / (2^P·max(n − t, 1))``. The bound on ``‖β̂‖₂`` is a worst case over
data sets (smooth densities have a far smaller one), so this half-width is conservative.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting import Neighbouring
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._tails import check_alpha, discrete_laplace_quantile
from dpkit.release._density_data import FloatArray, check_box
from dpkit.release._density_noise import split_count
from dpkit.release._series import chosen_degree, plan_noise
from dpkit.stats._common import check_privacy
from dpkit.stats._data import check_n
from dpkit.stats._events import is_replace

__all__ = ["l2_noise_quantile", "series_density_accuracy"]

# mean and variance of X² for X ~ Laplace(1) (E X⁴ = 24) and N(0, 1) (E X⁴ = 3)
_MOMENTS = {"laplace": (2.0, 20.0), "gaussian": (1.0, 2.0)}


def _cdf_square(kind: str, t: FloatArray) -> FloatArray:
    """P(X² ≤ t) for the standard Laplace or normal X."""
    r = np.sqrt(np.maximum(t, 0.0))
    if kind == "laplace":
        return -np.expm1(-r)
    from scipy.special import erf

    return erf(r / math.sqrt(2.0))  # type: ignore[no-any-return]


def _convolve(a: FloatArray, b: FloatArray) -> FloatArray:
    """The law of the sum on the same grid, truncated to it (mass beyond is dropped: +∞)."""
    size = 1 << (2 * a.size - 1).bit_length()
    out = np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[: a.size]
    return np.maximum(out, 0.0)


def l2_noise_quantile(kind: str, dimension: int, alpha: float) -> float:
    """An upper bound on the ``1 − alpha`` quantile of ``‖X‖₂``, X ``dimension`` iid standard
    Laplace (``"laplace"``) or normal (``"gaussian"``) variables (module notes).

    >>> round(l2_noise_quantile("gaussian", 1, 0.05), 2)  # 1.96, the normal quantile
    1.96
    """
    if kind not in _MOMENTS:
        raise DataError(f"unknown noise kind {kind!r}.")
    mean, var = _MOMENTS[kind]
    m = int(dimension)
    grid = 1 << max(14, (64 * m - 1).bit_length())  # K cells: step error ≤ M/K of Σ X²
    top = m * mean + 8.0 * math.sqrt(m * var) + math.log(2.0 * m / alpha) ** 2
    while True:
        step = top / grid
        edges = np.arange(grid + 1, dtype=np.float64) * step
        cdf = _cdf_square(kind, edges)
        one = np.concatenate([[0.0], np.diff(cdf)])  # mass of (k−1, k]·step, put at k·step
        law, power, left = None, one, m
        while left:  # the law of the sum of m copies, by squaring
            if left & 1:
                law = power if law is None else _convolve(law, power)
            left >>= 1
            if left:
                power = _convolve(power, power)
        assert law is not None
        # FFT rounding (~1e-16 per cell) is far below the binomial resolution of any test
        k = int(np.searchsorted(np.cumsum(law), 1.0 - alpha))
        if k <= grid:
            return math.sqrt(k * step)
        top *= 2.0  # the quantile lies beyond the grid: widen it


def series_density_accuracy(
    *,
    bounds: object,
    epsilon: float,
    delta: float = 0.0,
    degree: object = None,
    smoothness: float = 1.0,
    n: int | None = None,
    expected_n: int | None = None,
    count_fraction: float = 0.1,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    alpha: float = 0.05,
) -> float:
    """L2 half-width of the noise of a :func:`~dpkit.release.series_density` release.

    With probability at least ``1 − alpha`` the released cosine expansion (before its
    projection onto densities) is within this of the exact one in L2 norm over the box, in
    density units: ``(∫_B (p̃ − p̂)²)^{1/2}``; on the unit cube (``raw``, the coefficients ``β̃``)
    that is ``‖β̃ − β̂‖₂ ≤ half-width·√V``. The same degree (chosen from public inputs only, as
    the release chooses it), budget split and exact noise as the release. Charges nothing.

    With a public ``n`` (or under replace-one, where n is public): the exact quantile of the
    coefficient noise's L2 norm, up to a relative ~1% on the safe side (module notes).

    With a private n (``expected_n=`` given): the bound holds with probability at least
    ``1 − alpha`` when the data set has exactly ``expected_n`` records. It accounts for the
    division by the noisy count as well as the coefficient noise (``alpha`` split in halves
    between them, module notes), with the worst-case ``‖β̂‖₂`` the basis allows, so it is
    conservative; at another true n it is not a guarantee.

    Examples
    --------
    >>> from dpkit.release import series_density_accuracy
    >>> round(series_density_accuracy(bounds=(0, 1), epsilon=1.0, n=5000), 3)
    0.04
    """
    a = check_alpha(alpha)
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    box = check_box(bounds)
    d = len(box)
    if d > 3:
        raise DataError(f"series_density supports d ≤ 3 (tensor cosine basis), got d = {d}.")
    if isinstance(smoothness, bool) or not isinstance(smoothness, int | float) or smoothness <= 0:
        raise DataError(f"smoothness must be a positive number, got {smoothness!r}.")
    public = check_n(n)
    size = public if public is not None else check_n(expected_n)
    if size is None:
        raise PrivacyParameterError(
            "a density's noise is divided by the number of records: pass n= (public) or "
            "expected_n= (a public guess)."
        )
    if replace and public is None:  # under replace-one the size is public (as in the release)
        public = size
    count, eps_s = split_count(epsilon=eps, public_n=public, replace=replace, needs_n=True,
                           fraction=count_fraction)  # fmt: skip
    m = chosen_degree(degree, d, public, size, eps_s, smoothness)
    bits, caps, noise = plan_noise(m, 2 if replace else 1, eps_s, dlt)
    dim = int(caps.size)
    volume = math.prod(hi - lo for lo, hi in box)
    if count.noise is None:  # n public: β̃ − β̂ = Z/(n·2^P) exactly
        z = float(noise.scale) * l2_noise_quantile(noise.kind, dim, a) + math.sqrt(dim)
        return z / math.ldexp(float(size), bits) / math.sqrt(volume)
    # n private: half of alpha for the coefficient noise, half for the count's (module notes)
    z = float(noise.scale) * l2_noise_quantile(noise.kind, dim, a / 2) + math.sqrt(dim)
    t = discrete_laplace_quantile(float(count.noise.scale), a / 2)
    top = math.sqrt(float(np.sum(caps.astype(np.float64) ** 2)))  # ‖β̂‖₂·2^P at most
    low = max(size - t, 1)  # n̂ at least this on the event
    return (z + top * t) / math.ldexp(float(low), bits) / math.sqrt(volume)
