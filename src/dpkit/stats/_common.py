"""Plumbing shared by the statistics: checks, charging, releasing parts, error models."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit.errors import PrivacyParameterError, PrivacyWarning
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.random import RNGLike
from dpkit.stats._data import FloatArray
from dpkit.stats._fixed import VALUE_BITS, exact_int_sum
from dpkit.stats._noisy import Part, Plan
from dpkit.stats._release import PartsBox, Release

__all__ = [
    "UNIT",
    "SupportsCharge",
    "charge",
    "check_budget",
    "check_privacy",
    "gradient_weights",
    "int_range",
    "normalise",
    "range_part",
    "release_parts",
    "scaled_total",
    "warn_large_delta",
]

UNIT = math.ldexp(1.0, VALUE_BITS)
"""Normalised per-record values in [-1, 1] are stored as integers ``rint(u · 2**34)``."""


def check_privacy(epsilon: object, delta: object) -> tuple[float, float]:
    return check_epsilon(epsilon), check_delta(delta)


def check_budget(epsilon: object, delta: object, rho: object) -> tuple[float, float, float | None]:
    """``(ε, δ, None)``, or ``(0, 0, ρ)`` for a zero-concentrated budget (Gaussian noise)."""
    if rho is None:
        return (*check_privacy(epsilon, delta), None)
    if epsilon is not None or delta not in (None, 0, 0.0):
        raise PrivacyParameterError(
            "give either rho= (zCDP, Gaussian noise) or epsilon= (with delta=), not both."
        )
    return 0.0, 0.0, check_positive(rho, "rho")


def warn_large_delta(delta: float, n_public: int | None) -> None:
    """Warn when δ is not far below 1/n for a *public* n ("Name & Shame", lecture notes
    *Approximate Differential Privacy*).

    An (ε, δ) guarantee allows publishing a whole record with probability δ, so δ ≥ 1/n permits
    publishing about one person outright. Only a public n is looked at: a warning that depended
    on a private record count would itself reveal it.
    """
    if delta > 0 and n_public is not None and delta >= 1.0 / n_public:
        warnings.warn(
            PrivacyWarning(
                f"delta={delta:g} is not far below 1/n = {1.0 / n_public:.3g}: an (epsilon, "
                "delta) guarantee then allows publishing about one whole record ('Name & Shame'); "
                f"choose delta well below 1/n, e.g. {n_public**-2.0:.1g}."
            ),
            stacklevel=3,
        )


def normalise(x: FloatArray, bounds: tuple[float, float]) -> tuple[FloatArray, float, float]:
    """Clamp to the bounds and map to about [-1, 1]: ``u = (clip(x) − m) · (1/h)``.

    Returns ``(u, u_lo, u_hi)``: the images of the bounds under the same float operations. Each
    operation is monotone, so every ``u`` lies in ``[u_lo, u_hi]`` (which may exceed [-1, 1] by
    an ulp).
    """
    lo, hi = bounds
    m = lo / 2 + hi / 2
    inv = 2.0 / (hi - lo) if math.isfinite(hi - lo) else 1.0 / (hi / 2 - lo / 2)
    u = (np.clip(x, lo, hi) - m) * inv
    return u, (lo - m) * inv, (hi - m) * inv


def int_range(lo: float, hi: float) -> tuple[int, int]:
    """Integer images ``rint(v · 2**34)`` of a per-record value range (monotone map)."""
    return int(np.rint(lo * UNIT)), int(np.rint(hi * UNIT))


def scaled_total(v: FloatArray) -> int:
    """Exact ``Σ rint(v · 2**34)`` for per-record values ``|v| ≤ 1 + 2**-40``."""
    return exact_int_sum(np.rint(v * UNIT))


def range_part(name: str, lo: int, hi: int, replace: bool, weight: float) -> Part:
    """A sum of per-record integers in [lo, hi] (units 2**-34): its sensitivity per relation."""
    sens = hi - lo if replace else max(abs(lo), abs(hi))
    return Part(name, -VALUE_BITS, sens, weight)


def gradient_weights(f: Callable[..., Any], reference: Sequence[float]) -> list[float]:
    """``|∂f/∂t_j|`` at the reference point by central differences (for the budget split)."""
    out = []
    for j in range(len(reference)):
        step = 1e-6
        up = list(reference)
        dn = list(reference)
        up[j] += step
        dn[j] -= step
        g = abs(float(f(*up)) - float(f(*dn))) / (2 * step)
        out.append(max(g, 1e-3))  # a part never gets (almost) no budget
    return out


def release_parts(
    pl: Plan,
    totals: Sequence[int],
    estimator: Callable[..., Any],
    *,
    delta: float,
    accountant: SupportsCharge | None,
    rng: RNGLike,
    statistic: str,
    sampling_sd: Callable[[Any, float], Any] | None = None,
    limits: tuple[float, float] = (-math.inf, math.inf),
    public_n: int | None = None,
    exact: Callable[..., Any] | None = None,
    corners: bool = False,
    rho: float | None = None,
) -> Release:
    """Charge the plan's event, add its noise to the parts' exact ``totals``, estimate, and
    attach error bars (:class:`PartsBox`).

    ``pl`` is :func:`~dpkit.stats._noisy.plan` of the parts at (ε, δ): a pure function of public
    parameters, which a caller may make once for many releases. ``exact`` is the statistic as a
    function of the exact parts (default: ``estimator``, when the estimator has no bias
    correction). ``sampling_sd(value, size)`` models the sampling error; ``size`` is the public
    record count ``public_n`` when there is one, else the *noisy* count (the last part): the true
    count is private under add/remove neighbours, and a sampling error computed from it would
    leak it. ``corners``: the statistic is monotone along every axis (see :class:`PartsBox`).
    """
    charge(accountant, pl.event, statistic, delta=delta, rng=rng)
    noisy = pl.draw(totals, rng)
    value = estimator(*noisy)
    sd = None
    if sampling_sd is not None:
        size = float(public_n) if public_n is not None else max(float(noisy[-1]), 1.0)
        sd = sampling_sd(value, size)
    box = PartsBox(noisy, pl.parts, exact or estimator, sd, limits, corners)
    return Release(_plain(value), pl.event, statistic, box, delta=delta, rho=rho)


def _plain(value: Any) -> Any:
    if type(value) is float:  # (a Python float: no array needed)
        return value
    arr = np.asarray(value, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr
