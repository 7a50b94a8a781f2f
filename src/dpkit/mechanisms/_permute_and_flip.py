"""Permute-and-flip (McKenna and Sheldon 2020), sampled exactly."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import permutations
from typing import Any

import numpy as np

from dpkit._checks import check_epsilon, check_positive
from dpkit.accounting import PermuteAndFlipEvent
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import FloatArray, SupportsCharge, charge
from dpkit.mechanisms._selection import check_candidates, check_scores, score_scale
from dpkit.random import RNGLike, as_generator

__all__ = ["PermuteAndFlip"]

_SCORE_BITS = 40  # scores are rounded to multiples of 2**(floor(log2 Δ) − 40)
_RATE_BITS = 60  # the rate multiplying score gaps is a multiple of 2**-60, rounded down
_ONE = 1 << _RATE_BITS


def _bernoulli_exp_unit(rng: np.random.Generator, part: int) -> bool:
    """Exact Bernoulli(exp(−part / 2**60)) for 0 ≤ part ≤ 2**60, one coin at a time.

    Canonne, Kamath and Steinke (2020), Algorithm 1 for γ ∈ [0, 1]: draw A_k ~ Bernoulli(γ/k)
    for k = 1, 2, … until one fails; the number of successes is even with probability exp(−γ).
    Bernoulli(γ/k) is ``[U_k = 0] · [V < part]`` with U_k uniform on {0..k−1} and V on
    {0..2^60−1}: integer comparisons only. A scalar loop like this costs a few microseconds a coin,
    where the batch sampler of :mod:`dpkit.noise` is built for arrays.
    """
    k = 1
    while (k == 1 or rng.integers(0, k) == 0) and rng.integers(0, _ONE) < part:
        k += 1
    return k % 2 == 1


def _accept(rng: np.random.Generator, whole: int, part: int) -> bool:
    """Exact Bernoulli(exp(−(whole + part / 2**60))), stopping at the first failed coin."""
    for _ in range(whole):
        if not _bernoulli_exp_unit(rng, _ONE):
            return False
    return part == 0 or _bernoulli_exp_unit(rng, part)


@dataclass(frozen=True, kw_only=True)
class PermuteAndFlip:
    """Permute-and-flip: an exactly sampled ε-DP selection, never worse than the exponential one.

    McKenna and Sheldon (2020): visit the candidates in a uniformly random order and stop at the
    first ``r`` whose coin, of probability ``exp(ε (u(r) − u*) / (2Δ))`` (u* the best score),
    comes up heads; the best candidate's coin always does. It is ε-DP for scores of sensitivity
    Δ (ε/Δ in the exponent when ``monotonic=True``, valid when all scores move in the same
    direction between neighbours), and its expected error is never larger than the exponential
    mechanism's, and up to twice smaller. It is identical in distribution to report-noisy-max with
    exponential noise (Ding, Kifer et al. 2021).

    **Exact implementation.** Scores are rounded to multiples of ``2**h`` with
    ``h = floor(log2 Δ) − 40`` (a data-independent grid; integer scores are unchanged for Δ ≥ 1)
    and the sensitivity is raised to ``Δ + 2**h`` to pay for the rounding; the rate
    ``ε/(2Δ)`` is rounded *down* to a multiple of 2^-60 of the grid. Each coin is then an exact
    Bernoulli(exp(−γ)) with rational γ (Canonne, Kamath and Steinke 2020, Algorithm 1, drawn
    with integer comparisons only), the permutation is an exact uniform shuffle, and the
    mechanism run is permute-and-flip at an ε' ≤ ε: no floating-point approximation at all.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    sensitivity : float
        Δ > 0: how much any single score can change between neighbours.
    monotonic : bool
        Whether scores are monotonic in the data; halves the noise when valid.

    Examples
    --------
    >>> from dpkit.mechanisms import PermuteAndFlip
    >>> pf = PermuteAndFlip(epsilon=2.0)
    >>> pf.select(["a", "b", "c"], [3, 10, 2], rng=0)
    'b'
    >>> pf.probabilities([0, 1]).round(4)  # exact, by enumerating the orders
    array([0.1839, 0.8161])
    """

    epsilon: float
    sensitivity: float = 1.0
    monotonic: bool = False
    event: PermuteAndFlipEvent = field(init=False, repr=False)
    _grid: int = field(init=False, repr=False)
    _rate: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        sens = check_positive(self.sensitivity, "sensitivity")
        if not isinstance(self.monotonic, bool):
            raise PrivacyParameterError(f"monotonic must be True or False, got {self.monotonic!r}.")
        grid = math.frexp(sens)[1] - 1 - _SCORE_BITS
        rounded = Fraction(sens) + Fraction(2) ** grid
        # rate per grid step of score: ε/(2Δ') · 2**h, rounded down to a multiple of 2**-60
        exact_rate = (
            Fraction(eps) * Fraction(2) ** grid / (rounded if self.monotonic else 2 * rounded)
        )
        rate = math.floor(exact_rate * _ONE)
        if rate == 0:
            raise PrivacyParameterError(f"epsilon={eps!r} is too small for permute-and-flip.")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "sensitivity", sens)
        object.__setattr__(self, "event", PermuteAndFlipEvent(epsilon=eps))
        object.__setattr__(self, "_grid", grid)
        object.__setattr__(self, "_rate", rate)

    @property
    def delta(self) -> float:
        """Always 0: permute-and-flip is pure ε-DP."""
        return 0.0

    @property
    def scale(self) -> float:
        """The factor multiplying score gaps: ε/(2Δ), or ε/Δ when monotonic (before rounding)."""
        return score_scale(self.epsilon, self.sensitivity, self.monotonic)

    def _grid_scores(self, s: FloatArray) -> list[int]:
        with np.errstate(over="ignore"):
            scaled = np.rint(np.ldexp(s, -self._grid))
        if not np.isfinite(scaled).all():
            raise DataError(
                "scores are too large relative to the sensitivity to be handled exactly "
                "(score/Δ near the float limit); rescale the scores."
            )
        return [int(v) for v in scaled]

    def _acceptance(self, gaps: list[int]) -> list[float]:
        return [math.exp(-self._rate * g / _ONE) for g in gaps]

    def probabilities(self, scores: object) -> FloatArray:
        """Exact selection probabilities by enumerating all orders (at most 8 candidates).

        For tests and small examples: ``P(r) = Σ_orders (1/m!) Π_{j before r} (1 − p_j) · p_r``.
        """
        s = self._grid_scores(check_scores(scores))
        m = len(s)
        if m > 8:
            raise PrivacyParameterError("probabilities() enumerates orders; use at most 8 scores.")
        best = max(s)
        p = self._acceptance([best - v for v in s])
        out = np.zeros(m)
        for order in permutations(range(m)):
            survive = 1.0
            for r in order:
                out[r] += survive * p[r]
                survive *= 1.0 - p[r]
        return np.asarray(out / math.factorial(m), dtype=np.float64)

    def select_index(
        self,
        scores: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> int:
        """Index of the selected candidate; see :meth:`select`."""
        s = self._grid_scores(check_scores(scores))
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        best = max(s)
        for r in gen.permutation(len(s)):
            gamma = self._rate * (best - s[int(r)])  # γ = gamma / 2**60, exactly
            if _accept(gen, gamma >> _RATE_BITS, gamma & (_ONE - 1)):
                return int(r)
        raise AssertionError("the best candidate always accepts")  # pragma: no cover

    def select(
        self,
        candidates: Sequence[Any],
        scores: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> Any:
        """Select one of ``candidates`` by permute-and-flip.

        Parameters
        ----------
        candidates : sequence
            The possible outputs, fixed independently of the data.
        scores : array_like of float
            One finite score per candidate; higher is better.
        rng : None, int or numpy.random.Generator
            ``None`` (default) is secure; an int seed is reproducible and not secure.
        accountant : optional
            Charged ``self.event`` before anything is released.
        label : str, optional
            Recorded with the charge.
        """
        s = check_scores(scores)
        check_candidates(candidates, int(s.size))
        return candidates[self.select_index(s, rng=rng, accountant=accountant, label=label)]
