"""Permute-and-flip (McKenna and Sheldon 2020), sampled exactly."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal
from fractions import Fraction
from itertools import permutations
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_epsilon, check_positive
from dpkit.accounting import PermuteAndFlipEvent
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._base import FloatArray, SupportsCharge, charge
from dpkit.mechanisms._selection import check_candidates, check_scores, score_scale
from dpkit.random import RNGLike, as_generator

__all__ = ["PermuteAndFlip", "coins"]

_SCORE_BITS = 40  # scores are rounded to multiples of 2**(floor(log2 Δ) − 40)
_SCORE_RANGE_BITS = 1000  # and clamped to ±2**(that exponent + 1000): see score_limit
_RATE_BITS = 60  # the rate multiplying score gaps is a multiple of 2**-60, rounded down
_ONE = 1 << _RATE_BITS


_U_BITS = 53  # numpy's Generator.random() returns K · 2**-53 with K uniform on [0, 2**53)
_MARGIN = 2.0**-40  # relative error allowed for the float bracket of exp(−γ) (actual < 2**-42)
_CAP = 700 << _RATE_BITS  # exp(−700) is a normal double: no subnormal (slow) arithmetic


def coins(rng: np.random.Generator, gammas: Sequence[int]) -> npt.NDArray[np.bool_]:
    """Exact Bernoulli(exp(−γ_i / 2**60)) for every i, with work that does not depend on the γ_i.

    Each coin is ``[U_i < exp(−γ_i)]`` for a uniform ``U_i``. One 64-bit word per coin gives the
    first 53 bits of ``U_i`` (``K_i · 2**-53``); one vectorised float ``exp`` brackets
    ``exp(−γ_i)`` within a relative ``2**-40`` (see :func:`_flip`). Whenever the interval
    ``[K · 2**-53, (K + 1) · 2**-53)`` lies entirely below or above the bracket the coin is
    decided; only otherwise (probability below ``2**-39`` per coin) is it resolved exactly by
    :func:`_resolve`, which draws more bits of ``U_i`` and compares them with a correctly rounded
    decimal ``exp``. So the coin is exactly Bernoulli(exp(−γ)), and its running time — one word
    and the same vectorised operations for every candidate, tied or not, rejected or not — is
    independent of the data except on that ``2**-39`` event.
    """
    g = np.array([float(min(v, _CAP)) for v in gammas]) * 2.0**-_RATE_BITS
    return _flip(rng, g, lambda i: int(gammas[i]))


def _flip(
    rng: np.random.Generator, g: FloatArray, gamma_of: Callable[[int], int]
) -> npt.NDArray[np.bool_]:
    """The coins of :func:`coins` from ``g``, floats within a relative ``3 · 2**-53`` of
    ``min(γ_i, 700 · 2**60) / 2**60`` (three roundings at most), and the exact ``γ_i`` on demand.

    The bracket: ``g ≤ 700`` is within ``700 · 3 · 2**-53 < 2**-41.9`` of the exact exponent and
    NumPy's ``exp`` within a few units in the last place, so ``exp(−g)`` is within a relative
    ``2**-41.8`` of ``exp(−γ)``: inside ``_MARGIN = 2**-40``. ``g == 0`` exactly when ``γ = 0``
    (a positive γ is at least ``2**-60``), whose coin is heads without exception; ``g`` at the
    cap only brackets from above (``exp(−γ) ≤ exp(−700)``).
    """
    u = rng.random(g.size)
    p = np.exp(-g)
    lo = np.where(g == 0.0, 1.0, np.where(g >= 700.0, 0.0, p * (1.0 - _MARGIN)))
    hi = np.where(g == 0.0, 1.0, p * (1.0 + _MARGIN))
    heads = u + 2.0**-_U_BITS <= lo
    unsure = ~(heads | (u >= hi))
    for i in np.flatnonzero(unsure):  # almost never taken (probability < 2**-39 per coin)
        heads[i] = _resolve(rng, gamma_of(int(i)), int(u[i] * 2.0**_U_BITS), _U_BITS)
    return heads


def _resolve(rng: np.random.Generator, gamma: int, k: int, bits: int) -> bool:
    """Exact ``[U < exp(−γ/2**60)]`` for U uniform in ``[k · 2**-bits, (k + 1) · 2**-bits)``.

    Python's :mod:`decimal` computes ``exp`` correctly rounded, so at P digits the true value
    lies within one unit in the last place of the result; U is refined by 64 bits at a time and
    the precision raised with it until the two intervals separate (with probability 1).
    """
    digits = len(str(gamma)) + 2 * _RATE_BITS  # γ/2**60 = γ·5**60/10**60: exact at this precision
    exact = Context(prec=digits, Emin=MIN_EMIN, Emax=MAX_EMAX, traps=[])
    x = exact.scaleb(Decimal(gamma * 5**_RATE_BITS), -_RATE_BITS)
    while True:
        prec = digits + bits // 3 + 20
        ctx = Context(prec=prec, Emin=MIN_EMIN, Emax=MAX_EMAX, traps=[])
        r = ctx.exp(ctx.minus(x))
        ulp = Fraction(10) ** ((r.adjusted() if r else ctx.Etiny()) - prec + 1)
        value = Fraction(r)
        if Fraction(k + 1, 1 << bits) <= value - ulp:
            return True
        if Fraction(k, 1 << bits) >= value + ulp:
            return False
        k = (k << 64) | int(rng.integers(0, 1 << 64, dtype=np.uint64))
        bits += 64


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
    Bernoulli(exp(−γ)) with rational γ (:func:`coins`: a uniform compared with a float bracket
    of exp(−γ) that is provably wide enough, and in the rare undecided case with a correctly
    rounded decimal exp), the permutation is an exact uniform shuffle, and the mechanism run is
    permute-and-flip at an ε' ≤ ε: floats decide a coin only where the bracket proves the answer.

    **Constant work.** Every candidate's coin is flipped and the first heads in a random order
    is returned (:func:`coins`): the same output distribution as stopping at the first heads, but
    the amount of work no longer depends on which candidates are rejected or tied (a timing
    channel; Jin et al. 2022), except on an event of probability below ``2**-39`` per candidate.

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
        # relation: none declared, the utility's sensitivity is the caller's (its relation's)
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

    @property
    def score_limit(self) -> float:
        """Scores are clamped to ``[−score_limit, score_limit]``, with ``score_limit =
        2**min(h + 1000, 1023)`` (``h`` the grid exponent, about ``log2 Δ − 40``: some
        ``Δ · 2**960``), so that every score in grid units stays a finite float below 2^1000.

        Clamping is 1-Lipschitz and monotone in each score, so scores of sensitivity Δ (and
        monotonic ones) keep that property and the guarantee holds; a score beyond the range is
        handled as its end instead of refused (a refusal would depend on its value).
        """
        return math.ldexp(1.0, min(self._grid + _SCORE_RANGE_BITS, 1023))

    def _grid_array(self, s: FloatArray) -> FloatArray:
        """The scores in units of ``2**h``, rounded to integers (exact float integers)."""
        limit = self.score_limit
        scaled: FloatArray = np.rint(np.ldexp(np.clip(s, -limit, limit), -self._grid))
        return scaled

    def _grid_scores(self, s: FloatArray) -> list[int]:
        return [int(v) for v in self._grid_array(s)]

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
        s = self._grid_array(check_scores(scores))
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        best = float(s.max())
        # γ_i = rate · (best − s_i) / 2**60 in floats for the bracket (one rounding for the gap of
        # two integer-valued doubles, one for the rate, one for the product; an overflow is capped
        # like any γ above 700), and exactly in Python integers for the rare exact coin. The rate
        # is capped before float() (a huge ε makes it too large for a float: OverflowError after
        # the charge): a nonzero gap is at least 1, so a rate at the cap already puts γ there.
        rate = float(min(self._rate, _CAP)) * 2.0**-_RATE_BITS
        with np.errstate(over="ignore"):
            g = np.minimum((best - s) * rate, 700.0)
        top = int(best)

        def gamma_of(i: int) -> int:
            return self._rate * (top - int(s[i]))

        # Flip every candidate's coin (not only until the first heads), then take the first heads
        # in a uniformly random order: the same distribution as visiting candidates in that order
        # and stopping at the first heads (McKenna and Sheldon 2020), but the work — one word per
        # coin, one permutation, the same vectorised operations — no longer reveals how many
        # candidates were rejected, nor whether the best one is tied (Jin et al. 2022's timing
        # channel).
        order = gen.permutation(s.size)
        heads = _flip(gen, g, gamma_of)
        return int(order[int(np.argmax(heads[order]))])  # the best candidate is always heads

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
