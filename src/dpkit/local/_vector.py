"""Mean of d-dimensional vectors in the local model, by sampling coordinates."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from dpkit._checks import check_epsilon
from dpkit._codes import unit_interval
from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Neighbouring, PureDPEvent
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local._numeric import HybridMean, NumericRandomizer
from dpkit.mechanisms._base import FloatArray, IntArray, SupportsCharge, charge
from dpkit.mechanisms._tails import check_alpha
from dpkit.random import RNGLike, as_generator

__all__ = ["VectorMean", "VectorMeanEstimate", "VectorReports"]


@dataclass(frozen=True, eq=False)
class VectorReports:
    """Reports of :class:`VectorMean`: for each user, ``k`` coordinates and their reports.

    ``indices`` is an ``(n, k)`` int array of distinct coordinates in ``0..d−1``; ``values`` the
    ``(n, k)`` float reports of the base randomizer for those coordinates (not yet scaled).
    """

    indices: IntArray
    values: FloatArray

    def __len__(self) -> int:
        return int(self.indices.shape[0])


@dataclass(frozen=True)
class VectorMeanEstimate:
    """Unbiased per-coordinate means with variances estimated from the reports."""

    value: FloatArray
    variance: FloatArray
    n: int

    def ci(self, alpha: float = 0.05) -> FloatArray:
        """Half-widths of the normal-approximation ``1 − alpha`` intervals."""
        z = float(ndtri(1.0 - check_alpha(alpha) / 2.0))
        return np.asarray(z * np.sqrt(self.variance), dtype=np.float64)


@dataclass(frozen=True, kw_only=True)
class VectorMean:
    """ε-LDP mean of vectors in ``[−1, 1]^d`` (Wang et al. 2019, Algorithm 4).

    Each user samples ``k = max(1, min(d, ⌊ε/2.5⌋))`` coordinates uniformly without replacement
    and reports each through the one-dimensional randomizer at ``ε/k`` (the hybrid by default);
    by basic composition the report is ε-LDP. The server scales each report by ``d/k``, which
    makes every coordinate's mean unbiased; the variance of one user's contribution to
    coordinate ``j`` is ``(d/k)(Var(t_j) + t_j²) − t_j²``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import VectorMean
    >>> vm = VectorMean(epsilon=4.0, d=5)
    >>> vm.k
    1
    >>> x = np.tile([0.5, -0.5, 0.0, 0.9, -0.9], (40_000, 1))
    >>> est = vm.estimate_mean(vm.randomize(x, rng=0))
    >>> bool(np.all(np.abs(est.value - x[0]) < 5 * np.sqrt(est.variance)))
    True
    """

    epsilon: float
    d: int
    base: type[NumericRandomizer] = HybridMean
    k: int = field(init=False)
    _one: NumericRandomizer = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        d = self.d
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or not 1 <= d <= 2**20:
            raise PrivacyParameterError(f"d (dimension) must be an int in [1, 2^20], got {d!r}.")
        if not (isinstance(self.base, type) and issubclass(self.base, NumericRandomizer)):
            raise PrivacyParameterError("base must be DuchiMean, PiecewiseMean or HybridMean.")
        k = max(1, min(int(d), math.floor(eps / 2.5)))
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "d", int(d))
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "_one", self.base(epsilon=eps / k))

    @property
    def event(self) -> PureDPEvent:
        """The privacy cost to each user of one report: ε-DP (local model), declaring replacement
        of one user's value (the number of reports is released)."""
        # replacement of one user's value: one report per user (see local/_numeric.py)
        return PureDPEvent(epsilon=self.epsilon, neighbouring=Neighbouring.REPLACE)

    def randomize(
        self,
        values: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
        missing: Missing = MISSING_DEFAULT,
    ) -> VectorReports:
        """One report per user (row of ``values``, shape ``(n, d)``).

        Each coordinate outside ``[−1, 1]`` (±inf included) is clamped to it, so every report
        is one of an in-domain vector and the ε-LDP bound holds; never refused. A row with a
        missing value (NaN, None) is refused before anything is charged; ``missing="drop"`` is
        refused (a user left out would be told apart by the missing report).
        """
        if values is None:
            raise DataError("values is None; pass an (n, d) array in [-1, 1].")
        shape = np.shape(cast(Any, values))
        if len(shape) != 2 or shape[1] != self.d:
            raise DataError(f"values must have shape (n, {self.d}), got {shape}.")
        x = unit_interval(values, missing)
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        n = int(x.shape[0])
        idx = gen.permuted(np.broadcast_to(np.arange(self.d), (n, self.d)), axis=1)[:, : self.k]
        picked = np.take_along_axis(x, idx, axis=1)
        reports = self._one._randomize(picked.reshape(-1), gen).reshape(n, self.k)
        return VectorReports(idx.astype(np.int64), reports)

    def variance(self, t: npt.ArrayLike) -> FloatArray:
        """Exact variance of one user's contribution to each coordinate, for the vector ``t``."""
        tt = np.asarray(t, dtype=np.float64)
        scale = self.d / self.k
        return np.asarray(scale * (self._one.variance(tt) + tt * tt) - tt * tt, dtype=np.float64)

    def estimate_mean(self, reports: VectorReports) -> VectorMeanEstimate:
        """Unbiased mean of each coordinate (post-processing)."""
        if not isinstance(reports, VectorReports):
            raise DataError("reports must be the VectorReports of VectorMean.randomize.")
        idx, val = np.asarray(reports.indices), np.asarray(reports.values)
        n = int(idx.shape[0])
        if n == 0:
            raise DataError("no reports to estimate from; collect at least one report.")
        if idx.shape != (n, self.k) or val.shape != (n, self.k) or idx.dtype.kind not in "iu":
            raise DataError(f"reports must hold (n, {self.k}) indices and values.")
        if (
            idx.min() < 0
            or idx.max() >= self.d
            or np.any(np.sort(idx, axis=1)[:, 1:] == np.sort(idx, axis=1)[:, :-1])
        ):
            raise DataError(f"report indices must be distinct coordinates in 0..{self.d - 1}.")
        if not np.all(self._one.is_output(val.reshape(-1))):
            raise DataError("some reports are not outputs of this randomizer (other ε?).")
        scale = self.d / self.k
        contrib = np.zeros((n, self.d))
        np.put_along_axis(contrib, idx, val * scale, axis=1)
        mean = contrib.mean(axis=0)
        var = contrib.var(axis=0, ddof=1) / n if n > 1 else np.full(self.d, np.inf)
        return VectorMeanEstimate(mean, var, n)
