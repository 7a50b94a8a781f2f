"""A small DP-SGD trainer for linear and logistic models, in NumPy.

Abadi et al. (2016), "Deep learning with differential privacy": at each step every record is
kept independently with probability q (Poisson subsampling), each kept record's gradient is
clipped to ℓ2 norm C, the clipped gradients are summed and Gaussian noise N(0, (zC)²I) is added.
Here the noise is dpkit's exact discrete Gaussian on a power-of-two grid
(:func:`dpkit.noise.gaussian`), and the run is accounted as ``steps`` compositions of a
Poisson-subsampled Gaussian with the rounded sum's ℓ2 sensitivity, under add/remove, by dpkit's
DP-SGD accountant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dpkit.accounting import (
    Event,
    GaussianEvent,
    PoissonSubsampledEvent,
    SelfComposedEvent,
    dpsgd_noise_multiplier,
)
from dpkit.ml._base import FloatArray
from dpkit.noise import gaussian, gaussian_grid, rounded_sensitivity

__all__ = ["DPSGDPlan", "dpsgd_plan", "run_dpsgd"]


@dataclass(frozen=True, kw_only=True)
class DPSGDPlan:
    """A calibrated DP-SGD run: what it adds and what it costs (no data)."""

    sigma: float
    """Standard deviation of the noise on each step's gradient sum."""
    grid: int
    """The noisy sums lie on multiples of ``2**grid``."""
    noise_multiplier: float
    """σ / Δ, with Δ the rounded sum's ℓ2 sensitivity (just above the clipping norm)."""
    clip_norm: float
    sample_rate: float
    steps: int
    event: Event
    """The whole run: ``steps`` Poisson-subsampled Gaussians (add/remove)."""


@lru_cache(maxsize=128)
def dpsgd_plan(
    *,
    epsilon: float,
    delta: float,
    clip_norm: float,
    dimension: int,
    sample_rate: float,
    steps: int,
    accounting: str = "rdp",
) -> DPSGDPlan:
    """Noise for a DP-SGD run of ``steps`` steps to be (ε, δ)-DP, from dpkit's DP-SGD accountant.

    The noise multiplier z comes from :func:`dpkit.accounting.dpsgd_noise_multiplier`
    (``accounting="rdp"``: Mironov, Talwar & Zhang 2019, fast; ``"pld"``/``"auto"``: tighter,
    seconds per fit). The sum is rounded to a grid of step ``2**grid`` chosen for σ ≤ 2zC, so its
    ℓ2 sensitivity is at most Δ = C + √d·2**grid; σ = zΔ. The event charged is ``steps``
    compositions of ``PoissonSubsampledEvent(GaussianEvent(sigma=σ, sensitivity=Δ))``: the
    subsampled Gaussian of Abadi et al. (2016), with the grid's discrete Gaussian (σ about 2^24
    grid steps, whose Rényi divergences are at most the continuous Gaussian's, Canonne, Kamath &
    Steinke 2020) standing for the continuous one. Plans are memoised (a pure function of
    hashable arguments).

    Examples
    --------
    >>> p = dpsgd_plan(epsilon=1.0, delta=1e-5, clip_norm=1.0, dimension=3, sample_rate=0.1,
    ...                steps=100)
    >>> round(p.noise_multiplier, 1)
    4.3
    """
    z = dpsgd_noise_multiplier(
        epsilon=epsilon, delta=delta, sample_rate=sample_rate, steps=steps, method=accounting
    )
    grid = gaussian_grid(2 * z * clip_norm)
    sens = rounded_sensitivity(clip_norm, grid, coordinates=dimension, norm=2)
    sigma = math.nextafter(z * sens, math.inf)
    # add/remove one record (declared by the Poisson event): one record moves the sum by ≤ Δ
    step = PoissonSubsampledEvent(
        GaussianEvent(sigma=sigma, sensitivity=sens), sampling_rate=sample_rate
    )
    return DPSGDPlan(
        sigma=sigma,
        grid=grid,
        noise_multiplier=z,
        clip_norm=clip_norm,
        sample_rate=sample_rate,
        steps=steps,
        event=SelfComposedEvent(step, count=steps) if steps > 1 else step,
    )


def _gradients(loss: str, Z: FloatArray, t: FloatArray, w: FloatArray) -> FloatArray:
    margin = Z @ w
    # logistic loss with t in {0, 1}, or the squared loss ½(wᵀz − t)²
    resid = 0.5 * (1.0 + np.tanh(margin / 2)) - t if loss == "logistic" else margin - t
    out: FloatArray = resid[:, None] * Z
    return out


def run_dpsgd(
    Z: FloatArray,
    t: FloatArray,
    *,
    loss: str,
    plan: DPSGDPlan,
    learning_rate: float,
    l2: float,
    n_scale: float,
    gen: np.random.Generator,
) -> FloatArray:
    """Run the planned steps on features ``Z`` (already bounded) and targets ``t``.

    Each step: Poisson sample (rate q), per-record gradients clipped to C, summed, exact
    Gaussian noise of σ added, and ``w ← w − η (noisy sum / (q · n_scale) + l2 · w)``. The
    iterates are post-processing of the noisy sums; only the final weights are returned.
    """
    d = Z.shape[1]
    w = np.zeros(d)
    batch = max(plan.sample_rate * n_scale, 1.0)
    for step in range(plan.steps):
        keep = gen.random(Z.shape[0]) < plan.sample_rate
        g = _gradients(loss, Z[keep], t[keep], w)
        if g.shape[0]:
            norms = np.sqrt(np.einsum("ij,ij->i", g, g))
            g *= (np.minimum(1.0, plan.clip_norm / np.maximum(norms, 1e-300)) * (1 - 1e-12))[
                :, None
            ]
        noisy = np.asarray(gaussian(g.sum(axis=0), plan.sigma, grid=plan.grid, rng=gen))
        rate = learning_rate / math.sqrt(1.0 + step / max(1.0, plan.steps / 10))
        w -= rate * (noisy / batch + l2 * w)
    return w
