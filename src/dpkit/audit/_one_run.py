"""Auditing in one training run (Steinke, Nasr & Jagielski 2023).

``m`` canaries are each put in the input by an independent, secret fair coin; the mechanism runs
**once**; a score per canary says how strongly the output "remembers" it. The guesser says "in"
for the ``k+`` highest scores and "out" for the ``k−`` lowest and abstains on the rest. If the
mechanism is (ε, δ)-DP (add/remove of one canary), the number ``v`` of correct guesses among the
``r = k+ + k−`` is stochastically dominated as in Steinke, Nasr & Jagielski (2023, "Privacy
Auditing with One (1) Training Run", their main theorem in its (ε, δ) form): with
``q = e^ε / (1 + e^ε)``,

    P[v correct or more] ≤ β + 2·m·δ·α,   β = P[Binomial(r, q) ≥ v],
    α = max over 1 ≤ i ≤ v of P[v − i ≤ Binomial(r, q) < v] / i.

Where that p-value is below ``1 − confidence`` the hypothesis "(ε, δ)-DP" is rejected; the lower
bound is the largest such ε (found by bisection keeping the rejected end). Because (ε, δ)-DP
implies (ε′, δ)-DP for every ε′ > ε, rejecting that ε rejects every smaller one too.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

from dpkit._checks import check_delta
from dpkit.audit._clopper_pearson import check_confidence
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.random import RNGLike, as_generator

__all__ = [
    "OneRunResult",
    "draw_canary_coins",
    "one_run_audit",
    "one_run_bound",
    "one_run_epsilon",
    "one_run_p_value",
]


def _count(value: object, name: str, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < low:
        raise PrivacyParameterError(f"{name} must be an int of at least {low}.")
    return int(value)


def one_run_p_value(
    *, canaries: int, guesses: int, correct: int, epsilon: float, delta: float = 0.0
) -> float:
    """Probability, under "(ε, δ)-DP", of ``correct`` or more right guesses out of ``guesses``.

    The bound of Steinke, Nasr & Jagielski (2023) for ``canaries`` (m) canaries
    included by fair coins: ``β + 2·m·δ·α`` (see the module docstring), capped at 1.

    Examples
    --------
    With δ = 0 and every guess right it is ``q^r``: 10 of 10 at ε = 1 gives
    ``(e/(1+e))^10 = 0.0436``:

    >>> round(one_run_p_value(canaries=100, guesses=10, correct=10, epsilon=1.0), 4)
    0.0436
    """
    m = _count(canaries, "canaries", low=1)
    r = _count(guesses, "guesses")
    v = _count(correct, "correct")
    if not v <= r <= m:
        raise PrivacyParameterError("need correct <= guesses <= canaries.")
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise PrivacyParameterError("epsilon must be a number >= 0.")
    eps = float(epsilon)
    if not eps >= 0 or math.isnan(eps):
        raise PrivacyParameterError("epsilon must be a number >= 0.")
    d = check_delta(delta)
    if v == 0:
        return 1.0
    q = 1.0 / (1.0 + math.exp(-eps)) if eps < 745 else 1.0
    beta = float(stats.binom.sf(v - 1, r, q))  # P[Bin(r, q) ≥ v]
    alpha = 0.0
    if d > 0:
        i = np.arange(1, v + 1)
        below = np.cumsum(stats.binom.pmf(v - i, r, q))  # P[v − i ≤ Bin < v]
        alpha = float(np.max(below / i))
    return min(1.0, beta + 2.0 * m * d * alpha)


def one_run_epsilon(
    *,
    canaries: int,
    guesses: int,
    correct: int,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> float:
    """Largest ε rejected at ``confidence`` by ``correct`` right guesses of ``guesses``.

    With probability at least ``confidence`` over the canaries' coins and the mechanism's own
    randomness, the mechanism is not (ε, δ)-DP for the returned ε (nor any smaller one);
    0 when nothing is shown.

    Examples
    --------
    Every one of 100 guesses right, δ = 0: ``q = 0.05^(1/100)`` and
    ``ε = log(q/(1−q)) = 3.4930`` (the exact binomial tail, no approximation):

    >>> round(one_run_epsilon(canaries=1000, guesses=100, correct=100), 4)
    3.493
    """
    c = check_confidence(confidence)
    level = 1.0 - c

    def pval(e: float) -> float:
        return one_run_p_value(
            canaries=canaries, guesses=guesses, correct=correct, epsilon=e, delta=delta
        )

    if not pval(0.0) < level:
        return 0.0
    lo, hi = 0.0, 1.0
    while pval(hi) < level:  # p-values reach 1 as ε grows: β → 1 when v ≤ r
        lo, hi = hi, 2 * hi
        if hi > 1e4:  # pragma: no cover - unreachable for v ≤ r
            return lo
    for _ in range(60):  # invariant: pval(lo) < level ≤ pval(hi)
        mid = (lo + hi) / 2
        if pval(mid) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-9 * max(1.0, hi):
            break
    return lo


@dataclass(frozen=True)
class OneRunResult:
    """The outcome of a one-run audit: guesses, their accuracy and the ε lower bound.

    With probability at least ``confidence`` the audited mechanism is *not* (ε, δ)-DP (under
    add/remove of one canary) for ``epsilon``; a small ``epsilon`` proves nothing.
    """

    epsilon: float
    delta: float
    confidence: float
    canaries: int
    """m: canaries, each included by a secret fair coin."""
    guesses: int
    """r = guessed "in" + guessed "out" (the rest abstained)."""
    correct: int
    """v: right guesses."""
    guessed_in: int
    guessed_out: int

    def exceeds(self, claimed_epsilon: float) -> bool:
        """Whether the bound refutes a claim of ``claimed_epsilon`` (at this δ)."""
        return self.epsilon > claimed_epsilon

    def __str__(self) -> str:
        return (
            f"ε ≥ {self.epsilon:.4g} at δ={self.delta:g} ({100 * self.confidence:g}% confidence): "
            f"{self.correct} of {self.guesses} guesses right on {self.canaries} canaries"
        )


def draw_canary_coins(canaries: int, *, rng: RNGLike = None) -> npt.NDArray[np.bool_]:
    """The secret inclusion coins: one independent fair coin per canary (True: included).

    Drawn from dpkit's secure generator unless ``rng`` is given; the scores must be computed
    without looking at them.

    >>> from dpkit.random import seeded
    >>> draw_canary_coins(6, rng=seeded(0)).shape
    (6,)
    """
    m = _count(canaries, "canaries", low=1)
    gen = as_generator(rng)
    return np.asarray(gen.integers(0, 2, size=m) == 1, dtype=np.bool_)


def one_run_bound(
    scores: npt.ArrayLike,
    included: npt.ArrayLike,
    *,
    guess_in: int,
    guess_out: int,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> OneRunResult:
    """Guess from the scores, count the right guesses and bound ε.

    Parameters
    ----------
    scores : array of m floats
        Higher means "more likely included" (e.g. minus the canary's loss). They must have been
        computed without the coins (the output of the mechanism, and public canaries, only).
    included : array of m bools
        The secret coins the canaries were included by (:func:`draw_canary_coins`).
    guess_in, guess_out : int
        k+ and k−: guess "in" for the ``guess_in`` highest scores and "out" for the ``guess_out``
        lowest, abstain on the rest. Fix them before seeing the scores (choosing them from the
        result invalidates the confidence). Ties are broken by canary position, which the coins
        do not influence.
    delta : float
        δ of the hypothesis being rejected.
    confidence : float
        1 − β: the level of the bound.

    Examples
    --------
    A mechanism that reveals its coins exactly (score = coin) gets every guess right:

    >>> import numpy as np
    >>> coins = np.array([True, False] * 50)
    >>> r = one_run_bound(coins.astype(float), coins, guess_in=20, guess_out=20)
    >>> r.correct, r.guesses, round(r.epsilon, 3)
    (40, 40, 2.554)
    """
    s = np.asarray(scores, dtype=np.float64)
    inc = np.asarray(included)
    if s.ndim != 1 or s.size == 0:
        raise DataError("scores must be a 1-d array with one score per canary.")
    if inc.shape != s.shape or inc.dtype != np.bool_:
        raise DataError("included must be a bool array with one coin per canary.")
    if not np.isfinite(s).all():
        raise DataError("every score must be finite.")
    m = s.size
    k_in = _count(guess_in, "guess_in")
    k_out = _count(guess_out, "guess_out")
    if k_in + k_out > m:
        raise PrivacyParameterError("guess_in + guess_out must be at most the number of canaries.")
    order = np.argsort(-s, kind="stable")  # highest first; ties by position
    right = int(inc[order[:k_in]].sum()) + int((~inc[order[m - k_out :]]).sum() if k_out else 0)
    d = check_delta(delta)
    c = check_confidence(confidence)
    eps = one_run_epsilon(canaries=m, guesses=k_in + k_out, correct=right, delta=d, confidence=c)
    return OneRunResult(
        epsilon=eps,
        delta=d,
        confidence=c,
        canaries=m,
        guesses=k_in + k_out,
        correct=right,
        guessed_in=k_in,
        guessed_out=k_out,
    )


def one_run_audit(
    run: Callable[[npt.NDArray[np.bool_]], npt.ArrayLike],
    *,
    canaries: int,
    guess_in: int,
    guess_out: int,
    delta: float = 0.0,
    confidence: float = 0.95,
    rng: RNGLike = None,
) -> OneRunResult:
    """Audit any mechanism in one run: draw the coins, run it once, bound ε from its scores.

    ``run(included)`` must run the mechanism on the data with canary ``i`` added exactly where
    ``included[i]`` is True, and return one score per canary (higher: more likely included)
    computed from the mechanism's output alone. The bound is for add/remove of one canary.

    Examples
    --------
    Randomized response on each coin at ε = 4 (with δ = 0), audited with 2,000 canaries:

    >>> import numpy as np
    >>> from dpkit.random import seeded
    >>> gen = np.random.default_rng(1)
    >>> def rr(included):
    ...     keep = gen.random(included.size) < np.exp(4) / (1 + np.exp(4))
    ...     return np.where(keep, included, ~included).astype(float) + gen.random(included.size)
    >>> r = one_run_audit(rr, canaries=2000, guess_in=300, guess_out=300, rng=seeded(2))
    >>> 2.5 < r.epsilon < 4.0
    True
    """
    m = _count(canaries, "canaries", low=1)
    coins = draw_canary_coins(m, rng=rng)
    scores = np.asarray(run(coins.copy()), dtype=np.float64)
    if scores.shape != (m,):
        raise DataError("run(included) must return one score per canary.")
    return one_run_bound(
        scores, coins, guess_in=guess_in, guess_out=guess_out, delta=delta, confidence=confidence
    )
