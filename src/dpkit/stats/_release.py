"""What every private statistic returns: the value, the event that paid for it, its error bars."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dpkit._checks import check_probability
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.stats._noisy import PartNoise

__all__ = ["ErrorModel", "LinearNoise", "NoInterval", "Release", "SimulatedNoise"]

_DRAWS = 4000  # simulated noise draws per interval: quantile error at 97.5% is about ±0.3%
_SEED = 20221  # simulations of the noise use no data, so a fixed public seed is fine


class ErrorModel(Protocol):
    """Turns a released value into an interval (post-processing: it reads no data)."""

    def interval(self, value: Any, alpha: float, include_sampling: bool) -> tuple[Any, Any]: ...


def _sampling_draws(sd: float | None, size: int, gen: np.random.Generator) -> Any:
    if sd is None:
        raise DPKitError(
            "this statistic has no sampling-error model; call ci(alpha) for the noise interval."
        )
    return gen.normal(0.0, sd, size)


@dataclass(frozen=True)
class LinearNoise:
    """Error ``Σ_j c_j Z_j`` (``Z_j`` the noise of part j): exact for a single part."""

    terms: tuple[tuple[PartNoise, float], ...]
    sampling_sd: float | None = None

    def interval(self, value: Any, alpha: float, include_sampling: bool) -> tuple[Any, Any]:
        if len(self.terms) == 1 and not include_sampling:
            part, coef = self.terms[0]
            half = abs(coef) * part.half_width(alpha)
            return value - half, value + half
        gen = np.random.default_rng(_SEED)
        err = sum((c * p.simulate(_DRAWS, gen) for p, c in self.terms), np.zeros(_DRAWS))
        if include_sampling:
            err = err + _sampling_draws(self.sampling_sd, _DRAWS, gen)
        lo, hi = np.quantile(err, [alpha / 2, 1 - alpha / 2])
        return float(value - hi), float(value - lo)


@dataclass(frozen=True)
class SimulatedNoise:
    """Error of a non-linear estimate: ``f(T̂ + Z) − f(T̂)`` simulated around the released parts.

    The interval is the basic (pivotal) parametric bootstrap: it treats the estimate's error
    distribution at the released parts as the error distribution at the true parts.
    """

    errors: Any  # (draws,) or (draws, k) array of simulated noise errors of the estimate
    sampling_sd: Any = None
    limits: tuple[float, float] = (-np.inf, np.inf)  # the statistic's range (e.g. r ∈ [-1, 1])

    def interval(self, value: Any, alpha: float, include_sampling: bool) -> tuple[Any, Any]:
        err = self.errors
        if include_sampling:
            gen = np.random.default_rng(_SEED + 1)
            err = err + _sampling_draws(self.sampling_sd, err.shape[0], gen)
        finite = np.isfinite(err) if err.ndim == 1 else np.all(np.isfinite(err), axis=1)
        ok = err[finite]
        if ok.shape[0] == 0:
            raise DPKitError("the noise is too large for an interval around this estimate.")
        lo, hi = np.quantile(ok, [alpha / 2, 1 - alpha / 2], axis=0)
        a, b = self.limits
        return _plain(np.clip(value - hi, a, b)), _plain(np.clip(value - lo, a, b))


@dataclass(frozen=True)
class NoInterval:
    """For mechanisms whose error depends on the data (the exponential mechanism)."""

    reason: str

    def interval(self, value: Any, alpha: float, include_sampling: bool) -> tuple[Any, Any]:
        raise DPKitError(self.reason)


def _plain(v: Any) -> Any:
    arr = np.asarray(v, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr


def simulate_parts(parts: Sequence[PartNoise], draws: int = _DRAWS) -> list[Any]:
    """Simulated noise of each part (real units), from the fixed public seed."""
    gen = np.random.default_rng(_SEED)
    return [p.simulate(draws, gen) for p in parts]


@dataclass(frozen=True)
class Release:
    """A private statistic: its value, the privacy event that paid for it, and its error bars.

    Attributes
    ----------
    value : float or numpy.ndarray
        The released estimate.
    event : object
        The privacy event charged for it (a ``ComposedEvent`` when it has several noisy parts).
    statistic : str
        What was released, e.g. ``"mean"``.
    """

    value: Any
    event: object
    statistic: str = "statistic"
    errors: ErrorModel = field(default=NoInterval("no error model"), repr=False, compare=False)

    def ci(self, alpha: float = 0.05, *, include_sampling: bool = False) -> tuple[Any, Any]:
        """A ``1 − alpha`` interval for the statistic of the (clamped) data.

        By default it covers the **privacy noise** only: with probability at least ``1 − alpha``
        over the noise, the interval contains the exact statistic of the clamped data (exact for
        one-part statistics, a parametric bootstrap otherwise). With ``include_sampling=True`` it
        also covers the sampling error of the data as a sample from a population (seed 001 plots
        both), where a model of that error is available (count has none). Clamping bias is not
        covered: choose bounds that contain the data.

        Returns
        -------
        (low, high)
            Floats, or arrays shaped like ``value``.
        """
        a = check_probability(alpha, "alpha")
        if a >= 1.0:
            raise PrivacyParameterError("alpha must be in (0, 1), e.g. 0.05 for a 95% interval.")
        return self.errors.interval(self.value, a, include_sampling)

    def __float__(self) -> float:
        return float(self.value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        return np.asarray(self.value, dtype=dtype)

    def __repr__(self) -> str:
        v = self.value
        shown = f"{v:.6g}" if isinstance(v, float) else np.array2string(np.asarray(v), precision=6)
        return f"Release({self.statistic}={shown}, event={self.event!r})"
