"""A private estimate of a range for data that come with none, paid from the budget."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpkit._checks import check_epsilon, check_probability
from dpkit._missing import Missing, check_missing, handle_missing
from dpkit.errors import DataError
from dpkit.noise import discrete_laplace
from dpkit.random import RNGLike, as_generator
from dpkit.stats._common import SupportsCharge, charge
from dpkit.stats._data import as_vector
from dpkit.stats._events import Neighbouring, discrete_laplace_event, is_replace, relation
from dpkit.stats._noisy import check_sampleable
from dpkit.stats._release import NoInterval, Release

__all__ = ["bounds"]

_J = 64  # magnitudes from 2^-64 to 2^64; beyond that the extreme bins take them
_BINS = 4 * _J + 1  # negative classes, the zero bin, positive classes
_BIG = 2.0 ** (_J + 1)  # in the outermost class: where ±inf and the largest doubles go


def _edges_of(index: int) -> tuple[float, float]:
    """The interval of bin ``index`` (0 … 4J): negative classes, zero bin, positive classes."""
    mid = 2 * _J
    if index == mid:
        return -(2.0**-_J), 2.0**-_J
    if index > mid:
        k = index - mid - 1 - _J  # magnitude class [2^k, 2^(k+1))
        return math.ldexp(1.0, k), math.ldexp(1.0, k + 1)
    k = mid - 1 - index - _J
    return -math.ldexp(1.0, k + 1), -math.ldexp(1.0, k)


def bounds(
    x: object,
    *,
    epsilon: float,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
    beta: float = 0.01,
) -> Release:
    """Private range ``(lower, upper)`` for data with no known bounds, within a factor of 2.

    Records are counted in power-of-two classes of magnitude and sign (``[2^k, 2^(k+1))`` for
    ``|k| ≤ 64``, mirrored for negatives, plus a bin around 0): each record is in one class, so
    the counts have ℓ1 sensitivity 1 (2 under replace). Exact discrete Laplace noise of scale
    Δ/ε makes the histogram ε-DP; the range runs from the lowest to the highest class whose noisy
    count exceeds ``τ = (Δ/ε) ln(257/beta)``, a threshold that an empty class passes with
    probability at most ``beta`` in total. Everything after the noisy counts is
    post-processing. The result replaces "read min/max from the data", which is not private:
    classes holding fewer than about τ records (outliers) are left out and will be clamped.

    Parameters
    ----------
    x : array_like
        1-d array of values.
    epsilon : float
        Privacy cost of the range.
    beta : float
        Probability that noise alone makes an empty class look occupied.
    missing : {"raise", "drop"}
        A NaN or None: ``"raise"`` (default) refuses before any charge (the refusal reveals that
        one exists); ``"drop"`` removes such records first (add/remove neighbours only).

    Returns
    -------
    Release
        ``value`` is the array ``[lower, upper]``.

    Examples
    --------
    >>> import numpy as np, dpkit.stats as st
    >>> x = np.random.default_rng(0).uniform(3, 90, 10_000)
    >>> st.bounds(x, epsilon=1.0, rng=0).value
    array([  2., 128.])
    """
    eps = check_epsilon(epsilon)
    b = check_probability(beta, "beta")
    replace = is_replace(neighbouring)
    data = handle_missing(as_vector(x), check_missing(missing, public_size=replace))
    # ±inf belongs to the outermost class of its sign, like the largest doubles (frexp(inf) has
    # exponent 0, which would put it next to 1)
    data = np.clip(data, -_BIG, _BIG)
    _, e = np.frexp(data)
    k = np.clip(e.astype(np.int64) - 1, -_J - 1, _J - 1)
    zero = (k == -_J - 1) | (data == 0)  # frexp(0) has exponent 0, not a tiny one
    mid = 2 * _J
    idx = np.where(data > 0, mid + 1 + (k + _J), mid - 1 - (k + _J))
    idx = np.where(zero, mid, idx)
    counts = np.bincount(idx, minlength=_BINS)
    sens = 2 if replace else 1
    scale = Fraction(sens) / Fraction(eps * (1.0 - 2.0**-40))
    event = discrete_laplace_event(scale=scale, sensitivity=sens, neighbouring=relation(replace))
    check_sampleable("laplace", scale)  # refuse a tiny ε before charging, not after
    charge(accountant, event, "bounds", rng=rng)
    noisy = counts + np.asarray(discrete_laplace(scale, size=_BINS, rng=as_generator(rng)))
    tau = float(scale) * math.log(_BINS / b)
    hits = np.flatnonzero(noisy > tau)
    if hits.size == 0:
        raise DataError(
            "too few records for a private range at this epsilon (the budget was spent); give "
            "bounds from domain knowledge, or use more epsilon or more data."
        )
    lower = _edges_of(int(hits[0]))[0]
    upper = _edges_of(int(hits[-1]))[1]
    return Release(np.array([lower, upper]), event, "bounds", NoInterval(_NO_CI))


_NO_CI = (
    "a private range has no error interval; it is a power-of-two cover of the bulk of the data."
)
