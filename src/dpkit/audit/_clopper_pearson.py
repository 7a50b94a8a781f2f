"""Exact (Clopper–Pearson) binomial confidence intervals, scalar and vectorised.

Clopper & Pearson (1934): for ``k`` successes in ``n`` trials the interval is
``[B(α/2; k, n−k+1), B(1−α/2; k+1, n−k)]`` with ``B`` the Beta quantile, and the ends are 0 and 1
when ``k = 0`` or ``k = n``. Each end holds with probability at least ``1 − α/2`` whatever the true
proportion, which is what an audit needs: it never claims more than the data show.
"""

from __future__ import annotations

import numbers

import numpy as np
import numpy.typing as npt
from scipy.special import betaincinv

from dpkit.errors import PrivacyParameterError

__all__ = ["check_confidence", "clopper_pearson", "cp_lower", "cp_upper"]


def check_confidence(confidence: object) -> float:
    """A confidence level must be a real number strictly between 0 and 1."""
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise PrivacyParameterError(
            f"confidence must be a number in (0, 1), got {confidence!r}; e.g. confidence=0.95."
        )
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise PrivacyParameterError(
            f"confidence must be in (0, 1), got {c!r}; e.g. confidence=0.95 for a 95% bound."
        )
    return c


def _counts(k: npt.ArrayLike, n: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], ...]:
    ka = np.asarray(k, dtype=np.float64)
    na = np.asarray(n, dtype=np.float64)
    if np.any(na < 1) or np.any(ka < 0) or np.any(ka > na) or np.any(ka != np.floor(ka)):
        raise PrivacyParameterError(
            "binomial counts must satisfy 0 <= successes <= trials and trials >= 1 (integers)."
        )
    ka, na = np.broadcast_arrays(ka, na)
    return ka, na


def cp_upper(k: npt.ArrayLike, n: npt.ArrayLike, alpha: float) -> npt.NDArray[np.float64]:
    """One-sided upper Clopper–Pearson bound: P(true p > bound) ≤ ``alpha``. Vectorised."""
    ka, na = _counts(k, n)
    out = np.ones_like(ka)
    inner = ka < na
    # The upper end solves P(Binomial(n, p) <= k) = alpha, i.e. the Beta(k+1, n-k) quantile.
    out[inner] = betaincinv(ka[inner] + 1.0, na[inner] - ka[inner], 1.0 - alpha)
    zero = ka == 0
    # Closed form for k = 0 (the case audits meet most), more accurate than the quantile.
    out[zero] = -np.expm1(np.log(alpha) / na[zero])
    return out


def cp_lower(k: npt.ArrayLike, n: npt.ArrayLike, alpha: float) -> npt.NDArray[np.float64]:
    """One-sided lower Clopper–Pearson bound: P(true p < bound) ≤ ``alpha``. Vectorised."""
    ka, na = _counts(k, n)
    return 1.0 - cp_upper(na - ka, na, alpha)


def clopper_pearson(
    successes: int, trials: int, *, confidence: float = 0.95
) -> tuple[float, float]:
    """Two-sided exact confidence interval for a binomial proportion.

    Parameters
    ----------
    successes, trials : int
        The observed count and the number of independent trials (``0 <= successes <= trials``).
    confidence : float
        Coverage of the interval; each end fails with probability at most ``(1 − confidence)/2``.

    Returns
    -------
    (low, high) : tuple of float

    Notes
    -----
    Clopper & Pearson, *Biometrika* 26 (1934). For ``successes = 0`` the upper end is
    ``1 − ((1 − confidence)/2)^(1/trials)``.

    Examples
    --------
    >>> lo, hi = clopper_pearson(0, 500, confidence=0.99)
    >>> lo, round(hi, 6)
    (0.0, 0.010541)
    >>> lo, hi = clopper_pearson(50, 100)
    >>> round(lo, 4), round(hi, 4)
    (0.3983, 0.6017)
    """
    c = check_confidence(confidence)
    alpha = (1.0 - c) / 2.0
    hi = float(cp_upper(successes, trials, alpha))
    lo = float(cp_lower(successes, trials, alpha))
    return lo, hi
