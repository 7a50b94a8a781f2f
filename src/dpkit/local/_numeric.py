"""Numeric values in the local model: Duchi et al., the piecewise mechanism and the hybrid."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from dpkit._checks import check_epsilon
from dpkit._codes import unit_interval
from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Neighbouring, PureDPEvent
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local._coins import ONE, coins, exp_capped, log_up, require_bias
from dpkit.mechanisms._base import FloatArray, SupportsCharge, charge
from dpkit.mechanisms._tails import check_alpha
from dpkit.random import RNGLike, as_generator

__all__ = [
    "DuchiMean",
    "HybridMean",
    "MeanEstimate",
    "NumericRandomizer",
    "PiecewiseMean",
    "check_unit_values",
]


def check_unit_values(values: object, name: str = "values") -> FloatArray:
    """Finite floats in [−1, 1] as a 1-d array; anything else is a :class:`DataError`."""
    if values is None:
        raise DataError(f"{name} is None; pass numbers in [-1, 1].")
    raw = np.asarray(values)
    if raw.ndim == 0:
        raw = raw.reshape(1)
    if raw.ndim != 1 or raw.dtype.kind not in "iuf":
        raise DataError(f"{name} must be a 1-d array of numbers in [-1, 1].")
    x = raw.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise DataError(f"{name} contains NaN or infinite values; clean the data first.")
    if x.size and (x.min() < -1.0 or x.max() > 1.0):
        raise DataError(f"{name} must lie in [-1, 1]; rescale with the public bounds first.")
    return x


@dataclass(frozen=True)
class MeanEstimate:
    """The mean of ``n`` numeric reports, an unbiased estimate of the users' mean.

    Attributes
    ----------
    value : float
        The mean of the reports.
    variance : float
        ``s²/n`` from the reports' sample variance: unbiased for the average report variance plus
        the spread of the true values, hence slightly conservative.
    variance_bound : float
        The worst case over inputs, ``max_t Var(t) / n`` (data-independent).
    n : int
        Number of reports.
    """

    value: float
    variance: float
    variance_bound: float
    n: int

    def ci(self, alpha: float = 0.05) -> float:
        """Half-width of the normal-approximation ``1 − alpha`` interval."""
        return float(ndtri(1.0 - check_alpha(alpha) / 2.0)) * math.sqrt(self.variance)


@dataclass(frozen=True, kw_only=True)
class NumericRandomizer(ABC):
    """An ε-LDP randomizer of a value in [−1, 1] whose report is unbiased for the value."""

    name: ClassVar[str] = "numeric"
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        self._calibrate()

    @abstractmethod
    def _calibrate(self) -> None: ...

    @abstractmethod
    def _randomize(self, x: FloatArray, gen: np.random.Generator) -> FloatArray: ...

    @abstractmethod
    def variance(self, t: npt.ArrayLike) -> FloatArray:
        """Exact variance of one report of the value ``t``."""

    @abstractmethod
    def is_output(self, reports: FloatArray) -> npt.NDArray[np.bool_]:
        """Whether each value is a possible report (used to refuse foreign reports)."""

    @property
    def event(self) -> PureDPEvent:
        """The privacy cost to each user of one report: ε-DP (local model), declaring replacement
        of one user's value (the number of reports is released)."""
        # Replacement of one user's value: ε-LDP bounds any two values of one user, and the
        # batch has one report per user, so its length (the number of users) is released
        # exactly; under add/remove of a user no ε holds. Declared, so that an accountant
        # refuses to sum it with add/remove releases (a count, a mean).
        return PureDPEvent(epsilon=self.epsilon, neighbouring=Neighbouring.REPLACE)

    def randomize(
        self,
        values: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
        missing: Missing = MISSING_DEFAULT,
    ) -> FloatArray:
        """One report per user (floats on a grid fixed by ε alone), ε-LDP each.

        ``accountant`` is charged :attr:`event` once before anything is released. A value
        outside ``[−1, 1]`` (±inf included) is clamped to it: its report is the report of an
        in-range value, so the ε-LDP bound holds; never refused. A missing value (NaN, None, a
        non-number) is refused before anything is charged (revealing that one exists);
        ``missing="drop"`` is refused (a user left out would be told apart by the missing report:
        map missing values to a value in ``[−1, 1]`` first).
        """
        x = unit_interval(values, missing)
        if x.ndim != 1:
            raise DataError("values must be a 1-d array of numbers in [-1, 1].")
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        return self._randomize(x, gen)

    def estimate_mean(self, reports: object) -> MeanEstimate:
        """Unbiased estimate of the mean of the users' values (post-processing)."""
        if reports is None:
            raise DataError("reports are None; pass the reports of this randomizer.")
        y = np.asarray(reports)
        if y.ndim != 1 or y.dtype.kind != "f":
            raise DataError(f"{self.name} reports are one float per user (1-d float array).")
        if y.size == 0:
            raise DataError("no reports to estimate from; collect at least one report.")
        if not np.all(self.is_output(y)):
            raise DataError(
                f"some reports are not outputs of this {self.name} (other ε or mechanism?)."
            )
        n = int(y.size)
        s2 = float(y.var(ddof=1)) if n > 1 else float(self.variance(1.0))
        worst = float(np.max(self.variance(np.linspace(-1.0, 1.0, 201))))
        return MeanEstimate(float(y.mean()), s2 / n, worst / n, n)


def _dyadic_pair(eps: float) -> int:
    """Largest ``num`` (of 2^60) with ``num/(2^60 − num) ≤ e^ε``."""
    e = exp_capped(eps)
    num = math.floor(Fraction(e / (e + 1.0)) * ONE * (1 - 2**-50))
    while log_up(Fraction(num, ONE - num)) > eps:
        num -= max(1, num >> 48)
    require_bias(num, "Duchi et al.'s mechanism")
    return num


@dataclass(frozen=True, kw_only=True)
class DuchiMean(NumericRandomizer):
    """Duchi, Jordan and Wainwright (2018): report ``±C`` for a value ``t`` in [−1, 1].

    ``+C`` with probability ``P(t) = 1/2 + t (P₊ − 1/2)``, where ``P₊ ≤ e^ε/(e^ε + 1)`` is a
    multiple of 2^-60 with ``P₊/(1 − P₊) ≤ e^ε``; every ``P(t)`` lies in ``[1 − P₊, P₊]``, so
    the report is ε-LDP. ``C = 1/(2P₊ − 1) ≈ (e^ε + 1)/(e^ε − 1)`` makes it unbiased, with
    variance ``C² − t²`` (Wang et al. 2019, §III-A). ``P(t)`` is rounded down to a multiple of
    2^-60 (through a float, so within 2^-52 of its value) for the exact coin: a bias below
    ``C·2^-51``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import DuchiMean
    >>> m = DuchiMean(epsilon=1.0)
    >>> est = m.estimate_mean(m.randomize(np.full(20_000, 0.3), rng=0))
    >>> bool(abs(est.value - 0.3) < 4 * np.sqrt(est.variance))
    True
    """

    name: ClassVar[str] = "Duchi"
    C: float = field(init=False)
    _num: int = field(init=False, repr=False)

    def _calibrate(self) -> None:
        num = _dyadic_pair(self.epsilon)
        object.__setattr__(self, "_num", num)
        object.__setattr__(self, "C", float(1 / (2 * Fraction(num, ONE) - 1)))

    def _randomize(self, x: FloatArray, gen: np.random.Generator) -> FloatArray:
        lo, hi = ONE - self._num, self._num
        # P(t)·2^60 = lo + ⌊(t + 1)/2 · (hi − lo)⌋, clipped in integers: never outside
        # [lo, hi], whatever the float rounding (that range is the privacy bound)
        step = np.floor((x + 1.0) / 2.0 * float(hi - lo)).astype(np.int64)
        nums = lo + np.clip(step, 0, hi - lo)
        u = gen.integers(0, ONE, size=x.size, dtype=np.int64)
        return np.where(u < nums, self.C, -self.C)

    def variance(self, t: npt.ArrayLike) -> FloatArray:
        tt = np.asarray(t, dtype=np.float64)
        return np.asarray(self.C**2 - tt**2, dtype=np.float64)

    def is_output(self, reports: FloatArray) -> npt.NDArray[np.bool_]:
        return np.asarray(np.abs(reports) == self.C)


@dataclass(frozen=True, kw_only=True)
class PiecewiseMean(NumericRandomizer):
    """The piecewise mechanism (Wang et al. 2019, §III-B) on a grid of ``cells`` outputs.

    The output range ``[−C, C]`` is cut into ``N = cells`` equal cells (centres are the
    reports); a window of ``m ≈ N/(e^{ε/2} + 1)`` cells around the value is chosen with total
    probability ``P_in = m e^ε/(m e^ε + N − m)`` (a multiple of 2^-60), the other cells share
    the rest: every cell has probability ``P_in/m`` or ``(1 − P_in)/(N − m)``, a ratio of at most
    ``e^ε``, so each report is ε-LDP whatever the window. The window's start moves linearly
    with the value, randomly rounded between neighbouring cells, and ``C`` is set so that the
    report is unbiased (to within 2^-50 of a cell); as ``N`` grows this is the continuous
    mechanism with ``C = (e^{ε/2} + 1)/(e^{ε/2} − 1)``. :meth:`variance` is this grid version's
    exact variance; the continuous one is ``t²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import PiecewiseMean
    >>> m = PiecewiseMean(epsilon=2.0)
    >>> est = m.estimate_mean(m.randomize(np.full(20_000, -0.5), rng=0))
    >>> bool(abs(est.value + 0.5) < 4 * np.sqrt(est.variance))
    True
    """

    name: ClassVar[str] = "Piecewise"
    cells: int = 1 << 20
    C: float = field(init=False)
    m: int = field(init=False)
    _p_num: int = field(init=False, repr=False)
    _kappa: float = field(init=False, repr=False)

    def _calibrate(self) -> None:
        n_cells = self.cells
        if isinstance(n_cells, bool) or not isinstance(n_cells, int) or not 8 <= n_cells <= 2**40:
            raise PrivacyParameterError(f"cells must be an int in [8, 2^40], got {n_cells!r}.")
        eps = self.epsilon
        m = min(n_cells - 2, max(1, round(n_cells / (exp_capped(eps / 2) + 1.0))))
        e = exp_capped(eps)
        p_num = math.floor(Fraction(m * e / (m * e + n_cells - m)) * ONE * (1 - 2**-50))
        while log_up(Fraction(p_num * (n_cells - m), (ONE - p_num) * m)) > eps:
            p_num -= max(1, p_num >> 48)
        p_in = Fraction(p_num, ONE)
        kappa = float(p_in - (1 - p_in) * Fraction(m, n_cells - m))
        if kappa <= 0:  # pragma: no cover - m < N/2 for every ε > 0
            raise PrivacyParameterError("epsilon too small for the piecewise mechanism.")
        object.__setattr__(self, "m", m)
        object.__setattr__(self, "_p_num", p_num)
        object.__setattr__(self, "_kappa", kappa)
        object.__setattr__(self, "C", 1.0 / (kappa * (1.0 - m / n_cells)))

    @property
    def _h(self) -> float:
        return 2.0 * self.C / self.cells

    def _start(self, t: FloatArray) -> FloatArray:
        # window mean = t/κ  ⇔  start s = (t/κ + C)/h − m/2, within [0, N − m] for t ∈ [−1, 1]
        s = (t / self._kappa + self.C) / self._h - self.m / 2.0
        return np.asarray(np.clip(s, 0.0, self.cells - self.m), dtype=np.float64)

    def _randomize(self, x: FloatArray, gen: np.random.Generator) -> FloatArray:
        n, big, m = x.size, self.cells, self.m
        s = self._start(x)
        base = np.floor(s)
        frac = np.floor((s - base) * ONE).astype(np.int64)  # compare integers, not floats
        up = gen.integers(0, ONE, size=n, dtype=np.int64) < frac
        start = base.astype(np.int64) + up
        inside = coins(gen, self._p_num, n)
        j_in = start + gen.integers(0, m, size=n, dtype=np.int64)
        u = gen.integers(0, big - m, size=n, dtype=np.int64)
        j_out = np.where(u < start, u, u + m)
        j = np.where(inside, j_in, j_out)
        return -self.C + (j + 0.5) * self._h

    def variance(self, t: npt.ArrayLike) -> FloatArray:
        tt = np.asarray(t, dtype=np.float64)
        big, m, h, c = self.cells, self.m, self._h, self.C
        p_in = self._p_num / ONE
        total_sq = h * h * big * (big * big - 1) / 12.0  # Σ of squared centres
        s = self._start(tt)
        lo = np.floor(s)
        frac = s - lo

        def window_sq(start: FloatArray) -> FloatArray:
            # Σ_{i<m} (−C + (start + i + 1/2) h)² in closed form
            a = -c + (start + 0.5) * h
            return np.asarray(
                m * a * a + a * h * m * (m - 1) + h * h * (m - 1) * m * (2 * m - 1) / 6.0,
                dtype=np.float64,
            )

        def second_moment(start: FloatArray) -> FloatArray:
            w = window_sq(start)
            return np.asarray(p_in * w / m + (1 - p_in) * (total_sq - w) / (big - m))

        ey2 = (1 - frac) * second_moment(lo) + frac * second_moment(lo + 1)
        return np.asarray(ey2 - tt * tt, dtype=np.float64)

    def is_output(self, reports: FloatArray) -> npt.NDArray[np.bool_]:
        j = (reports + self.C) / self._h - 0.5
        return np.asarray((np.abs(j - np.rint(j)) < 1e-6) & (j > -0.5) & (j < self.cells - 0.5))


@dataclass(frozen=True, kw_only=True)
class HybridMean(NumericRandomizer):
    """The hybrid mechanism (Wang et al. 2019, §III-C): piecewise with probability
    ``α = 1 − e^{−ε/2}`` when ``ε > 0.61``, else Duchi et al.'s.

    Both parts are ε-LDP and unbiased, so the mixture is too; its worst-case variance is below
    either part's. Reports are either ``±C_Duchi`` or a piecewise grid centre; the choice of
    part uses an exact coin (``α`` rounded to a multiple of 2^-60: any mixture is ε-LDP).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.local import HybridMean
    >>> m = HybridMean(epsilon=2.0)
    >>> est = m.estimate_mean(m.randomize(np.linspace(-1, 1, 20_001), rng=0))
    >>> bool(abs(est.value) < 4 * np.sqrt(est.variance))
    True
    """

    name: ClassVar[str] = "Hybrid"
    cells: int = 1 << 20
    alpha: float = field(init=False)
    _duchi: DuchiMean = field(init=False, repr=False)
    _pm: PiecewiseMean = field(init=False, repr=False)
    _a_num: int = field(init=False, repr=False)

    def _calibrate(self) -> None:
        eps = self.epsilon
        a_num = math.floor((1.0 - math.exp(-eps / 2.0)) * ONE) if eps > 0.61 else 0
        object.__setattr__(self, "_a_num", a_num)
        object.__setattr__(self, "alpha", a_num / ONE)
        object.__setattr__(self, "_duchi", DuchiMean(epsilon=eps))
        object.__setattr__(self, "_pm", PiecewiseMean(epsilon=eps, cells=self.cells))

    def _randomize(self, x: FloatArray, gen: np.random.Generator) -> FloatArray:
        use_pm = coins(gen, self._a_num, x.size) if self._a_num else np.zeros(x.size, bool)
        out = self._duchi._randomize(x, gen)
        if use_pm.any():
            out[use_pm] = self._pm._randomize(x[use_pm], gen)
        return out

    def variance(self, t: npt.ArrayLike) -> FloatArray:
        a = self.alpha
        return np.asarray(a * self._pm.variance(t) + (1 - a) * self._duchi.variance(t))

    def is_output(self, reports: FloatArray) -> npt.NDArray[np.bool_]:
        return self._duchi.is_output(reports) | self._pm.is_output(reports)
