"""Randomized response (Warner 1965) in the local model: binary and k-ary, with its estimator."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np
from scipy.special import ndtri

from dpkit._checks import check_epsilon, exact_fraction
from dpkit._codes import category_codes
from dpkit._messages import dtype_name
from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Neighbouring, RandomizedResponseEvent
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import FloatArray, IntArray, SupportsCharge, charge
from dpkit.mechanisms._tails import check_alpha
from dpkit.random import RNGLike, as_generator

__all__ = ["ProportionEstimate", "RandomizedResponse"]

_BITS = 60
_ONE = 1 << _BITS  # truth probabilities are multiples of 2**-60, sampled exactly


def _log_ratio_up(p_num: int, k: int) -> float:
    """An upper bound on ln(p / q) for p = p_num/2^60 and q = (1 − p)/(k − 1)."""
    a, b = p_num * (k - 1), _ONE - p_num
    # (a − b)/b is correctly rounded (int true division) and log1p loses at most an ulp or two,
    # so a relative margin of 2^-49 makes this an upper bound
    value = math.log1p((a - b) / b)
    return math.nextafter(value * (1.0 + 2.0**-49), math.inf)


@dataclass(frozen=True)
class ProportionEstimate:
    """Unbiased estimate of true proportion(s) from randomized answers, with its error.

    Attributes
    ----------
    value : float or numpy.ndarray
        The estimate (one proportion for binary answers, one per category for k-ary ones). It is
        unbiased, so it can fall outside [0, 1]; clip it yourself if you prefer a biased estimate
        in range.
    variance : float or numpy.ndarray
        Unbiased estimate of the variance of ``value`` (sampling plus randomisation).
    variance_bound : float
        Its worst case over all true proportions, ``1 / (4 n (p − q)²)`` (Kamath 2020: 1/(16γ²n)).
    n : int
        Number of answers.
    """

    value: float | FloatArray
    variance: float | FloatArray
    variance_bound: float
    n: int

    def ci(self, alpha: float = 0.05) -> float | FloatArray:
        """Half-width of the normal-approximation ``1 − alpha`` interval, ``z · √variance``."""
        z = float(ndtri(1.0 - check_alpha(alpha) / 2.0))
        width = z * np.sqrt(self.variance)
        return float(width) if np.ndim(width) == 0 else width

    def interval(self, alpha: float = 0.05) -> tuple[float | FloatArray, float | FloatArray]:
        """``(value − ci, value + ci)``."""
        w = self.ci(alpha)
        return self.value - w, self.value + w


@dataclass(frozen=True, kw_only=True)
class RandomizedResponse:
    """Randomized response: each respondent randomises their own answer (local ε-DP).

    With ``k`` categories, a respondent reports their true answer with probability ``p`` and
    each of the other ``k − 1`` answers with probability ``q = (1 − p)/(k − 1)``. Whatever the
    others do, one person's report changes in probability by at most ``p/q``, so the report is
    ε-DP with **ε = ln(p/q)**, in the local model: nobody, not even the collector, sees the true
    answer (Kamath 2020, "Randomized Response, Revisited"; k-ary form: Kairouz, Oh and Viswanath
    2014, optimal among such mechanisms for small ε).

    Three equivalent ways to set it (give exactly one):

    * ``epsilon=ε``: ``p = e^ε / (e^ε + k − 1)``.
    * ``truth_probability=p`` (Warner 1965's coin: answer truthfully with probability ``p``,
      otherwise give another answer): ε = ln(p (k − 1) / (1 − p)); needs 1/k < p < 1.
    * ``gamma=γ`` (binary only, Kamath 2020): truthful with probability 1/2 + γ, so
      ε = ln((1/2 + γ)/(1/2 − γ)) = ln((1 + 2γ)/(1 − 2γ)), 0 < γ < 1/2.

    The design in Wasserman's lecture notes "Differential Privacy" — "flip a coin; on tails answer
    YES, on heads answer truthfully" — is **not** ε-DP for any ε: a "no" reveals the truth with
    certainty. Warner's symmetric design used here protects both answers.

    The truth probability is a multiple of 2^-60 and the draw is an exact integer comparison,
    so the privacy ratio holds exactly; with ``epsilon=`` it is rounded so that the realised
    ratio never exceeds e^ε.

    Parameters
    ----------
    epsilon : float, optional
        ε > 0 per respondent.
    truth_probability : float or Fraction, optional
        Warner's p in (1/k, 1).
    gamma : float or Fraction, optional
        Kamath's γ in (0, 1/2); binary only.
    categories : int
        Number of possible answers k ≥ 2; answers are coded 0, …, k − 1 (or bools when k = 2).

    Attributes
    ----------
    p, q : float
        Probability of reporting the true answer, and each other answer.
    event : dpkit.accounting.RandomizedResponseEvent
        The cost to each respondent.

    Examples
    --------
    Kamath's (2020) survey: γ = 1/4 (truthful 3/4 of the time) is ε = ln 3.

    >>> import numpy as np
    >>> from dpkit.mechanisms import RandomizedResponse
    >>> rr = RandomizedResponse(gamma=0.25)
    >>> round(rr.epsilon, 4), rr.p
    (1.0986, 0.75)
    >>> truth = np.random.default_rng(0).random(10_000) < 0.3  # 30% cheated
    >>> noisy = rr.randomize(truth, rng=1)  # what each respondent sends
    >>> est = rr.estimate(noisy)
    >>> bool(abs(est.value - 0.3) < 3 * est.ci(0.05))
    True
    """

    epsilon: float | None = None
    truth_probability: float | Fraction | None = None
    gamma: float | Fraction | None = None
    categories: int = 2
    _p_num: int = field(init=False, repr=False)
    event: RandomizedResponseEvent = field(init=False, repr=False)

    def __post_init__(self) -> None:
        k = self.categories
        if isinstance(k, bool) or not isinstance(k, numbers.Integral | np.integer) or k < 2:
            raise PrivacyParameterError(f"categories must be an int ≥ 2, got {k!r}.")
        k = int(k)
        given = [
            n for n in ("epsilon", "truth_probability", "gamma") if getattr(self, n) is not None
        ]
        if len(given) != 1:
            raise PrivacyParameterError(
                "give exactly one of epsilon=, truth_probability= or gamma=, got "
                f"{given or 'none'}; e.g. RandomizedResponse(epsilon=1.0)."
            )
        if self.epsilon is not None:
            eps = check_epsilon(self.epsilon)
            p_num = self._p_for_epsilon(eps, k)
        else:
            if self.gamma is not None:
                if k != 2:
                    raise PrivacyParameterError(
                        "gamma= parametrises binary randomized response; for k categories give "
                        "epsilon= or truth_probability=."
                    )
                g = exact_fraction(self.gamma, "gamma")
                if not g < Fraction(1, 2):
                    raise PrivacyParameterError(
                        f"gamma must be in (0, 1/2), got {float(g)!r}; gamma=1/2 always tells "
                        "the truth (no privacy)."
                    )
                p = Fraction(1, 2) + g
            else:
                p = exact_fraction(self.truth_probability, "truth_probability")
                if not Fraction(1, k) < p < 1:
                    raise PrivacyParameterError(
                        f"truth_probability must be in (1/{k}, 1), got {float(p)!r}; p = 1 "
                        f"offers no privacy and p ≤ 1/{k} carries no information."
                    )
            # multiples of 2^-60 below p are sampled exactly; rounding down only adds privacy
            p_num = math.floor(p * _ONE)
            if p_num * k <= _ONE:
                raise PrivacyParameterError(
                    "the truth probability is too close to 1/k to be useful; increase it."
                )
            eps = _log_ratio_up(p_num, k)
        object.__setattr__(self, "categories", k)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "_p_num", p_num)
        # relation: none declared: ε bounds any two values of one respondent; which datasets are
        # neighbours (and whether the number of responses is public) is the caller's
        object.__setattr__(self, "event", RandomizedResponseEvent(epsilon=eps, categories=k))

    @staticmethod
    def _p_for_epsilon(eps: float, k: int) -> int:
        p = 1.0 / (1.0 + (k - 1) * math.exp(-eps))
        p_num = math.floor(Fraction(p) * (1 - Fraction(1, 2**50)) * _ONE)
        while _log_ratio_up(p_num, k) > eps:  # guard against rounding in exp and division
            p_num -= max(1, p_num >> 48)
        if p_num * k <= _ONE:
            raise PrivacyParameterError(
                f"epsilon={eps!r} is too small for randomized response to carry information."
            )
        return p_num

    @property
    def delta(self) -> float:
        """Always 0: randomized response is pure ε-DP."""
        return 0.0

    @property
    def p(self) -> float:
        """Probability that a respondent reports their true answer."""
        return self._p_num / _ONE

    @property
    def q(self) -> float:
        """Probability of reporting each particular other answer."""
        return (_ONE - self._p_num) / (_ONE * (self.categories - 1))

    def _check_answers(self, answers: object, name: str) -> IntArray:
        if answers is None:
            raise DataError(f"{name} is None; pass an array of answers coded 0..k-1.")
        raw = np.asarray(answers)
        if raw.dtype.kind == "O" or raw.dtype.kind not in "biuf":
            raise DataError(
                f"{name} must be bools or integers 0..{self.categories - 1}, got dtype "
                f"{dtype_name(raw.dtype)}."
            )
        if raw.size == 0:
            raise DataError(f"{name} is empty; there is nothing to randomise or estimate.")
        if raw.dtype.kind == "f" and not np.all(np.isfinite(raw) & (raw == np.rint(raw))):
            raise DataError(f"{name} must hold integer category codes (no NaN, no fractions).")
        if np.any(raw < 0) or np.any(raw >= self.categories):
            raise DataError(
                f"{name} must lie in 0..{self.categories - 1} (categories={self.categories})."
            )
        return raw.astype(np.int64)

    def randomize(
        self,
        answers: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
        missing: Missing = MISSING_DEFAULT,
    ) -> IntArray:
        """Randomise each answer independently: what each respondent runs on their own device.

        Parameters
        ----------
        answers : array_like of bool or int
            True answers coded 0..k−1 (True/False for binary). An answer that is not a code of
            the declared categories (a negative or too large integer, a fraction, ±inf) is
            randomised as the last category, ``k − 1``: its report is that of a declared answer,
            so the ε-LDP bound over every pair of answers holds. It is never refused, since
            whether a call succeeds must not depend on an answer.
        rng : None, int or numpy.random.Generator
            ``None`` (default) is secure; an int seed is reproducible and not secure.
        accountant : optional
            Charged ``self.event`` once: each respondent's report depends on their answer only,
            so the whole batch costs each person ε (parallel composition). The charge declares
            replacement of one respondent's answer (``Neighbouring.REPLACE``): the reports show
            how many respondents there are.
        label : str, optional
            Recorded with the charge.
        missing : {"raise"}
            A missing answer (NaN, None) is refused before anything is charged (the refusal
            reveals that one exists). ``"drop"`` is refused: a respondent left out would be
            told apart by the missing report, while the reports hold under replacement of one
            answer; map missing answers to a category first (e.g. the last one).

        Returns
        -------
        numpy.ndarray of int64
            The reports, same shape as ``answers``.
        """
        if answers is None:
            raise DataError("answers is None; pass an array of answers coded 0..k-1.")
        raw = np.asarray(answers)
        if raw.size == 0:
            raise DataError("answers is empty; there is nothing to randomise or estimate.")
        x = category_codes(
            raw.astype(np.int64) if raw.dtype.kind == "b" else answers,
            self.categories,
            missing,
            "answers",
            flat=False,
        )
        gen = as_generator(rng)
        # The batch holds one report per respondent, so their number is released exactly: it
        # holds under replacement of one respondent's answer only (no ε under add/remove), and
        # the charge declares that relation so that an accountant refuses add/remove releases.
        charge(accountant, replace(self.event, neighbouring=Neighbouring.REPLACE), label, rng=rng)
        truthful = gen.integers(0, _ONE, size=x.shape, dtype=np.int64) < self._p_num
        k = self.categories
        other = (x + 1 + gen.integers(0, k - 1, size=x.shape, dtype=np.int64)) % k
        return np.where(truthful, x, other)

    def accuracy(self, n: int, alpha: float = 0.05) -> float:
        """Before any answer: the half-width of the ``1 − alpha`` interval of the estimated
        share from ``n`` answers (a public number), at the worst-case variance
        ``1/(4n(p − q)²)`` (the normal approximation of :meth:`ProportionEstimate.ci`).

        >>> round(RandomizedResponse(epsilon=1.0).accuracy(10_000), 4)
        0.0211
        """
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 1:
            raise PrivacyParameterError("n must be a positive int: the public number of answers.")
        gap = self.p - self.q
        z = float(ndtri(1.0 - check_alpha(alpha) / 2.0))
        return z * math.sqrt(1.0 / (4.0 * int(n) * gap * gap))

    def estimate(self, noisy_answers: object) -> ProportionEstimate:
        """Unbiased estimate of the true proportion(s) from the reports, with its variance.

        With ``f_j`` the observed share of reports equal to ``j``, ``E[f_j] = q + (p − q) π_j``,
        so ``(f_j − q)/(p − q)`` is unbiased for the true share ``π_j`` (Kamath 2020: for binary,
        ``(Y − 1/2 + γ)/(2γ)`` averaged; Warner 1965 for his form). Its variance
        ``Var f_j / (p − q)²`` is estimated without bias by ``f_j(1 − f_j) / ((n − 1)(p − q)²)``
        and is at most ``1/(4n(p − q)²)`` — Kamath's (2020) ``1/(16γ²n)``. Estimating is
        post-processing and costs no privacy.

        Returns
        -------
        ProportionEstimate
            For binary answers, the estimated share of 1s (``True``); for k categories, an array
            of the k shares (they sum to one).
        """
        y = self._check_answers(noisy_answers, "noisy_answers").ravel()
        n = int(y.size)
        if n < 2:
            raise DataError("estimate needs at least 2 reports to estimate its variance.")
        k = self.categories
        freq = np.bincount(y, minlength=k).astype(np.float64) / n
        p, q = self.p, self.q
        gap = p - q
        value = (freq - q) / gap
        variance = freq * (1.0 - freq) / ((n - 1) * gap * gap)
        bound = 1.0 / (4.0 * n * gap * gap)
        if k == 2:
            return ProportionEstimate(float(value[1]), float(variance[1]), bound, n)
        return ProportionEstimate(value, variance, bound, n)
