"""What every frequency oracle shares: checks, tags, the pure-protocol estimator, aggregation."""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from dpkit._checks import check_epsilon
from dpkit._codes import category_codes
from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Neighbouring, PureDPEvent
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local._coins import log_up
from dpkit.local._estimate import FrequencyEstimate
from dpkit.local._reports import Reports
from dpkit.local._spark import is_spark, spark_support_counts
from dpkit.mechanisms._base import IntArray, SupportsCharge, charge
from dpkit.mechanisms._tails import check_alpha
from dpkit.random import RNGLike, as_generator

__all__ = ["Aggregator", "FrequencyOracle", "check_domain_values", "pure_variance"]

MAX_K = 2**30
"""Largest domain size; every protocol's arithmetic stays exact in int64 below it."""


def pure_variance(
    n: int, n_v: npt.ArrayLike, p: Fraction | float, q: Fraction | float
) -> npt.NDArray[np.float64]:
    """Exact variance of the count estimate ``(C_v − n q)/(p − q)`` of a pure protocol.

    A user holding ``v`` supports ``v`` with probability ``p``, any other user with probability
    ``q``, independently across users, so ``Var C_v = n_v p(1−p) + (n − n_v) q(1−q)`` (Wang,
    Blocki, Li and Jha 2017, "Locally Differentially Private Protocols for Frequency
    Estimation", Eq. (2) in counts: ``n q(1−q)/(p−q)² + n_v (1−p−q)/(p−q)``).
    """
    pf, qf = float(p), float(q)
    nv = np.asarray(n_v, dtype=np.float64)
    return np.asarray(
        (nv * pf * (1 - pf) + (n - nv) * qf * (1 - qf)) / (pf - qf) ** 2, dtype=np.float64
    )


def check_domain_values(values: object, k: int, name: str = "values") -> IntArray:
    """Integers in ``0..k−1`` as a 1-d int64 array; anything else is a :class:`DataError`."""
    if values is None:
        raise DataError(f"{name} is None; pass integers coded 0..k-1.")
    raw = np.asarray(values)
    if raw.ndim == 0:
        raw = raw.reshape(1)
    if raw.ndim != 1:
        raise DataError(f"{name} must be one-dimensional (one value per user), got {raw.ndim}-d.")
    if raw.dtype.kind not in "biuf" or raw.dtype.kind == "b":
        raise DataError(f"{name} must hold integer codes 0..{k - 1}, got dtype {raw.dtype}.")
    if raw.dtype.kind == "f" and not np.all(np.isfinite(raw) & (raw == np.rint(raw))):
        raise DataError(f"{name} must hold integer codes (no NaN, inf or fractions).")
    if raw.size and (raw.min() < 0 or raw.max() >= k):  # two reductions, no temporaries
        raise DataError(f"{name} must lie in the domain 0..{k - 1} (k={k}).")
    return raw.astype(np.int64, copy=False)


@dataclass(frozen=True, kw_only=True)
class FrequencyOracle(ABC):
    """A local-model frequency oracle over the domain ``{0, …, k − 1}``.

    The client half (:meth:`randomize`) maps each user's value to a report and is ε-LDP: for any
    two values and any report, the report's probabilities differ by a factor of at most ``e^ε``.
    The server half (:meth:`estimate`, :meth:`aggregator`) only post-processes reports. The two
    share nothing but the public parameters (the object itself holds no data or state).

    Every protocol here is *pure* (Wang et al. 2017): a report supports a set of values; a user
    holding ``v`` supports ``v`` with probability :attr:`p`, any other user with probability
    :attr:`q`. ``p`` and ``q`` are exact rationals, the coins that realise them are exact, and
    the likelihood ratio they give is at most ``e^ε`` exactly (rounded in the safe direction).
    """

    name: ClassVar[str] = "oracle"
    epsilon: float
    k: int
    p: Fraction = field(init=False, repr=False)
    q: Fraction = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        k = self.k
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 2 <= k <= MAX_K:
            raise PrivacyParameterError(f"k (domain size) must be an int in [2, 2^30], got {k!r}.")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "k", int(k))
        p, q, ratio = self._calibrate()
        if not p > q or log_up(ratio) > eps:  # pragma: no cover - calibration guarantees this
            raise PrivacyParameterError(f"{self.name} could not be calibrated to epsilon={eps}.")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)

    # --- what each protocol defines -------------------------------------------------------
    @abstractmethod
    def _calibrate(self) -> tuple[Fraction, Fraction, Fraction]:
        """Set protocol parameters; return exact ``(p, q, worst likelihood ratio)``."""

    @abstractmethod
    def _randomize(self, x: IntArray, gen: np.random.Generator) -> npt.NDArray[Any]:
        """Reports for validated values ``x``."""

    @abstractmethod
    def _validate(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Check raw report values (shape, dtype, range); return them in canonical form."""

    @abstractmethod
    def _support(self, values: npt.NDArray[Any]) -> IntArray:
        """``C_v`` for every ``v``: how many of these (valid) reports support ``v``."""

    @property
    @abstractmethod
    def message_bits(self) -> int:
        """Bits a client sends per report (the communication cost)."""

    def _params(self) -> str:
        return ""

    # --- public API -------------------------------------------------------------------------
    @property
    def tag(self) -> str:
        """The protocol and every public parameter, carried by each :class:`Reports`."""
        extra = self._params()
        return f"{self.name}(k={self.k}, p={self.p}, q={self.q}{', ' + extra if extra else ''})"

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
    ) -> Reports:
        """Each user's report: what runs on each device (vectorised to simulate many users).

        Parameters
        ----------
        values : array_like of int
            One value per user, coded ``0..k−1``. A value that is not a code of the domain
            (a negative or too large integer, a fraction, ±inf) is reported as the last code,
            ``k − 1``: its report is the report of that declared value, so the ε-LDP bound over
            every pair of inputs holds (reserve ``k − 1`` for "other" where such values occur).
            Never refused: whether a call succeeds must not depend on a value.
        rng : None, int or numpy.random.Generator
            ``None`` (default) is secure; an int seed is reproducible and not secure.
        accountant : optional
            Charged :attr:`event` once, before anything is released: each user's report depends
            only on their own value, so the batch costs each user ε (parallel composition).
        label : str, optional
            Recorded with the charge.
        missing : {"raise"}
            A missing value (NaN, None), which no code can hold, is refused before anything is
            charged (the refusal reveals that one exists). ``"drop"`` is refused: a user left
            out (no report) would be told apart from every other value with certainty, while
            the reports hold under replacement of one user's value; map missing values to a
            code first (e.g. the catch-all ``k − 1``).
        """
        x = category_codes(values, self.k, missing)
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        return Reports(self.tag, self._randomize(x, gen))

    def randomize_one(self, value: int, *, rng: RNGLike = None) -> Any:
        """One user's report as plain Python values (an int or a list of ints).

        A value outside ``0..k−1`` is reported as ``k − 1`` (see :meth:`randomize`); a missing
        one is refused.
        """
        x = category_codes([value], self.k, "raise", "value")
        out: Any = self._randomize(x, as_generator(rng))[0]
        return out.tolist()

    def reports(self, values: object) -> Reports:
        """Check reports produced elsewhere (another client) and tag them for this protocol."""
        if values is None:
            raise DataError("reports are None; pass an array in this protocol's report format.")
        try:
            raw = np.asarray(values)
        except ValueError:
            raise DataError("reports must form a rectangular array of integers.") from None
        if raw.dtype.kind not in "biu":
            raise DataError(f"{self.name} reports must be integers, got dtype {raw.dtype}.")
        return Reports(self.tag, self._validate(raw))

    def support_counts(self, reports: Reports | object) -> tuple[IntArray, int]:
        """``(C, n)``: how many reports support each value, and how many reports there are.

        ``reports`` may be a PySpark DataFrame of one column (an integer, or an array of
        integers, per report): the executors check and count them with this protocol's code and
        the driver adds their integer counts (:mod:`dpkit.local._spark`); the result is the same.
        """
        if is_spark(reports):
            return spark_support_counts(self, reports)
        if isinstance(reports, Reports):
            if reports.protocol != self.tag:
                raise DataError(
                    f"these reports were made by {reports.protocol!r}, not by this aggregator's "
                    f"{self.tag!r}; aggregate each protocol and parameter set separately."
                )
            # the same checks as untagged reports: a tagged batch may come from JSON
            # (Reports.from_dict), where 1.5 would otherwise be truncated to a valid 1
            values = self.reports(reports.values).values
        else:
            values = self.reports(reports).values
        n = int(values.shape[0])
        if n == 0:
            return np.zeros(self.k, dtype=np.int64), 0
        return self._support(values), n

    def estimate(self, reports: Reports | object) -> FrequencyEstimate:
        """Unbiased count of each value from the reports, with its variance (post-processing).

        Raises
        ------
        DataError
            If the reports are empty, malformed, or tagged by another protocol or parameter set.
        """
        counts, n = self.support_counts(reports)
        return self.estimate_from_counts(counts, n)

    def estimate_from_counts(self, support: npt.ArrayLike, n: int) -> FrequencyEstimate:
        """The estimate from aggregated support counts ``C_v`` of ``n`` reports."""
        if n <= 0:
            raise DataError("no reports to estimate from; collect at least one report.")
        c = np.asarray(support, dtype=np.float64)
        if c.shape != (self.k,):
            raise DataError(f"support counts must have shape ({self.k},), got {c.shape}.")
        pf, qf = float(self.p), float(self.q)
        est = (c - n * qf) / (pf - qf)
        var = pure_variance(n, np.clip(est, 0.0, n), self.p, self.q)
        var0 = float(pure_variance(n, 0.0, self.p, self.q))
        return FrequencyEstimate(est, var, var0, n, self.tag)

    def variance(self, n: int, true_counts: npt.ArrayLike = 0) -> npt.NDArray[np.float64]:
        """Exact variance of the count estimate of a value that ``true_counts`` of ``n`` hold."""
        return pure_variance(n, true_counts, self.p, self.q)

    def accuracy(self, n: int, alpha: float = 0.05, *, true_counts: npt.ArrayLike = 0) -> Any:
        """Before any report: the half-width of the ``1 − alpha`` interval of a value's count
        estimate from ``n`` reports (a public number), for a value that ``true_counts`` of them
        hold (default 0: every rare value, Wang et al.'s ``Var*``). The normal approximation
        that :meth:`FrequencyEstimate.ci <dpkit.local.FrequencyEstimate.ci>` uses, at the exact
        variance instead of its plug-in estimate.

        >>> from dpkit.local import OUE
        >>> round(float(OUE(epsilon=1.0, k=8).accuracy(10_000)), 1)
        376.1
        """
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 1:
            raise PrivacyParameterError("n must be a positive int: the public number of reports.")
        z = float(ndtri(1.0 - check_alpha(alpha) / 2.0))
        width = z * np.sqrt(pure_variance(int(n), true_counts, self.p, self.q))
        return float(width) if np.ndim(width) == 0 else np.asarray(width, dtype=np.float64)

    def aggregator(self) -> Aggregator:
        """A server-side accumulator: add report batches as they arrive, estimate at the end."""
        return Aggregator(self)


class Aggregator:
    """Accumulates support counts of report batches for one protocol (the server's only state).

    Examples
    --------
    >>> from dpkit.local import OUE
    >>> oue = OUE(epsilon=1.0, k=8)
    >>> agg = oue.aggregator()
    >>> for seed in range(3):
    ...     agg.add(oue.randomize([1] * 1000, rng=seed))
    >>> agg.n
    3000
    >>> est = agg.estimate()
    >>> bool(abs(est.counts[1] - 3000) < 4 * est.ci()[1] / 1.96)
    True
    """

    def __init__(self, oracle: FrequencyOracle) -> None:
        self.oracle = oracle
        self.n = 0
        self._support = np.zeros(oracle.k, dtype=np.int64)

    def add(self, reports: Reports | object) -> None:
        """Add a batch (checked first: a bad batch changes nothing)."""
        counts, n = self.oracle.support_counts(reports)
        self._support += counts
        self.n += n

    def estimate(self) -> FrequencyEstimate:
        """The estimate from everything added so far."""
        return self.oracle.estimate_from_counts(self._support, self.n)
