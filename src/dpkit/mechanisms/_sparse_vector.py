"""The sparse vector technique (AboveThreshold), float-safe and stateful."""

from __future__ import annotations

import math
import numbers
import threading

import numpy as np

from dpkit._checks import check_epsilon, check_positive
from dpkit.accounting import PureDPEvent
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.mechanisms._base import (
    SupportsCharge,
    charge,
    check_float_value,
    check_integer_parameter,
)
from dpkit.noise import check_laplace_scale, laplace, laplace_grid, rounded_sensitivity
from dpkit.random import RNGLike, as_generator, seeded_generator

__all__ = ["SparseVector"]


class SparseVector:
    """AboveThreshold / sparse vector: answer "is this query above the threshold?" many times.

    Answers a stream of queries ``q_1, q_2, …`` (each of sensitivity Δ) with a bit each — is
    ``q_i`` above ``threshold``? — paying ε **once** for the whole stream, however many queries
    fall below, and stopping after ``max_above = c`` positive answers. This is Algorithm 1 of
    Lyu, Su and Li (2017) (AboveThreshold of Dwork and Roth 2014, Alg. 1, for c = 1):

    * the threshold gets noise ``ρ ~ Lap(Δ/ε₁)`` once, drawn at the first query;
    * each query gets fresh noise ``ν_i ~ Lap(2cΔ/ε₂)`` (``Lap(cΔ/ε₂)`` when ``monotonic``) and
      the answer is ``q_i + ν_i ≥ threshold + ρ``;
    * after c positive answers the instance refuses further queries
      (:class:`~dpkit.errors.BudgetExceededError`); build a new one, and pay again, to go on.

    Budget rules: ε = ε₁ + ε₂ covers any number of negative answers and up to c positive ones;
    the split is Lyu–Su–Li's optimum ε₁ : ε₂ = 1 : (2c)^{2/3} (1 : c^{2/3} when monotonic).
    Only the bits are released, never the noisy values (releasing them would cost more). The
    ``monotonic`` flag is valid only if, between any two neighbours, all queries move in the same
    direction (e.g. counting queries under add/remove).

    Float-safe: the threshold and the queries are rounded to one grid ``2**grid`` and exact
    discrete Laplace noise is added on it (:func:`dpkit.noise.laplace`), so each comparison is
    exact; the sensitivity is raised by ``2**grid`` to pay for the rounding.

    Parameters
    ----------
    epsilon : float
        Total ε > 0 of the whole run.
    threshold : float
        The public threshold T.
    sensitivity : float
        Δ > 0 of each query.
    max_above : int
        c ≥ 1, how many positive answers the instance gives before stopping.
    monotonic : bool
        See above.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.mechanisms import SparseVector
    >>> sv = SparseVector(epsilon=1.0, threshold=100.0, max_above=1)
    >>> sv.run([3.0, 10.0, 250.0, 400.0], rng=np.random.default_rng(0))
    [False, False, True]
    >>> sv.halted
    True
    """

    __slots__ = (
        "_above",
        "_accountant",
        "_calls",
        "_grid",
        "_lock",
        "_noisy_threshold",
        "_started",
        "epsilon",
        "epsilon_queries",
        "epsilon_threshold",
        "event",
        "max_above",
        "monotonic",
        "query_scale",
        "sensitivity",
        "threshold",
        "threshold_scale",
    )

    def __init__(
        self,
        *,
        epsilon: float,
        threshold: float,
        sensitivity: float = 1.0,
        max_above: int = 1,
        monotonic: bool = False,
    ) -> None:
        eps = check_epsilon(epsilon)
        sens = check_positive(sensitivity, "sensitivity")
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or not math.isfinite(threshold)
        ):
            raise PrivacyParameterError(f"threshold must be a finite number, got {threshold!r}.")
        c = check_integer_parameter(max_above, "max_above")
        if not isinstance(monotonic, bool):
            raise PrivacyParameterError(f"monotonic must be True or False, got {monotonic!r}.")
        ratio = (float(c) if monotonic else 2.0 * c) ** (2.0 / 3.0)
        eps1 = eps / (1.0 + ratio)
        eps2 = eps - eps1
        factor = c if monotonic else 2 * c
        # grid from min(Δ, scales) and coarse enough for the larger scale to be sampled exactly;
        # an ε too small for that is refused here, before the first query charges
        grid = laplace_grid(max(sens / eps1, factor * sens / eps2), sensitivity=sens)
        rounded = rounded_sensitivity(sens, grid)
        self.epsilon = eps
        self.sensitivity = sens
        self.threshold = float(threshold)
        self.max_above = c
        self.monotonic = monotonic
        self.epsilon_threshold = eps1
        self.epsilon_queries = eps2
        self.threshold_scale = math.nextafter(rounded / eps1, math.inf)
        self.query_scale = math.nextafter(factor * rounded / eps2, math.inf)
        check_laplace_scale(self.threshold_scale, grid)
        check_laplace_scale(self.query_scale, grid)
        # relation: none declared, the utility's sensitivity is the caller's (its relation's)
        self.event = PureDPEvent(epsilon=eps)
        self._grid = grid
        self._lock = threading.Lock()
        self._noisy_threshold: float | None = None
        self._above = 0
        self._started = False  # the first query fixes the accountant (or none) for the run
        self._accountant: SupportsCharge | None = None
        self._calls = 0

    def __repr__(self) -> str:
        return (
            f"SparseVector(epsilon={self.epsilon!r}, threshold={self.threshold!r}, "
            f"sensitivity={self.sensitivity!r}, max_above={self.max_above!r}, "
            f"monotonic={self.monotonic!r})"
        )

    @property
    def delta(self) -> float:
        """Always 0: the sparse vector technique is pure ε-DP."""
        return 0.0

    @property
    def remaining(self) -> int:
        """How many more positive answers this instance may give."""
        return self.max_above - self._above

    @property
    def halted(self) -> bool:
        """Whether the instance has given ``max_above`` positive answers and refuses more."""
        return self._above >= self.max_above

    def _refuse(self) -> BudgetExceededError:
        return BudgetExceededError(
            f"this SparseVector has given its {self.max_above} positive answer(s) and stopped; "
            "build a new one (paying ε again) to keep testing.",
            requested="another query",
            remaining="no positive answers",
        )

    def _generator(self, rng: RNGLike) -> np.random.Generator:
        # An int seed given again at a later call would restart the same stream: the same noise
        # on every query, so that free "below" answers could pin a value down exactly. Call k
        # draws from the k-th stream derived from the seed instead (reproducible, never replayed).
        gen = as_generator(rng)
        if isinstance(rng, numbers.Integral) and not isinstance(rng, bool) and self._calls:
            gen = seeded_generator(int(rng), stream=self._calls)
        self._calls += 1
        return gen

    def _answers(
        self,
        values: list[float],
        rng: RNGLike,
        accountant: SupportsCharge | None,
        label: str | None,
    ) -> list[bool]:
        with self._lock:
            if self.halted:
                raise self._refuse()
            gen = self._generator(rng)
            if not self._started:
                charge(accountant, self.event, label, rng=rng)  # before anything is released
                self._started, self._accountant = True, accountant
            elif accountant is not None and accountant is not self._accountant:
                raise PrivacyParameterError(
                    "this SparseVector's run was charged (or not) at its first query; later "
                    "queries cannot move it to another accountant. Pass the same accountant to "
                    "every query, or start a new SparseVector."
                )
            if self._noisy_threshold is None:
                t = laplace(self.threshold, self.threshold_scale, grid=self._grid, rng=gen)
                self._noisy_threshold = float(t)
            # one vectorised draw; noise for queries after the stop is discarded unseen
            noisy = np.atleast_1d(
                laplace(np.asarray(values), self.query_scale, grid=self._grid, rng=gen)
            )
            out: list[bool] = []
            for v in noisy:
                above = bool(v >= self._noisy_threshold)
                out.append(above)
                if above:
                    self._above += 1
                    if self.halted:
                        break
            return out

    def test(
        self,
        value: float,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> bool:
        """Is the query answer ``value`` (computed on the data) above the threshold?

        The whole run is charged ``self.event`` once, at the first query (pass ``accountant``
        there). An int seed is reproducible: the k-th call draws from the k-th stream derived from
        it (:func:`dpkit.random.seeded_generator`), so calls never replay each other's noise.
        """
        x = float(check_float_value(value, ()))
        return self._answers([x], rng, accountant, label)[0]

    def run(
        self,
        values: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> list[bool]:
        """Test ``values`` in order, stopping after the ``max_above``-th positive answer.

        All values are checked before anything is released. Returns one bit per query answered
        (shorter than ``values`` if the instance stopped).
        """
        if values is None:
            raise DataError("values is None; pass a sequence of query answers.")
        try:
            items = [float(check_float_value(v, ())) for v in values]  # type: ignore[attr-defined]
        except TypeError:
            raise DataError("values must be a sequence of numbers.") from None
        if not items:
            raise DataError("values is empty; pass at least one query answer.")
        return self._answers(items, rng, accountant, label)
