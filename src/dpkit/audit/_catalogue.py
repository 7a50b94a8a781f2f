"""Audit cases for every mechanism dpkit offers, each on a hard pair of neighbours.

The claimed ε of each case is read from the mechanism's accounting event
(:func:`dpkit.accounting.epsilon_of`), never restated here, so an error in a mechanism's
calibration *or* in its privacy map is what the audit would catch.

The Laplace and geometric mechanisms are run in batch by releasing a vector of ``n`` copies of
the query answer through the same class built with ``shape=(n,)``: their noise on each coordinate
has the distribution of the scalar release (the rounding allowance grows by ``n · 2^grid``, a
relative ``n · 2^-40`` of the scale, far below what an audit can see). The Gaussian mechanisms
calibrate differently by shape (a scalar by its exact privacy curve, a vector by zCDP, with
larger σ), so each path is audited on its own with its own claim: the scalar mechanism's σ and
grid drive the noise function its ``release`` calls (:func:`dpkit.noise.gaussian`,
:func:`dpkit.noise.discrete_gaussian`), applied to ``n`` independent copies at once, and a
two-coordinate mechanism is audited on vectors differing by one unit of ℓ2 sensitivity. Selection
mechanisms and the sparse vector are run one call at a time, through their public methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta, check_epsilon
from dpkit.accounting import epsilon_of
from dpkit.audit._cases import AuditCase
from dpkit.audit._pairs import noisy_max_pair
from dpkit.mechanisms import (
    DiscreteGaussian,
    Exponential,
    Gaussian,
    Geometric,
    Laplace,
    PermuteAndFlip,
    RandomizedResponse,
    ReportNoisyMax,
    SparseVector,
)
from dpkit.noise import discrete_gaussian, gaussian

__all__ = ["builtin_cases", "mechanism_cases"]

Array = npt.NDArray[Any]
Factory = Callable[[float, float], AuditCase]


def _laplace(eps: float, delta: float) -> AuditCase:
    claim = epsilon_of(Laplace(epsilon=eps, sensitivity=1.0).event)

    def mech(d: float, n: int, rng: np.random.Generator) -> Array:
        m = Laplace(epsilon=eps, sensitivity=1.0, shape=(n,))
        return np.asarray(m.release(np.full(n, d), rng=rng))

    return AuditCase("Laplace", mech, 0.0, 1.0, claimed_epsilon=claim,
                     description="value 0 vs 1, sensitivity 1")  # fmt: skip


def _gaussian(eps: float, delta: float) -> AuditCase:
    m0 = Gaussian(epsilon=eps, delta=delta, sensitivity=1.0)  # scalar: exact-curve calibration
    claim = epsilon_of(m0.event, delta=delta)

    def mech(d: float, n: int, rng: np.random.Generator) -> Array:
        # what m0.release(d) computes, for n independent releases in one call
        return np.asarray(gaussian(np.full(n, d), m0.sigma, grid=m0.grid, rng=rng))

    return AuditCase("Gaussian", mech, 0.0, 1.0, claimed_epsilon=claim, delta=delta,
                     description="scalar, value 0 vs 1, ℓ2 sensitivity 1")  # fmt: skip


def _gaussian_vector(eps: float, delta: float) -> AuditCase:
    m0 = Gaussian(epsilon=eps, delta=delta, sensitivity=1.0, shape=(2,))  # zCDP calibration
    claim = epsilon_of(m0.event, delta=delta)

    def mech(d: Array, n: int, rng: np.random.Generator) -> Array:
        return np.asarray(gaussian(np.tile(d, (n, 1)), m0.sigma, grid=m0.grid, rng=rng))

    return AuditCase("Gaussian (vector)", mech, np.zeros(2), np.array([1.0, 0.0]),
                     claimed_epsilon=claim, delta=delta,
                     description="shape (2,), (0, 0) vs (1, 0), ℓ2 sensitivity 1")  # fmt: skip


def _geometric(eps: float, delta: float) -> AuditCase:
    claim = epsilon_of(Geometric(epsilon=eps, sensitivity=1).event)

    def mech(d: int, n: int, rng: np.random.Generator) -> Array:
        m = Geometric(epsilon=eps, sensitivity=1, shape=(n,))
        return np.asarray(m.release(np.full(n, d, dtype=np.int64), rng=rng))

    return AuditCase("Geometric (discrete Laplace)", mech, 0, 1, claimed_epsilon=claim,
                     description="count 0 vs 1")  # fmt: skip


def _discrete_gaussian(eps: float, delta: float) -> AuditCase:
    m0 = DiscreteGaussian(epsilon=eps, delta=delta, sensitivity=1.0)  # scalar: exact curve
    claim = epsilon_of(m0.event, delta=delta)

    def mech(d: int, n: int, rng: np.random.Generator) -> Array:
        # what m0.release(d) computes, for n independent releases in one call
        return d + np.asarray(discrete_gaussian(m0.sigma, n, rng=rng), dtype=np.int64)

    return AuditCase("DiscreteGaussian", mech, 0, 1, claimed_epsilon=claim, delta=delta,
                     description="scalar, count 0 vs 1")  # fmt: skip


def _discrete_gaussian_vector(eps: float, delta: float) -> AuditCase:
    m0 = DiscreteGaussian(epsilon=eps, delta=delta, sensitivity=1.0, shape=(2,))
    claim = epsilon_of(m0.event, delta=delta)

    def mech(d: Array, n: int, rng: np.random.Generator) -> Array:
        noise = np.asarray(discrete_gaussian(m0.sigma, (n, 2), rng=rng), dtype=np.int64)
        return np.asarray(d, dtype=np.int64) + noise

    return AuditCase("DiscreteGaussian (vector)", mech, np.zeros(2, dtype=np.int64),
                     np.array([1, 0], dtype=np.int64), claimed_epsilon=claim, delta=delta,
                     description="shape (2,), counts (0, 0) vs (1, 0)")  # fmt: skip


def _randomized_response(categories: int) -> Factory:
    def factory(eps: float, delta: float) -> AuditCase:
        rr = RandomizedResponse(epsilon=eps, categories=categories)
        claim = epsilon_of(rr.event)

        def mech(d: int, n: int, rng: np.random.Generator) -> Array:
            return np.asarray(rr.randomize(np.full(n, d, dtype=np.int64), rng=rng))

        name = "RandomizedResponse" + ("" if categories == 2 else f" (k={categories})")
        return AuditCase(name, mech, 0, 1, claimed_epsilon=claim,
                         description="answer 0 vs 1")  # fmt: skip

    return factory


def _selection(cls: Any, name: str, factor: float) -> Factory:
    def factory(eps: float, delta: float) -> AuditCase:
        sel = cls(epsilon=eps, sensitivity=1.0)
        claim = epsilon_of(sel.event)
        d0, d1 = noisy_max_pair(4, monotone=False)

        def mech(d: Array, rng: np.random.Generator) -> int:
            return int(sel.select_index(d, rng=rng))

        return AuditCase(name, mech, d0, d1, claimed_epsilon=claim, trials_factor=factor,
                         description="scores [0,1,1,1] vs [1,0,0,0]")  # fmt: skip

    return factory


def _sparse_vector(eps: float, delta: float) -> AuditCase:
    threshold = 0.0
    claim = epsilon_of(SparseVector(epsilon=eps, threshold=threshold).event)
    # Every query at T, against three queries at T - 1 then one at T + 1: the answers "below,
    # below, below, above" grow likelier on d1 through the threshold noise (the first three)
    # and the query noise (the last) at once, the loss the ε₁ + ε₂ proof pays for. Shifting
    # all four up instead gives ε_LB 0.33 at ε = 2 from 3000 runs; this pair 0.79.
    d0 = np.full(4, threshold)
    d1 = np.array([threshold - 1.0] * 3 + [threshold + 1.0])

    def mech(d: Array, rng: np.random.Generator) -> Array:
        bits = SparseVector(epsilon=eps, threshold=threshold).run(d, rng=rng)
        out = np.full(d.size, -1, dtype=np.int8)
        out[: len(bits)] = bits
        return out

    return AuditCase("SparseVector", mech, d0, d1, claimed_epsilon=claim, trials_factor=0.06,
                     description="4 queries at T vs 3 at T-1 and one at T+1, answers padded "
                     "with -1")  # fmt: skip


_MECHANISMS: list[Factory] = [
    _laplace,
    _gaussian,
    _geometric,
    _discrete_gaussian,
    _gaussian_vector,
    _discrete_gaussian_vector,
    _randomized_response(2),
    _randomized_response(4),
    _selection(Exponential, "Exponential", 0.4),
    _selection(ReportNoisyMax, "ReportNoisyMax", 0.4),
    _selection(PermuteAndFlip, "PermuteAndFlip", 0.4),
    _sparse_vector,
]


def mechanism_cases(epsilon: float = 1.0, *, delta: float = 1e-5) -> list[AuditCase]:
    """Audit cases for the mechanisms of :mod:`dpkit.mechanisms` at ``epsilon`` (and ``delta``
    for the Gaussian ones).

    >>> [c.name for c in mechanism_cases(1.0)][:3]
    ['Laplace', 'Gaussian', 'Geometric (discrete Laplace)']
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=False)
    return [f(eps, d) for f in _MECHANISMS]


def builtin_cases(epsilon: float = 1.0, *, delta: float = 1e-5) -> list[AuditCase]:
    """Every built-in audit case (mechanisms, then statistics) at ``epsilon``."""
    from dpkit.audit._catalogue_stats import statistic_cases

    return mechanism_cases(epsilon, delta=delta) + statistic_cases(epsilon, delta=delta)
