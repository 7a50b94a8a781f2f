"""How accurate a statistic will be, before anything is spent: from public parameters only."""

from __future__ import annotations

from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._tails import check_alpha
from dpkit.stats._aggregate import mean_steps, sum_steps
from dpkit.stats._common import check_budget
from dpkit.stats._data import check_bounds, check_n
from dpkit.stats._events import Neighbouring, is_replace
from dpkit.stats._histogram import histogram_noise
from dpkit.stats._noisy import Part, plan

__all__ = ["STATISTICS", "accuracy"]

STATISTICS = ("count", "histogram", "mean", "sum")
"""The statistics whose noise interval is known before the release (one noisy part, or the mean
at a stated scale). The others' intervals depend on their noisy parts (var, corr) or on the
data (quantiles by the exponential mechanism)."""


def accuracy(
    statistic: str,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
    rho: float | None = None,
    bounds: tuple[float, float] | None = None,
    n: int | None = None,
    expected_n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    alpha: float = 0.05,
) -> float:
    """The half-width of the ``1 − alpha`` interval of a statistic's noise, before its release.

    Computed from the same calibration as the release itself (the same output grid, budget
    split and exact noise), so it equals the half-width of the released value's
    ``ci(alpha)``: with probability at least ``1 − alpha`` the release is within it of the exact
    statistic of the clamped data. It reads no data and charges nothing.

    Parameters
    ----------
    statistic : {"count", "sum", "mean", "histogram"}
        For a histogram, the half-width of every bin (each bin gets its own noise).
    epsilon, delta : float
        The privacy parameters the release will be given.
    rho : float, optional
        Instead: the zCDP budget the release will be given (discrete Gaussian noise).
    bounds : (float, float)
        The public bounds (sum and mean).
    n : int, optional
        The public number of records, as given to :func:`dpkit.stats.mean` (the mean's
        accuracy is then exact).
    expected_n : int, optional
        For the mean with an unknown n: a public guess of the number of records; the result is
        the half-width of a release whose noisy count is ``expected_n`` (approximate).
    neighbouring : Neighbouring
        As given to the release.
    alpha : float
        ``0.05`` for a 95% interval.

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
    if statistic not in ("sum", "mean"):
        raise PrivacyParameterError(
            f"accuracy before release is known for {', '.join(STATISTICS)}; the others' "
            "intervals depend on their noisy parts: use ci() on the release."
        )
    if bounds is None:
        raise PrivacyParameterError(f"{statistic} needs bounds=(low, high).")
    lo, hi = check_bounds(bounds)
    if statistic == "sum":
        return sum_steps((lo, hi), eps, dlt, replace, rho=r).accuracy(a)
    size = check_n(n)
    if replace and size is None:
        size = check_n(expected_n)  # the size is public under replace-one: it is n
    steps = mean_steps((lo, hi), eps, dlt, replace, size, rho=r)
    return steps.accuracy(a, expected_n=expected_n)
