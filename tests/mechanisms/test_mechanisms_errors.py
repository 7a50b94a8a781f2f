"""Bad input gives a clear dpkit error, nothing is released and nothing is charged."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
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


class Recorder:
    """An accountant that records charges, and the generator state at the time of the charge."""

    def __init__(self, gen: np.random.Generator | None = None, refuse: bool = False) -> None:
        self.events: list[Any] = []
        self.labels: list[str | None] = []
        self.gen = gen
        self.state_at_charge: object = None
        self.refuse = refuse

    def charge(self, event: Any, *, label: str | None = None) -> None:
        if self.gen is not None:
            self.state_at_charge = self.gen.bit_generator.state
        if self.refuse:
            raise BudgetExceededError("no budget left", requested=event, remaining=0.0)
        self.events.append(event)
        self.labels.append(label)


Release = Callable[..., object]

# (name, release function taking value/rng/accountant, a good value)
CASES: list[tuple[str, Release, object]] = [
    ("laplace", Laplace(epsilon=1.0).release, 1.0),
    ("laplace-vector", Laplace(epsilon=1.0, shape=3).release, [1.0, 2.0, 3.0]),
    ("gaussian", Gaussian(epsilon=1.0, delta=1e-6).release, 1.0),
    ("geometric", Geometric(epsilon=1.0).release, 3),
    ("discrete-gaussian", DiscreteGaussian(rho=0.5, shape=2).release, [1, 2]),
]

BAD_KINDS = ["nan", "inf", "-inf", "None", "text", "wrong-shape", "None-inside"]


def _bad(kind: str, good: object) -> object:
    """A bad value of the given kind, shaped like ``good`` unless the shape is the fault."""
    shape = np.shape(good)
    if kind == "None":
        return None
    if kind == "text":
        return "abc"
    if kind == "wrong-shape":
        return np.zeros((*shape, 2))
    if kind == "None-inside":
        return [None, *([1.0] * (max(1, int(np.prod(shape))) - 1))] if shape else [None]
    x = np.ones(shape)
    x.flat[0] = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[kind]
    return x if shape else float(x)


@pytest.mark.parametrize(("name", "release", "good"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_values_are_refused_before_charging(
    name: str, release: Release, good: object, kind: str
) -> None:
    acct = Recorder()
    with pytest.raises(DataError):
        release(_bad(kind, good), rng=0, accountant=acct)
    assert acct.events == []


@pytest.mark.parametrize("bad", [1.5, [1, 2.5], float("nan"), True + 0.5])  # 2**63 is clamped
def test_integer_mechanisms_refuse_non_integers(bad: object) -> None:
    acct = Recorder()
    with pytest.raises(DataError):
        Geometric(epsilon=1.0, shape=np.shape(bad)).release(bad, accountant=acct)
    assert acct.events == []


def test_shape_error_says_how_to_fix() -> None:
    with pytest.raises(DataError, match=r"shape=\(3,\)"):
        Laplace(epsilon=1.0).release([1.0, 2.0, 3.0])


BAD_EPSILON = [0.0, -1.0, math.inf, math.nan, None, "1", True]


@pytest.mark.parametrize("eps", BAD_EPSILON, ids=repr)
@pytest.mark.parametrize(
    "build",
    [
        lambda e: Laplace(epsilon=e),
        lambda e: Gaussian(epsilon=e, delta=1e-6),
        lambda e: Geometric(epsilon=e),
        lambda e: DiscreteGaussian(epsilon=e, delta=1e-6),
        lambda e: RandomizedResponse(epsilon=e),
        lambda e: Exponential(epsilon=e),
        lambda e: ReportNoisyMax(epsilon=e),
        lambda e: PermuteAndFlip(epsilon=e),
        lambda e: SparseVector(epsilon=e, threshold=0.0),
    ],
    ids=["laplace", "gaussian", "geometric", "dgauss", "rr", "exp", "rnm", "pf", "svt"],
)
def test_bad_epsilon(build: Callable[[object], object], eps: object) -> None:
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        build(eps)


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 1.5, math.nan, None])
def test_bad_delta(delta: object) -> None:
    with pytest.raises(PrivacyParameterError, match="delta"):
        Gaussian(epsilon=1.0, delta=delta)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="delta"):
        DiscreteGaussian(epsilon=1.0, delta=delta)


@pytest.mark.parametrize("sens", [0.0, -1.0, math.inf, math.nan])
def test_bad_sensitivity(sens: float) -> None:
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        Laplace(epsilon=1.0, sensitivity=sens)
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        Exponential(epsilon=1.0, sensitivity=sens)


def test_parameter_combinations() -> None:
    with pytest.raises(PrivacyParameterError, match="rho"):
        DiscreteGaussian(epsilon=1.0, rho=0.1)
    with pytest.raises(PrivacyParameterError, match="delta"):
        DiscreteGaussian(epsilon=1.0)
    with pytest.raises(PrivacyParameterError, match="exactly one"):
        RandomizedResponse(epsilon=1.0, gamma=0.2)
    with pytest.raises(PrivacyParameterError, match="exactly one"):
        RandomizedResponse()
    with pytest.raises(PrivacyParameterError, match="shape"):
        Laplace(epsilon=1.0, shape=(0,))
    with pytest.raises(PrivacyParameterError, match="sensitivity"):
        Geometric(epsilon=1.0, sensitivity=1.5)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="monotonic"):
        Exponential(epsilon=1.0, monotonic="yes")  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="alpha"):
        Laplace(epsilon=1.0).ci(1.5)
    with pytest.raises(PrivacyParameterError, match="rng"):
        Laplace(epsilon=1.0).release(1.0, rng="seed")  # type: ignore[arg-type]


def test_bad_rng_charges_nothing() -> None:
    acct = Recorder()
    with pytest.raises(PrivacyParameterError):
        Laplace(epsilon=1.0).release(1.0, rng=-3, accountant=acct)
    assert acct.events == []


def test_mechanisms_are_immutable() -> None:
    lap = Laplace(epsilon=1.0)
    with pytest.raises(AttributeError):
        lap.epsilon = 10.0  # type: ignore[misc]
    assert Laplace(epsilon=1.0) == lap  # value objects


def test_unsampleable_noise_is_refused_at_construction() -> None:
    """A σ beyond the exact sampler's range must fail before any charge, not at release."""
    with pytest.raises(PrivacyParameterError, match="too large"):
        DiscreteGaussian(rho=1e-20)  # σ ≈ 7·10^9 > 2^30
    with pytest.raises(PrivacyParameterError, match="too large"):
        Geometric(epsilon=1e-17, sensitivity=1)
