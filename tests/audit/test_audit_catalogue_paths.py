"""The built-in Gaussian audits run the mechanism their claim is about.

A scalar Gaussian is calibrated by its exact privacy curve (σ 3.731 at ε = 1, δ = 1e-5), a vector
one by zCDP (σ 4.045): auditing the vector's noise against the scalar's claim never tests the
scalar path. Each path is now its own case, with its own claim.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting import epsilon_of
from dpkit.audit._catalogue import mechanism_cases
from dpkit.mechanisms import DiscreteGaussian, Gaussian

N = 200_000


def _case(name: str, eps: float = 1.0):  # type: ignore[no-untyped-def]
    (case,) = [c for c in mechanism_cases(eps) if c.name == name]
    return case


@pytest.mark.parametrize(("name", "cls"), [("Gaussian", Gaussian),
                                           ("DiscreteGaussian", DiscreteGaussian)])  # fmt: skip
def test_scalar_case_draws_the_scalar_mechanisms_noise(name: str, cls: type) -> None:
    case = _case(name)
    scalar = cls(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    vector = cls(epsilon=1.0, delta=1e-5, sensitivity=1.0, shape=(2,))
    assert case.claimed_epsilon == epsilon_of(scalar.event, delta=1e-5)
    y = np.asarray(case.mechanism(case.d0, N, np.random.default_rng(0)), dtype=np.float64)
    sd = float(np.std(y))
    # The sample sd of N Gaussians has standard error σ/√(2N) ≈ 0.006: 5 of them is 0.03,
    # and the scalar and vector σ differ by 0.31.
    se = scalar.sigma / math.sqrt(2 * N)
    assert abs(sd - scalar.sigma) < 5 * se
    assert abs(sd - vector.sigma) > 20 * se


VECTORS = [("Gaussian (vector)", Gaussian), ("DiscreteGaussian (vector)", DiscreteGaussian)]


@pytest.mark.parametrize(("name", "cls"), VECTORS)
def test_vector_case_has_the_vector_claim_and_noise(name: str, cls: type) -> None:
    case = _case(name)
    vector = cls(epsilon=1.0, delta=1e-5, sensitivity=1.0, shape=(2,))
    assert case.claimed_epsilon == epsilon_of(vector.event, delta=1e-5)
    assert float(np.linalg.norm(np.asarray(case.d1) - np.asarray(case.d0))) == 1.0
    y = np.asarray(case.mechanism(case.d0, N, np.random.default_rng(1)), dtype=np.float64)
    assert y.shape == (N, 2)
    se = vector.sigma / math.sqrt(2 * N)
    assert np.all(np.abs(np.std(y, axis=0) - vector.sigma) < 5 * se)
