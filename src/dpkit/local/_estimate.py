"""Frequency estimates with exact variances, and consistency post-processing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._base import FloatArray
from dpkit.mechanisms._tails import check_alpha

__all__ = ["FrequencyEstimate", "norm_sub"]


@dataclass(frozen=True, eq=False)
class FrequencyEstimate:
    """Unbiased counts of each domain value, estimated from ``n`` local reports.

    Attributes
    ----------
    counts : numpy.ndarray
        ``ĉ_v = (C_v − n q) / (p − q)`` for each value ``v``, where ``C_v`` counts the reports
        that support ``v`` (Wang et al. 2017, "pure" protocols). Unbiased, hence sometimes
        negative; see :meth:`consistent`.
    variance : numpy.ndarray
        The exact variance formula ``[n_v p(1−p) + (n − n_v) q(1−q)] / (p − q)²`` evaluated at the
        estimate ``n_v = ĉ_v`` clipped to ``[0, n]`` (a plug-in estimate of the true variance).
    variance_zero : float
        The same formula at ``n_v = 0``, Wang et al.'s ``Var*``: the variance of every rare value.
    n : int
        Number of reports.
    protocol : str
        Tag of the protocol that produced the reports.
    """

    counts: FloatArray
    variance: FloatArray
    variance_zero: float
    n: int
    protocol: str

    @property
    def frequencies(self) -> FloatArray:
        """``counts / n``: the estimated share of each value."""
        return self.counts / self.n

    def ci(self, alpha: float = 0.05) -> FloatArray:
        """Half-widths of the normal-approximation ``1 − alpha`` intervals for ``counts``.

        Each count is a sum of ``n`` independent bounded terms, so it is close to normal for the
        ``n`` of any real collection.
        """
        z = float(ndtri(1.0 - check_alpha(alpha) / 2.0))
        return np.asarray(z * np.sqrt(self.variance), dtype=np.float64)

    def interval(self, alpha: float = 0.05) -> tuple[FloatArray, FloatArray]:
        """``(counts − ci, counts + ci)``."""
        w = self.ci(alpha)
        return self.counts - w, self.counts + w

    def consistent(self, method: str = "norm_sub") -> FloatArray:
        """Counts post-processed to be non-negative (and, by default, to sum to ``n``).

        Post-processing costs no privacy but introduces bias; the intervals of :meth:`ci` refer
        to the unbiased :attr:`counts`, not to these.

        Parameters
        ----------
        method : {"norm_sub", "clip"}
            ``"norm_sub"`` (Wang, Lopuhaä-Zwakenberg et al. 2020, "Locally differentially private
            frequency estimation with consistency", Norm-Sub): subtract one constant and clip at
            0 so that the counts sum to ``n``. ``"clip"``: only clip negatives to 0.
        """
        if method == "clip":
            return np.maximum(self.counts, 0.0)
        if method == "norm_sub":
            return norm_sub(self.counts, float(self.n))
        raise PrivacyParameterError(f"method must be 'norm_sub' or 'clip', got {method!r}.")


def norm_sub(counts: FloatArray, total: float) -> FloatArray:
    """``max(counts − θ, 0)`` with ``θ`` chosen so that the result sums to ``total``.

    >>> norm_sub(np.array([5.0, 3.0, -1.0]), 6.0).tolist()
    [4.0, 2.0, 0.0]
    """
    c = np.asarray(counts, dtype=np.float64)
    if total <= 0:
        return np.zeros_like(c)
    desc = np.sort(c)[::-1]
    cum = np.cumsum(desc)
    # with the j largest kept, θ_j = (cum_j − total)/j; the right j is the last one whose
    # smallest kept value still exceeds its θ
    j = np.arange(1, c.size + 1)
    theta = (cum - total) / j
    keep = desc > theta
    last = int(np.flatnonzero(keep)[-1]) if keep.any() else 0
    return np.asarray(np.maximum(c - theta[last], 0.0), dtype=np.float64)
