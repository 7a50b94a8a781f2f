"""Thresholdout: the reusable holdout of Dwork, Feldman, Hardt, Pitassi, Reingold & Roth."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_positive
from dpkit.accounting import Neighbouring, PureDPEvent
from dpkit.accounting._charge import charge_release
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.noise import as_finite_array, laplace, laplace_grid, rounded_sensitivity
from dpkit.random import RNGLike, as_generator
from dpkit.stats._data import object_records

__all__ = ["Thresholdout"]

FloatArray = npt.NDArray[np.float64]
Query = Callable[[Any], Any]


def _records(data: object, name: str) -> npt.NDArray[Any]:
    """The records as an array, each read as it is.

    NumPy reads a list holding one string among numbers as strings throughout, and refuses a
    list whose records differ in length: one record would change how every other record is read
    (or refuse them all). So a list that NumPy would turn into strings is read as objects, and a
    ragged one as a 1-d array of records: a query then fails on (or reads) one record alone.
    An array given as an array is taken as it is.
    """
    if data is None:
        raise DataError(f"{name} is None; pass an array of records (one per row).")
    if isinstance(data, np.ndarray):
        arr = data
    else:
        try:
            arr = np.asarray(data)
            if arr.dtype.kind in "US":
                arr = np.array(data, dtype=object)
        except (TypeError, ValueError):
            arr = object_records(data, f"{name} must be an array of records.")
    if arr.ndim == 0:
        raise DataError(f"{name} must be an array of records, one per row (or entry).")
    return arr


class Thresholdout:
    """The reusable holdout: adaptive queries answered on a holdout set, privately.

    Dwork, Feldman, Hardt, Pitassi, Reingold & Roth (2015, *Science* 349, "The reusable
    holdout"; CACM 2017), also Dwork et al. 2015: an analyst may look at the training set freely and
    ask *statistical queries* — the mean of a function of one record — about the holdout set.
    Each answer is the training set's value unless it differs from the holdout's by more than a
    noisy threshold; then (and only then) a noisy holdout value is returned and one unit of
    ``budget`` is spent:

    * T̂ = T + Lap(2σ), drawn at the start and after each over-threshold answer;
    * per query, η ~ Lap(4σ); if |E_h − E_t| > T̂ + η, answer E_h + Lap(σ), else E_t.

    When the budget is spent further queries are refused (:class:`~dpkit.errors.
    BudgetExceededError`); the analyst should then get a fresh holdout.

    Its public attributes are the price (``event``, ``epsilon``), the ``budget`` and two counts
    the answers themselves show (``queries``, ``remaining``). It keeps the holdout and the noisy
    threshold to answer, so it cannot be pickled or copied (a copy would also spend its budget
    twice): keep its answers, which are the private output.

    Privacy guarantee: the holdout is ε-DP (replace one holdout record; n_h is public) with
    ``ε = 2·budget·Δ/σ``, Δ = (high − low)/n_h (plus the grid's rounding, see
    :func:`dpkit.noise.rounded_sensitivity`): the sparse vector technique, ε₁ = Δ/σ per
    over-threshold answer for the comparison (threshold noise 2σ, query noise 4σ: Dwork & Roth
    2014, Theorem 3.23) and Δ/σ for the Laplace answer. Answers are therefore also accurate for
    the *distribution*, whatever the analyst's adaptivity (the paper's transfer theorem). All
    noise is dpkit's exact float-safe Laplace.

    Parameters
    ----------
    train, holdout : array_like
        Records, one per row (or one per entry of a 1-d array).
    threshold : float
        T, in the units of the answers (the paper's experiment: 4/√n).
    sigma : float
        σ, the Laplace scale of the answer noise (the paper's experiment: 1/√n).
    budget : int
        Number of over-threshold answers allowed (required).
    bounds : (float, float)
        Range of one record's query value; values are clipped to it. Default (0, 1).
    accountant : optional
        Charged the whole holdout cost ``event`` once, at construction.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; an int seed is reproducible and not secure.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.holdout import Thresholdout
    >>> g = np.random.default_rng(0)
    >>> train, holdout = g.random(1000), g.random(1000)
    >>> t = Thresholdout(train, holdout, threshold=0.1, sigma=0.01, budget=10, rng=0)
    >>> t.query(lambda r: r > 0.5) == float(np.mean(train > 0.5))   # the train set's answer
    True
    >>> t.remaining
    10
    """

    def __init__(
        self,
        train: object,
        holdout: object,
        *,
        threshold: float,
        sigma: float,
        budget: int,
        bounds: tuple[float, float] = (0.0, 1.0),
        accountant: Any = None,
        rng: RNGLike = None,
    ) -> None:
        self._threshold = check_positive(threshold, "threshold")
        self._sigma = check_positive(sigma, "sigma")
        if isinstance(budget, bool) or not isinstance(budget, int | np.integer) or budget < 1:
            raise PrivacyParameterError("budget must be a positive int (over-threshold answers).")
        try:
            lo, hi = (float(b) for b in bounds)
        except (TypeError, ValueError):
            raise PrivacyParameterError("bounds must be a pair (low, high).") from None
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
            raise PrivacyParameterError("bounds must be finite with low < high.")
        self._train = _records(train, "train")
        self._holdout = _records(holdout, "holdout")
        if self._holdout.shape[0] == 0:
            raise DataError("the holdout is empty; Thresholdout needs a holdout of public size.")
        self._bounds = (lo, hi)
        self._budget = int(budget)
        self._remaining = int(budget)
        self._queries = 0
        self._gen = as_generator(rng)
        sens = (hi - lo) / self._holdout.shape[0]
        grid = laplace_grid(4 * self._sigma)  # the coarsest grid of the three noises
        self._epsilon = 2 * self._budget * rounded_sensitivity(sens, grid) / self._sigma
        # Replacement of one holdout record: Δ = (high − low)/n_h takes the holdout's size as
        # public (an added record would change the size, Δ and this ε). Declared, so that an
        # accountant refuses to sum it with add/remove releases.
        self.event = PureDPEvent(epsilon=self._epsilon, neighbouring=Neighbouring.REPLACE)
        charge_release(accountant, self.event, "Thresholdout", rng=rng)
        self._noisy_threshold = self._draw_threshold()

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A Thresholdout holds the holdout set and the current noisy threshold (secret: the
        # sparse vector technique's guarantee assumes it unseen); a pickle would carry both
        # away, and a copy would fork the mechanism so that its budget could be spent twice.
        raise TypeError(
            "a Thresholdout holds its holdout set and secret state: it cannot be pickled or "
            "copied; keep the answers it gave (they are the private output), not the object."
        )

    # -- what it costs and how much is left -------------------------------------------------
    @property
    def epsilon(self) -> float:
        """ε of the holdout over the whole budget (replace-one of a holdout record)."""
        return self._epsilon

    @property
    def budget(self) -> int:
        """Over-threshold answers allowed in all."""
        return self._budget

    @property
    def remaining(self) -> int:
        """Over-threshold answers left."""
        return self._remaining

    @property
    def queries(self) -> int:
        """Queries answered so far."""
        return self._queries

    # -- answering ------------------------------------------------------------------------------
    def _draw_threshold(self) -> float:
        return float(laplace(self._threshold, 2 * self._sigma, rng=self._gen))

    def _values(self, query: Query, data: npt.NDArray[Any], vectorized: bool) -> FloatArray:
        try:
            raw = query(data) if vectorized else [query(r) for r in data]
            vals = as_finite_array(raw, "query values")
        except DataError:
            raise
        except Exception as exc:
            raise DataError(f"the query failed on a record ({type(exc).__name__}).") from None
        return vals

    def _holdout_values(self, query: Query, vectorized: bool, shape: tuple[int, ...]) -> FloatArray:
        """Per-record values on the holdout, each computed from its record alone, never failing.

        A statistical query is the mean of a function of *one* record; a vectorised query given
        all holdout records at once could make every value depend on every record (sensitivity
        far above Δ), and an error or a NaN raised by one holdout record would tell the analyst
        about that record for free. So the query sees one holdout record at a time, and a record
        on which it fails, or gives a non-finite value or the wrong shape, counts as the middle
        of ``bounds`` (still within the bounds: the sensitivity is unchanged).
        """
        lo, hi = self._bounds
        default = np.full(shape, (lo + hi) / 2)
        out = np.empty((self._holdout.shape[0], *shape))
        for i in range(self._holdout.shape[0]):
            try:
                raw = query(self._holdout[i : i + 1]) if vectorized else query(self._holdout[i])
                v = np.asarray(raw, dtype=np.float64)
                if vectorized:
                    v = v.reshape((1, *shape))[0] if v.size == default.size else default
                if v.shape != shape or not np.all(np.isfinite(v)):
                    v = default
            except Exception:  # any failure on a private record is hidden
                v = default
            out[i] = v
        return out

    def _means(self, query: Query, vectorized: bool) -> tuple[FloatArray, FloatArray]:
        lo, hi = self._bounds
        # The training set is the analyst's own: errors there are reported as they are, and
        # it fixes the shape of one record's value.
        vals = self._values(query, self._train, vectorized)
        if vals.ndim == 0 or vals.shape[0] != self._train.shape[0]:
            raise DataError("a query must give one value (or one row of values) per record.")
        shape = vals.shape[1:]
        train_mean = np.clip(vals, lo, hi).mean(axis=0) if vals.shape[0] else np.zeros(shape)
        holdout_vals = np.clip(self._holdout_values(query, vectorized, shape), lo, hi)
        return np.atleast_1d(train_mean), np.atleast_1d(holdout_vals.mean(axis=0))

    def _answer(self, train_mean: FloatArray, holdout_mean: FloatArray) -> FloatArray:
        k = train_mean.size
        if self._remaining == 0:
            raise BudgetExceededError(
                "the Thresholdout budget is spent; use a fresh holdout set.",
                requested=k,
                remaining=0,
            )
        answers = train_mean.astype(np.float64).copy()
        gaps = np.abs(holdout_mean - train_mean)
        etas = np.atleast_1d(np.asarray(laplace(np.zeros(k), 4 * self._sigma, rng=self._gen)))
        for i in range(k):
            if self._remaining == 0:  # spent within this batch: the rest is not answered
                answers[i:] = np.nan
                break
            self._queries += 1
            if float(gaps[i]) > self._noisy_threshold + float(etas[i]):
                self._remaining -= 1
                self._noisy_threshold = self._draw_threshold()
                answers[i] = float(laplace(float(holdout_mean[i]), self._sigma, rng=self._gen))
        return answers

    def query(self, query: Query, *, vectorized: bool = False) -> float:
        """Answer one statistical query: the holdout mean of ``query(record)``.

        Parameters
        ----------
        query : callable
            ``query(record) -> number``; or, with ``vectorized=True``, ``query(records) ->``
            one value per record (a vector). Values are clipped to ``bounds``. On the holdout
            the query is applied to one record at a time (a vectorised query gets one-row
            arrays), so each value depends on its own record only; a holdout record on which it
            raises, or gives a non-finite value, counts as the middle of ``bounds`` (no error
            may reveal a holdout record). Errors on the training set are raised as usual.

        Raises
        ------
        BudgetExceededError
            The budget of over-threshold answers is spent (nothing is answered).
        """
        train_mean, holdout_mean = self._means(query, vectorized)
        if train_mean.size != 1:
            raise DataError("query must give one number per record; use query_many for rows.")
        return float(self._answer(train_mean, holdout_mean)[0])

    def query_many(self, query: Query) -> FloatArray:
        """Answer k queries at once: ``query(records)`` gives an (n, k) array of per-record
        values; the k answers are given in column order, exactly as k calls to :meth:`query`.
        If the budget runs out within the batch, the queries after that point are not answered
        (NaN); a batch that starts with no budget raises :class:`~dpkit.errors.
        BudgetExceededError`.
        """
        train_mean, holdout_mean = self._means(query, True)
        return self._answer(train_mean, holdout_mean)
