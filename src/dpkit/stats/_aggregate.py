"""Private sum and mean in two steps: the exact clamped sum, then its release.

:func:`dpkit.stats.sum` and :func:`dpkit.stats.mean` are each "clamp, add exactly, add noise"
(McSherry 2016, "noisy sums" and "the average"). The first two steps are a deterministic function of
the data and the public bounds and draw no noise: :func:`clamped_sum` computes them once, and
:func:`release_sum` / :func:`release_mean` draw fresh noise around that aggregate with exactly the
calibration, charge and error bars of the one-step functions (which are built from these two
steps). A caller that answers many queries on the same data (a curator service) can therefore
keep the :class:`ClampedSum` of a column and pay only for the noise on each answer: re-using a
deterministic function of the data changes no guarantee, because every release still draws its
own noise and charges its own event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dpkit._missing import Missing, check_missing, handle_missing
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._tails import check_alpha
from dpkit.random import RNGLike
from dpkit.stats._common import (
    SupportsCharge,
    charge,
    check_budget,
    check_privacy,
    release_parts,
    warn_large_delta,
)
from dpkit.stats._data import as_vector, check_bounds, check_n, refuse_empty_public
from dpkit.stats._events import Neighbouring, is_replace, relation
from dpkit.stats._fixed import fixed_sum, power_exponent
from dpkit.stats._noisy import Part, Plan, plan
from dpkit.stats._release import LinearNoise, PartsBox, Release
from dpkit.stats._spark import is_spark, spark_fixed_sum

__all__ = [
    "MU",
    "ClampedSum",
    "ClippedMean",
    "MeanSteps",
    "SumSteps",
    "clamped_sum",
    "mean_of",
    "mean_steps",
    "release_mean",
    "release_sum",
    "sum_steps",
]

MU = 1.0 / math.sqrt(3.0)
"""Reference |centred mean| / half-range for the budget split: the root mean square of a mean
spread uniformly over the bounds (the split must not read the data)."""


@dataclass(frozen=True)
class ClampedSum:
    """The exact fixed-point sum of records clamped to ``bounds``, and the number of records.

    ``total`` is ``Σ rint(clip(x, L, U) · 2**exponent)`` (an exact integer, see ``_fixed``) and
    ``size`` the number of records. Both are **private**: this object is an intermediate result
    to be released only through :func:`release_sum` or :func:`release_mean`.
    """

    bounds: tuple[float, float]
    exponent: int
    total: int
    size: int

    def __repr__(self) -> str:  # the private fields are never printed (logs, tracebacks)
        return f"ClampedSum(bounds={self.bounds}, exponent={self.exponent})"


def clamped_sum(
    x: object, bounds: tuple[float, float], *, missing: Missing = "raise"
) -> ClampedSum:
    """Clamp ``x`` to ``bounds`` and add it up exactly (no noise, no privacy: see the module).

    A NaN or None is refused (:class:`~dpkit.errors.DataError`) under ``missing="raise"`` and
    removed under ``"drop"``, like the one-step functions; ``±inf`` is clamped.

    Examples
    --------
    >>> from dpkit.stats._aggregate import clamped_sum, release_mean
    >>> agg = clamped_sum([1.0, 2.0, 30.0], (0.0, 10.0))
    >>> agg.size, agg.total * 2.0**-agg.exponent
    (3, 13.0)
    >>> r = release_mean(agg, epsilon=1.0, rng=0)
    >>> bool(0.0 <= r.value <= 10.0)
    True
    """
    lo, hi = check_bounds(bounds)
    policy = check_missing(missing)
    k = power_exponent((lo, hi))
    if is_spark(x):  # the same integers, summed where the data are
        return ClampedSum((lo, hi), k, *spark_fixed_sum(x, (lo, hi), k, policy))
    data = as_vector(x)
    if policy == "drop":  # under "raise" the exact sum refuses a NaN in its own pass
        data = handle_missing(data, policy)
    return ClampedSum((lo, hi), k, fixed_sum(data, (lo, hi), k), int(data.size))


def _grid_of(lo: float, hi: float, k: int) -> tuple[int, int]:
    # round() of a float rounds half to even, like np.rint, and returns the int directly
    return round(math.ldexp(lo, k)), round(math.ldexp(hi, k))


def release_sum(
    agg: ClampedSum,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    rho: float | None = None,
) -> Release:
    """Release a :class:`ClampedSum`'s total with noise: :func:`dpkit.stats.sum`'s second step.

    ε-DP (discrete Laplace) or (ε, δ)-DP (discrete Gaussian) for the sum of the clamped records,
    with sensitivity ``max(|L|, |U|)`` (add/remove) or ``U − L`` (replace), McSherry 2016 "noisy
    sums".

    Examples
    --------
    >>> from dpkit.stats._aggregate import clamped_sum, release_sum
    >>> r = release_sum(clamped_sum([0.5] * 1000, (0, 1)), epsilon=1.0, rng=0)
    >>> bool(abs(r.value - 500) < 10)
    True
    """
    eps, dlt, r = check_budget(epsilon, delta, rho)
    steps = sum_steps(agg.bounds, eps, dlt, is_replace(neighbouring), rho=r)
    return steps.release(agg, accountant, rng)


def release_mean(
    agg: ClampedSum,
    *,
    epsilon: float,
    delta: float = 0.0,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> Release:
    """Release the mean of a :class:`ClampedSum`: :func:`dpkit.stats.mean`'s second step.

    The same estimator, budget split, guarantee and error bars as :func:`dpkit.stats.mean`
    (which documents them; McSherry 2016 "the average"): the sum is centred on the middle of the
    bounds, and with an unknown ``n`` a noisy count is released alongside.

    Examples
    --------
    >>> from dpkit.stats._aggregate import clamped_sum, release_mean
    >>> import numpy as np
    >>> agg = clamped_sum(np.linspace(0, 100, 10_001), (0, 100))
    >>> r = release_mean(agg, epsilon=1.0, rng=1)
    >>> bool(abs(r.value - 50) < 0.5)
    True
    """
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    n_pub = check_n(n)
    if replace and n_pub is None:
        refuse_empty_public(agg.size, "mean")
        n_pub = agg.size
    warn_large_delta(dlt, n_pub)
    return mean_of(agg, eps, dlt, accountant, rng, n_pub, replace)


def mean_of(
    agg: ClampedSum,
    eps: float,
    dlt: float,
    accountant: SupportsCharge | None,
    rng: RNGLike,
    n_pub: int | None,
    replace: bool,
    rho: float | None = None,
) -> Release:
    """:func:`release_mean` on arguments already checked (and warned about) by the caller."""
    return mean_steps(agg.bounds, eps, dlt, replace, n_pub, rho=rho).release(agg, accountant, rng)


def _check_steps(agg: ClampedSum, bounds: tuple[float, float], exponent: int) -> None:
    # Bit patterns, not ==: -0.0 == 0.0, but the estimate clips to the bounds, sign included.
    same = [a.hex() for a in agg.bounds] == [b.hex() for b in bounds]
    if not same or agg.exponent != exponent:
        raise ValueError("this aggregate was clamped to other bounds than the release's.")


@dataclass(frozen=True)
class SumSteps:
    """Everything :func:`release_sum` prepares before it reads the aggregate: the output grid,
    the calibrated noise and its event, a function of the public bounds and (ε, δ) only.

    Made once (:func:`sum_steps`), it releases any number of aggregates over these bounds, each
    with its own charge and its own noise: the same releases, guarantee and error bars as
    :func:`release_sum`, which is built on it.
    """

    bounds: tuple[float, float]
    exponent: int
    plan: Plan
    delta: float
    rho: float | None = None

    def release(self, agg: ClampedSum, accountant: SupportsCharge | None, rng: RNGLike) -> Release:
        """Charge the plan's event to ``accountant``, then release ``agg``'s noisy total."""
        _check_steps(agg, self.bounds, self.exponent)
        pl = self.plan
        charge(accountant, pl.event, "sum", delta=self.delta, rng=rng)
        (value,) = pl.draw([agg.total], rng)
        noise = LinearNoise(((pl.parts[0], 1.0),))
        return Release(value, pl.event, "sum", noise, delta=self.delta, rho=self.rho)

    def accuracy(self, alpha: float = 0.05) -> float:
        """Half-width of the ``1 − alpha`` interval of the noise of every release made by these
        steps, from public parameters only: exactly the ``ci(alpha)`` half-width of each."""
        return self.plan.parts[0].half_width(check_alpha(alpha))


def sum_steps(
    bounds: tuple[float, float],
    epsilon: float,
    delta: float,
    replace: bool = False,
    *,
    rho: float | None = None,
) -> SumSteps:
    """The :class:`SumSteps` of a sum over ``bounds`` at (ε, δ); ``replace``: replace-one
    neighbours. Refuses bad bounds or privacy parameters before anything can be charged.

    Each :meth:`SumSteps.release` is ε-DP (discrete Laplace) or (ε, δ)-DP (discrete Gaussian),
    as :func:`release_sum`, and charges its own event.

    Examples
    --------
    >>> from dpkit.random import seeded
    >>> from dpkit.stats._aggregate import clamped_sum, sum_steps
    >>> steps = sum_steps((0.0, 1.0), 1.0, 0.0)  # once per query
    >>> r = steps.release(clamped_sum([0.5] * 1000, (0.0, 1.0)), None, seeded(0))
    >>> bool(abs(r.value - 500) < 10)
    True
    """
    epsilon, delta, r = _budget(epsilon, delta, rho)
    lo, hi = check_bounds(bounds)
    k = power_exponent((lo, hi))
    tlo, thi = _grid_of(lo, hi, k)
    sens = thi - tlo if replace else max(abs(tlo), abs(thi))
    # the event declares the relation ``sens`` is for
    pl = plan([Part("sum", -k, sens)], epsilon=epsilon, delta=delta, rho=r,
              neighbouring=relation(replace))  # fmt: skip
    return SumSteps((lo, hi), k, pl, delta, r)


def _budget(epsilon: float, delta: float, rho: float | None) -> tuple[float, float, float | None]:
    """Checked (ε, δ), or a checked ρ (then ε and δ, which the caller set to 0, are unused)."""
    if rho is None:
        return (*check_privacy(epsilon, delta), None)
    return 0.0, 0.0, check_budget(None, None, rho)[2]


@dataclass(frozen=True)
class ClippedMean:
    """The mean's estimate from its noisy parts: ``clip(c + s / max(n, 1), lo, hi)``.

    Elementwise on arrays; on two Python floats, the same value computed without numpy (each
    comparison written as ``np.maximum`` / ``np.minimum`` make it, NaN and signed zeros
    included), which is what the error bars' corners evaluate.
    """

    c: float
    lo: float
    hi: float
    floats: ClassVar[bool] = True  # computes Python floats itself (see PartsBox._corners)

    def __call__(self, s: Any, cnt: Any) -> Any:
        if type(s) is float and type(cnt) is float:
            d = cnt if cnt > 1.0 or cnt != cnt else 1.0
            t = self.c + s / d
            t = t if t > self.lo or t != t else self.lo
            return t if t < self.hi or t != t else self.hi
        return np.minimum(np.maximum(self.c + s / np.maximum(cnt, 1.0), self.lo), self.hi)


@dataclass(frozen=True)
class MeanSteps:
    """Everything :func:`release_mean` prepares before it reads the aggregate (see
    :class:`SumSteps`): the centre of the bounds, the budget split between the centred sum and
    (when ``n`` is not public) the count, their calibrated noise and the composed event.

    Made once (:func:`mean_steps`), it releases any number of aggregates over these bounds, each
    with its own charge and noise: exactly :func:`release_mean`'s releases, built on it.
    """

    bounds: tuple[float, float]
    exponent: int
    plan: Plan
    delta: float
    centre: int  # the middle of the bounds on the fixed-point grid
    n: int | None  # the public record count, if there is one
    estimate: ClippedMean
    rho: float | None = None  # the zCDP budget, when it was given one

    def release(self, agg: ClampedSum, accountant: SupportsCharge | None, rng: RNGLike) -> Release:
        """Charge the plan's event to ``accountant``, then release ``agg``'s noisy mean."""
        _check_steps(agg, self.bounds, self.exponent)
        pl, dlt = self.plan, self.delta
        centred = agg.total - agg.size * self.centre
        h = (self.bounds[1] - self.bounds[0]) / 2
        if self.n is not None:
            size = self.n
            charge(accountant, pl.event, "mean", delta=dlt, rng=rng)
            (s,) = pl.draw([centred], rng)
            noise = LinearNoise(((pl.parts[0], 1.0 / size),), sampling_sd=h / math.sqrt(size))
            value = self.estimate.c + s / size
            return Release(value, pl.event, "mean", noise, delta=dlt, rho=self.rho)
        return release_parts(
            pl,
            [centred, agg.size],
            self.estimate,
            delta=dlt,
            accountant=accountant,
            rng=rng,
            statistic="mean",
            sampling_sd=lambda _v, size: h / math.sqrt(size),
            limits=self.bounds,
            corners=True,  # c + s / max(n, 1), clipped: monotone in s and in n
            rho=self.rho,
        )

    def accuracy(self, alpha: float = 0.05, *, expected_n: int | None = None) -> float:
        """Half-width of the ``1 − alpha`` interval of a release's noise, before any release.

        With a public ``n`` it is exact (the ``ci(alpha)`` half-width of every release). Without
        one, the interval of a release depends on its noisy count; ``expected_n`` (a public guess
        of the number of records, never read from the data) gives the half-width of the box
        interval of a release whose noisy count is ``expected_n`` and whose mean is the centre of
        the bounds, the widest place (an approximation: actual widths vary with the noise).
        """
        a = check_alpha(alpha)
        if self.n is not None:
            return self.plan.parts[0].half_width(a) / self.n
        if expected_n is None:
            raise PrivacyParameterError(
                "the mean's accuracy with an unknown n depends on n: pass expected_n= (a public "
                "guess of the number of records) or the public n."
            )
        size = float(check_n(expected_n) or 0)
        box = PartsBox((0.0, size), self.plan.parts, self.estimate, None, self.bounds, True)
        lo, hi = box.interval(self.estimate.c, a, False, "box")
        return float(hi - lo) / 2.0


def mean_steps(
    bounds: tuple[float, float],
    epsilon: float,
    delta: float,
    replace: bool = False,
    n: int | None = None,
    *,
    rho: float | None = None,
) -> MeanSteps:
    """The :class:`MeanSteps` of a mean over ``bounds`` at (ε, δ); ``replace``: replace-one
    neighbours; ``n``: the public record count, if any (:func:`release_mean` also warns when δ
    is not far below 1/n). Refuses bad bounds, privacy parameters or n before anything can be
    charged.

    Each :meth:`MeanSteps.release` has :func:`release_mean`'s guarantee (ε-DP, or (ε, δ)-DP
    with δ > 0, for the centred sum and the count together) and charges its own event.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.accounting import Accountant, PureDP
    >>> from dpkit.random import seeded
    >>> from dpkit.stats._aggregate import clamped_sum, mean_steps
    >>> agg = clamped_sum(np.linspace(0, 100, 10_001), (0.0, 100.0))
    >>> steps = mean_steps((0.0, 100.0), 0.5, 0.0)  # once per query
    >>> acct = Accountant(PureDP(epsilon=1.0))
    >>> [bool(abs(steps.release(agg, acct, seeded(s)).value - 50) < 1) for s in (1, 2)]
    [True, True]
    >>> len(acct.ledger)  # one charge per release
    2
    """
    epsilon, delta, r = _budget(epsilon, delta, rho)
    n = check_n(n)
    lo, hi = check_bounds(bounds)
    k = power_exponent((lo, hi))
    tlo, thi = _grid_of(lo, hi, k)
    centre = (tlo + thi) // 2
    sens = thi - tlo if replace else max(thi - centre, centre - tlo)
    estimate = ClippedMean(math.ldexp(float(centre), -k), lo, hi)
    if n is not None:
        parts = [Part("centred sum", -k, sens)]
    else:
        parts = [Part("centred sum", -k, sens, 1.0), Part("count", 0, 1, (hi - lo) / 2 * MU)]
    # the event declares the relation ``sens`` is for (the count's 1 holds under both)
    pl = plan(parts, epsilon=epsilon, delta=delta, rho=r, neighbouring=relation(replace))
    return MeanSteps((lo, hi), k, pl, delta, centre, n, estimate, r)
