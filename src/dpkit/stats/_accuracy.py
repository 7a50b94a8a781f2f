"""How accurate a statistic will be, before anything is spent: from public parameters only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from dpkit._checks import check_epsilon
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._tails import check_alpha
from dpkit.stats._accuracy_moments import cov_bound, quantile_rank_error, var_bound
from dpkit.stats._aggregate import mean_steps, sum_steps
from dpkit.stats._common import check_budget
from dpkit.stats._data import check_bounds, check_n
from dpkit.stats._events import Neighbouring, is_replace
from dpkit.stats._histogram import histogram_noise
from dpkit.stats._noisy import Part, plan
from dpkit.stats._quantile import _check_qs

__all__ = ["STATISTICS", "accuracy"]

STATISTICS = ("count", "cov", "histogram", "mean", "median", "quantile", "std", "sum", "var")
"""The statistics with an accuracy before release: the noise interval of one noisy part (count,
sum, histogram), the mean's (exact with a public n, at a stated scale without), a worst-case
bound over the data for var, std and cov, and a rank error for quantiles. The correlation has
none: it divides by the noisy standard deviations, so its error depends on the data's variances,
which are private (near a variance of 0 any error up to 2 is possible); use ``ci()`` on the
release."""


def accuracy(
    statistic: str,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
    rho: float | None = None,
    bounds: tuple[float, float] | tuple[tuple[float, float], tuple[float, float]] | None = None,
    n: int | None = None,
    expected_n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    alpha: float = 0.05,
    q: float | Sequence[float] = 0.5,
    ddof: int = 0,
) -> float:
    """The half-width of the ``1 − alpha`` interval of a statistic's noise, before its release.

    Computed from the same calibration as the release itself (the same output grid, budget
    split and exact noise), so it equals the half-width of the released value's
    ``ci(alpha)``: with probability at least ``1 − alpha`` the release is within it of the exact
    statistic of the clamped data. It reads no data and charges nothing.

    What the number means depends on the statistic (see ``dpkit.stats._accuracy_moments``):

    * count, sum, histogram (every bin), mean with a public n: the half-width of the released
      ``ci(alpha)``, exactly; the mean with ``expected_n``: that of a release whose noisy count
      comes out at ``expected_n``;
    * var, std, cov: a bound ``w`` with ``P(|released − exact| ≤ w) ≥ 1 − alpha`` for **every**
      dataset of n records within the bounds (worst case over the private mean; for var and std
      the smallest such ``w`` under the joint law of the noisy parts, the count's included when
      n is private; for cov a Bonferroni split over them), in the statistic's units, ``inf`` if
      the noisy count may come out at 0;
    * quantile, median: a **rank error**, in records: with probability at least ``1 − alpha``
      the released value's score ``|(1 − q)·#{x < v} − q·#{x > v}|`` is within this many of the
      best (for data without ties: its rank is within it, plus one, of ``q·n``), from the
      exponential mechanism's utility theorem. No bound on the value follows from public
      parameters: it depends on how densely the data fill the bounds.

    Parameters
    ----------
    statistic : {"count", "sum", "mean", "histogram", "var", "std", "cov", "quantile", "median"}
        For a histogram, the half-width of every bin (each bin gets its own noise). ``"corr"``
        has none (see ``STATISTICS``).
    epsilon, delta : float
        The privacy parameters the release will be given.
    rho : float, optional
        Instead: the zCDP budget the release will be given (discrete Gaussian noise).
    bounds : (float, float)
        The public bounds (sum, mean, var, std, quantiles); a pair of pairs for cov.
    n : int, optional
        The public number of records, as given to the release (the mean's accuracy is then
        exact; var, std and cov use it without noise on the count).
    expected_n : int, optional
        With an unknown n: a public guess of the number of records. The mean's result is the
        half-width of a release whose noisy count is ``expected_n`` (approximate); var, std and
        cov bound the error of a dataset of that size, the count's noise included.
    neighbouring : Neighbouring
        As given to the release.
    alpha : float
        ``0.05`` for a 95% interval.
    q : float or sequence of float
        The quantile level(s) (the budget is split as in :func:`dpkit.stats.quantile`; the
        largest rank error over them).
    ddof : int
        As given to var, std or cov.

    Returns
    -------
    float
        The half-width, in the statistic's units.

    Examples
    --------
    >>> import dpkit.stats as st
    >>> st.accuracy("count", epsilon=1.0)
    3.0
    >>> round(st.accuracy("mean", bounds=(0, 100), epsilon=1.0, n=1000), 4)
    0.1498
    >>> r = st.mean(range(1000), bounds=(0, 100), epsilon=1.0, n=1000, rng=0)
    >>> lo, hi = r.ci(0.05)
    >>> round((hi - lo) / 2, 4)
    0.1498
    >>> round(st.accuracy("var", bounds=(0, 10), epsilon=1.0, n=10_000), 3)
    0.025
    >>> round(st.accuracy("median", bounds=(0, 10), epsilon=1.0))  # records of rank error
    31
    """
    a = check_alpha(alpha)
    eps, dlt, r = check_budget(epsilon, delta, rho)
    replace = is_replace(neighbouring)
    if statistic == "count":
        if replace:
            return 0.0  # the number of records is public under replace-one neighbours
        return plan([Part("count", 0, 1)], epsilon=eps, delta=dlt, rho=r).parts[0].half_width(a)
    if statistic == "histogram":
        return histogram_noise(eps, dlt, replace, r)[0].half_width(a)
    if statistic in ("quantile", "median"):
        qs, _ = _check_qs(0.5 if statistic == "median" else q)
        lo, hi = _one_pair(bounds, statistic)
        return quantile_rank_error((lo, hi), eps_only(epsilon, rho), qs, replace, a)
    if statistic in ("var", "std", "cov"):
        if r is not None:
            raise PrivacyParameterError(f"{statistic} takes epsilon (and delta), not rho.")
        return _moment(statistic, bounds, eps, dlt, replace, n, expected_n, a, ddof)
    if statistic not in ("sum", "mean"):
        raise PrivacyParameterError(
            f"accuracy before release is known for {', '.join(STATISTICS)}; the correlation's "
            "error depends on the data's private variances: use ci() on the release."
        )
    lo, hi = _one_pair(bounds, statistic)
    if statistic == "sum":
        return sum_steps((lo, hi), eps, dlt, replace, rho=r).accuracy(a)
    size = check_n(n)
    if replace and size is None:
        size = check_n(expected_n)  # the size is public under replace-one: it is n
    steps = mean_steps((lo, hi), eps, dlt, replace, size, rho=r)
    return steps.accuracy(a, expected_n=expected_n)


def eps_only(epsilon: float | None, rho: float | None) -> float:
    """The ε of a release that takes no ρ (the exponential mechanism), checked."""
    if rho is not None:
        raise PrivacyParameterError("the quantile takes epsilon, not rho.")
    return check_epsilon(epsilon)


def _one_pair(bounds: object, statistic: str) -> tuple[float, float]:
    if bounds is None:
        raise PrivacyParameterError(f"{statistic} needs bounds=(low, high).")
    return check_bounds(bounds)


def _check_ddof(ddof: object) -> int:
    if isinstance(ddof, bool) or not isinstance(ddof, int) or ddof < 0:
        raise PrivacyParameterError("ddof must be a non-negative integer.")
    return ddof


def _moment(
    statistic: str,
    bounds: object,
    eps: float,
    dlt: float,
    replace: bool,
    n: int | None,
    expected_n: int | None,
    alpha: float,
    ddof: object,
) -> float:
    """The worst-case error bound of var, std or cov (``dpkit.stats._accuracy_moments``)."""
    dd = _check_ddof(ddof)
    size = check_n(n)
    known = size is not None or replace  # under replace-one the count is public: it is n
    if size is None:
        size = check_n(expected_n)
    if size is None:
        raise PrivacyParameterError(
            f"the {statistic}'s accuracy depends on the number of records: pass n= (public) or "
            "expected_n= (a public guess)."
        )
    if statistic != "cov":
        pair = _one_pair(bounds, statistic)
        return var_bound(pair, eps, dlt, replace, size, known, alpha, dd, statistic)
    try:
        bx, by = cast("tuple[object, object]", bounds)
    except (TypeError, ValueError):
        raise PrivacyParameterError(
            "cov needs bounds=((x_low, x_high), (y_low, y_high))."
        ) from None
    pairs = check_bounds(bx, "bounds of x"), check_bounds(by, "bounds of y")
    return cov_bound(*pairs, eps, dlt, replace, size, known, alpha, dd)
