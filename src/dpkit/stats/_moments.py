"""Private count, sum, mean, variance and standard deviation of one bounded variable.

All of them follow McSherry 2016 ("Something more sophisticated"): clamp each record to the bounds,
add the clamped values up, add noise scaled to how much one record can move the sum. dpkit adds
them exactly in fixed point (see ``_fixed``), centres them so one record moves the sum by half the
range rather than by the largest magnitude, and splits the budget between the parts of a
statistic to minimise its error.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpkit._missing import Missing, check_missing, handle_missing
from dpkit.random import RNGLike
from dpkit.stats._aggregate import MU, ClampedSum, clamped_sum, mean_of, release_sum
from dpkit.stats._common import (
    UNIT,
    SupportsCharge,
    charge,
    check_budget,
    check_privacy,
    gradient_weights,
    int_range,
    normalise,
    range_part,
    release_parts,
    scaled_total,
    warn_large_delta,
)
from dpkit.stats._data import as_vector, check_bounds, check_n, records, refuse_empty_public
from dpkit.stats._events import Neighbouring, is_replace, relation
from dpkit.stats._fixed import fixed_sum, power_exponent
from dpkit.stats._noisy import Part, Plan, plan
from dpkit.stats._release import LinearNoise, Release
from dpkit.stats._spark import is_spark, spark_count, spark_scaled_sums

__all__ = ["count", "mean", "std", "sum", "var", "var_plan"]


def count(
    x: object,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
    rho: float | None = None,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
) -> Release:
    """Private number of records.

    Adds exact discrete Laplace noise of scale 1/ε (ε-DP; McSherry 2016, "counts") or, with δ > 0,
    discrete Gaussian noise calibrated to (ε, δ). Under replace-one neighbours the number of
    records is public and is released exactly at no cost.

    Parameters
    ----------
    x : array_like
        The records (1-d, or 2-d with one row per record).
    epsilon, delta : float
        Privacy parameters.
    rho : float, optional
        Instead of ``epsilon``/``delta``: a zCDP budget ρ; discrete Gaussian noise with
        ρ = 1/(2σ²), paid in ρ by a :class:`~dpkit.accounting.ZCDP` accountant.
    accountant : Accountant, optional
        Charged before anything is released.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; a seed is reproducible and not secure.
    neighbouring : Neighbouring
        ``ADD_REMOVE`` (default) or ``REPLACE``.
    missing : {"raise", "drop"}
        A record with a missing value (NaN, None): ``"raise"`` (default) refuses before any
        charge (the refusal reveals that one exists); ``"drop"`` removes such records first
        (add/remove neighbours only). See :mod:`dpkit._missing`.

    Examples
    --------
    >>> import dpkit.stats as st
    >>> st.count(range(1000), rho=0.125, rng=0)
    Release(count=999, rho=0.125, ci='exact noise quantiles')
    >>> r = st.count(range(1000), epsilon=1.0, rng=0)
    >>> type(r.value).__name__, bool(abs(r.value - 1000) < 20)
    ('int', True)
    >>> lo, hi = r.ci(0.05)
    >>> round(hi - r.value, 6)
    3.0
    """
    eps, dlt, r = check_budget(epsilon, delta, rho)
    replace = is_replace(neighbouring)
    policy = check_missing(missing, public_size=replace)
    n = spark_count(x, policy) if is_spark(x) else records(x, missing=policy)
    part = Part("count", 0, 0 if replace else 1, 1.0)
    # (under replacement the count is public and nothing is charged)
    pl = plan([part], epsilon=eps, delta=dlt, rho=r, neighbouring=relation(replace))
    if not replace:
        charge(accountant, pl.event, "count", delta=dlt, rng=rng)
    (value,) = pl.draw([n], rng)
    noise = LinearNoise(((pl.parts[0], 1.0),))
    # The count's output grid is the integers (or a coarser power of two): released as an int.
    whole = int(value)
    if replace:
        return Release(whole, pl.event, "count", noise)
    return Release(whole, pl.event, "count", noise, delta=dlt, rho=r)


def sum(
    x: object,
    *,
    bounds: tuple[float, float],
    epsilon: float | None = None,
    delta: float = 0.0,
    rho: float | None = None,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
) -> Release:
    """Private sum of values clamped to ``bounds``.

    Each value is clamped to ``[L, U]`` and added exactly in fixed point; one record moves the
    sum by at most ``max(|L|, |U|)`` (add/remove) or ``U − L`` (replace). Exact discrete Laplace
    noise (ε-DP) or discrete Gaussian noise ((ε, δ)-DP) is added on a data-independent grid
    (McSherry 2016, "noisy sums"; Casacuberta et al. 2022 for the exact summation).

    ``missing="raise"`` (default) refuses a NaN or None before any charge (the refusal reveals
    that one exists); ``missing="drop"`` removes such records first (add/remove neighbours).
    ``rho=`` instead of ``epsilon``/``delta``: discrete Gaussian noise, ρ-zCDP.

    Examples
    --------
    >>> import dpkit.stats as st
    >>> r = st.sum([0.5] * 1000, bounds=(0, 1), epsilon=1.0, rng=0)
    >>> bool(abs(r.value - 500) < 10)
    True
    """
    eps, dlt, r = check_budget(epsilon, delta, rho)
    replace = is_replace(neighbouring)  # a bad relation is refused before the data are read
    policy = check_missing(missing, public_size=replace)
    return release_sum(
        clamped_sum(x, bounds, missing=policy), epsilon=None if r else eps, delta=dlt,
        accountant=accountant, rng=rng, neighbouring=neighbouring, rho=r,
    )  # fmt: skip


def mean(
    x: object,
    *,
    bounds: tuple[float, float],
    epsilon: float | None = None,
    delta: float = 0.0,
    rho: float | None = None,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
) -> Release:
    """Private mean of values clamped to ``bounds``.

    The values are clamped, then centred on the middle ``c`` of the bounds and added exactly,
    so one record moves the centred sum by at most half the range ``h = (U − L)/2`` under
    add/remove (``U − L`` under replace), whatever the sign of the bounds; the naive noisy sum
    pays ``max(|L|, |U|)``.

    * **Known n** (``n=`` given, or replace-one neighbours, under which the size is public): the
      estimate is ``c + (centred sum + noise)/n``, **unbiased** for the mean of the clamped data;
      all of ε goes to the sum.
    * **Unknown n** (add/remove, default): the estimate is ``c + noisy centred sum / noisy
      count``; the budget is split ``ε_sum : ε_count ∝ h^{2/3} : (h/√3)^{2/3}`` (≈ 0.59 : 0.41),
      which minimises the error when the mean lies at a typical distance ``h/√3`` from the centre
      (see ``_noisy``). The estimate is clamped to the bounds.

    ε-DP with discrete Laplace noise, or (ε, δ)-DP with discrete Gaussian noise when δ > 0
    (McSherry 2016, "the average"; Dwork & Roth 2014 for bounded data).

    Parameters
    ----------
    x : array_like
        1-d array of values.
    bounds : (float, float)
        Public bounds ``(L, U)``; required, never read from the data.
    epsilon, delta : float
        Privacy parameters.
    rho : float, optional
        Instead of ``epsilon``/``delta``: a zCDP budget ρ for discrete Gaussian noise on the
        parts (their costs add up to ρ).
    accountant : Accountant, optional
        Charged with the whole statistic before anything is released.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; a seed is reproducible and not secure.
    n : int, optional
        The public number of records, if known. A wrong ``n`` costs accuracy, not privacy.
    neighbouring : Neighbouring
        ``ADD_REMOVE`` (default) or ``REPLACE``.
    missing : {"raise", "drop"}
        A record with a missing value (NaN, None): ``"raise"`` (default) refuses before any
        charge (the refusal reveals that one exists); ``"drop"`` removes such records first
        (add/remove neighbours only). See :mod:`dpkit._missing`.

    Returns
    -------
    Release
        ``ci(alpha)`` covers the noise; ``ci(alpha, include_sampling=True)`` adds the sampling
        error with the worst-case variance ``h²`` (Popoviciu), a conservative interval for the
        population mean.

    Examples
    --------
    >>> import numpy as np, dpkit.stats as st
    >>> x = np.random.default_rng(0).uniform(0, 100, 10_000)
    >>> m = st.mean(x, bounds=(0, 100), epsilon=1.0, rng=1)
    >>> bool(abs(m.value - x.mean()) < 0.5)
    True
    >>> lo, hi = m.ci(0.05)
    >>> bool(lo < m.value < hi)
    True
    """
    eps, dlt, r = check_budget(epsilon, delta, rho)
    replace = is_replace(neighbouring)
    lo, hi = check_bounds(bounds)
    policy = check_missing(missing, public_size=replace and n is None)
    n_pub = check_n(n)
    if is_spark(x):  # the exact sum where the data are; the rest as below
        agg = clamped_sum(x, (lo, hi), missing=policy)
    else:
        data = as_vector(x)
        if policy == "drop":  # under "raise" the exact sum below refuses a NaN in its own pass
            data = handle_missing(data, policy)
        k = power_exponent((lo, hi))
        agg = ClampedSum((lo, hi), k, fixed_sum(data, (lo, hi), k), int(data.size))
    if replace and n_pub is None:
        refuse_empty_public(agg.size, "mean")
        n_pub = agg.size
    warn_large_delta(dlt, n_pub)
    return mean_of(agg, eps, dlt, accountant, rng, n_pub, replace, rho=r)


def _var_totals(x: object, bounds: tuple[float, float], policy: Missing) -> tuple[int, int, int]:
    """``(Σ rint(u · 2**34), Σ rint((u² − 1/2) · 2**34), n)`` of the normalised records u (on
    Spark, by the same float operations: :func:`~dpkit.stats._spark.spark_scaled_sums`)."""
    if is_spark(x):
        return spark_scaled_sums(x, bounds, policy, UNIT)
    data = handle_missing(as_vector(x), policy)
    u, _, _ = normalise(data, bounds)
    q = u * u - 0.5  # centred square: in [-1/2, 1/2], so one record moves its sum by 1/2
    return scaled_total(u), scaled_total(q), int(u.size)


def _var_parts(
    totals: tuple[int, int, int], ulo: float, uhi: float, replace: bool, known: bool
) -> tuple[list[Part], list[int]]:
    """Parts of the variance of normalised values u ∈ [ulo, uhi] (about [-1, 1])."""
    top = max(ulo * ulo, uhi * uhi) - 0.5
    s1, s2, size = totals
    out = [s1, s2]

    def f(n: float, m1: float, m2: float) -> float:
        return m2 / n + 0.5 - (m1 / n) ** 2

    w_n, w_1, w_2 = gradient_weights(f, [1.0, MU, 0.0])
    parts = [
        range_part("sum", *int_range(ulo, uhi), replace, w_1),
        range_part("centred sum of squares", *int_range(-0.5, top), replace, w_2),
    ]
    if not known:
        parts.append(Part("count", 0, 1, w_n))
        out.append(size)
    return parts, out


def var_plan(
    bounds: tuple[float, float],
    epsilon: float,
    delta: float,
    replace: bool,
    known: bool,
    sums: tuple[int, int, int] = (0, 0, 0),
) -> tuple[Plan, list[int]]:
    """The variance's calibrated noise (a function of public parameters only: checked bounds,
    (ε, δ), the relation and whether n is public) and the parts' totals from ``sums``."""
    _, ulo, uhi = normalise(np.empty(0), bounds)
    parts, totals = _var_parts(sums, ulo, uhi, replace, known)
    return plan(parts, epsilon=epsilon, delta=delta, neighbouring=relation(replace)), totals


def _variance(
    x: object,
    bounds: tuple[float, float],
    epsilon: float,
    delta: float,
    accountant: SupportsCharge | None,
    rng: RNGLike,
    n: int | None,
    neighbouring: Neighbouring,
    ddof: int,
    statistic: str,
    missing: object,
) -> Release:
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    lo, hi = check_bounds(bounds)
    policy = check_missing(missing, public_size=replace and n is None)
    n_pub = check_n(n)
    sums = _var_totals(x, (lo, hi), policy)
    if replace and n_pub is None:
        refuse_empty_public(sums[2], statistic)
        n_pub = sums[2]
    warn_large_delta(dlt, n_pub)
    pl, totals = var_plan((lo, hi), eps, dlt, replace, n_pub is not None, sums)
    h2 = ((hi - lo) / 2) ** 2
    bias = pl.parts[0].sd ** 2  # E[(S1 + Z)²] = S1² + Var(Z): corrected when n is known

    def estimate(s1: Any, s2: Any, cnt: Any = None, *, unbias: bool = True) -> Any:
        size = np.maximum(cnt, 1.0) if cnt is not None else float(n_pub)  # type: ignore[arg-type]
        v = s2 / size + 0.5 - (s1 / size) ** 2
        if cnt is None and unbias:
            v = v + bias / size**2
        v = np.maximum(v * h2 * size / np.maximum(size - ddof, 1.0), 0.0)
        return np.sqrt(v) if statistic == "std" else v

    def exact(s1: Any, s2: Any, cnt: Any = None) -> Any:
        return estimate(s1, s2, cnt, unbias=False)

    def sampling(value: Any, size: float) -> float:
        # sd of the sample variance ≤ sqrt(E(X−μ)^4 / n) ≤ 2h²/√n for data within the bounds
        sd_var = 2.0 * h2 / math.sqrt(size)
        if statistic == "std":
            return sd_var / (2.0 * max(float(value), math.sqrt(h2) / math.sqrt(size)))
        return sd_var

    rel = release_parts(
        pl,
        totals,
        estimate,
        delta=dlt,
        accountant=accountant,
        rng=rng,
        statistic=statistic,
        sampling_sd=sampling,
        limits=(0.0, math.inf),
        public_n=n_pub,
        exact=exact,
    )
    return rel


def var(
    x: object,
    *,
    bounds: tuple[float, float],
    epsilon: float,
    delta: float = 0.0,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
    ddof: int = 0,
) -> Release:
    """Private variance of values clamped to ``bounds``.

    The values are clamped and mapped to ``u ∈ [-1, 1]``; two exact sums are noised: ``Σ u``
    (one record moves it by 1) and the centred second moment ``Σ (u² − 1/2)`` (by 1/2), plus the
    count when n is unknown (McSherry 2016: variance = second moment − mean²). The budget is split
    to minimise the error at a reference point (mean at ``h/√3`` from the centre, second moment
    ``h²/2``). With known n the estimate before truncation at 0 is **unbiased** for the variance
    of the clamped data: the noise's contribution to the squared mean, ``Var(Z)/n²``, is added
    back. ε-DP (Laplace) or (ε, δ)-DP (Gaussian, δ > 0).

    ``missing="raise"`` (default) refuses a NaN or None before any charge (the refusal reveals
    that one exists); ``missing="drop"`` removes such records first (add/remove neighbours).

    Examples
    --------
    >>> import numpy as np, dpkit.stats as st
    >>> x = np.random.default_rng(0).uniform(-1, 1, 10_000)
    >>> v = st.var(x, bounds=(-1, 1), epsilon=1.0, rng=1)
    >>> bool(abs(v.value - x.var()) < 0.01)
    True
    """
    return _variance(
        x, bounds, epsilon, delta, accountant, rng, n, neighbouring, ddof, "var", missing
    )


def std(
    x: object,
    *,
    bounds: tuple[float, float],
    epsilon: float,
    delta: float = 0.0,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
    ddof: int = 0,
) -> Release:
    """Private standard deviation: the square root of :func:`var` (post-processing), same cost.

    ``missing="raise"`` (default) refuses a NaN or None before any charge (the refusal reveals
    that one exists); ``missing="drop"`` removes such records first (add/remove neighbours).

    Examples
    --------
    >>> import numpy as np, dpkit.stats as st
    >>> x = np.random.default_rng(0).uniform(-1, 1, 10_000)
    >>> s = st.std(x, bounds=(-1, 1), epsilon=1.0, rng=1)
    >>> bool(abs(s.value - x.std()) < 0.02)
    True
    """
    return _variance(
        x, bounds, epsilon, delta, accountant, rng, n, neighbouring, ddof, "std", missing
    )
