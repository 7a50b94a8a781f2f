"""Shared pieces of the selection mechanisms: score checks, the ε-scaling, Gumbel noise."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import FloatArray
from dpkit.noise import as_finite_array

__all__ = [
    "check_candidates",
    "check_scores",
    "gumbel",
    "scaled_scores",
    "score_limit",
    "score_scale",
]


def score_scale(epsilon: float, sensitivity: float, monotonic: bool) -> float:
    """The factor ε/(2Δ) — or ε/Δ when scores are monotonic — that multiplies scores.

    The factor 2 pays for the normaliser, which can move the other way from the score of a given
    output (McSherry 2016, "the exponential mechanism"). When every score moves in the same
    direction between neighbours (all up or all down, e.g. counts under add/remove), the two effects
    cannot add up and ε/Δ suffices (McSherry and Talwar 2007; McKenna and Sheldon 2020).
    """
    return epsilon / (sensitivity if monotonic else 2.0 * sensitivity)


def check_scores(scores: object, name: str = "scores") -> FloatArray:
    """A non-empty 1-d array of finite float scores."""
    arr = as_finite_array(scores, name)
    if arr.ndim != 1:
        raise DataError(f"{name} must be 1-d (one score per candidate), got shape {arr.shape}.")
    if arr.size == 0:
        raise DataError(f"{name} is empty; there must be at least one candidate.")
    return arr


def score_limit(scale: float) -> float:
    """Scores are clamped to ``±score_limit(scale)`` = ``±max_float / (4 · max(scale, 1))``.

    Then every ``scale · score`` is finite and so is the difference of any two (below half the
    float range), whatever the scores. Clamping is 1-Lipschitz and monotone in each score, so
    scores of sensitivity Δ (and monotonic ones) keep that property and the guarantee holds; a
    score beyond the range is handled as its end instead of refused (a refusal would depend on
    its value).
    """
    return float(np.finfo(np.float64).max) / 4.0 / max(scale, 1.0)


def scaled_scores(scores: object, scale: float, name: str = "scores") -> FloatArray:
    """``scale · scores`` for finite, 1-d, non-empty scores, each clamped to the range of
    :func:`score_limit` first, so that no product overflows."""
    limit = score_limit(scale)
    logits: FloatArray = np.clip(check_scores(scores, name), -limit, limit) * scale
    if not np.all(np.isfinite(logits)):  # pragma: no cover - the clamp rules it out
        raise PrivacyParameterError("epsilon/sensitivity is too large for these scores.")
    return logits


def check_candidates(candidates: Sequence[object] | None, n: int) -> None:
    """``candidates`` (if given) must have one entry per score."""
    if candidates is None:
        return
    try:
        m = len(candidates)
    except TypeError:
        raise DataError("candidates must be a sequence (list, tuple, array).") from None
    if m != n:
        raise DataError(f"got {m} candidates but {n} scores; give one score per candidate.")


def gumbel(rng: np.random.Generator, size: int) -> FloatArray:
    """Standard Gumbel variates ``−log E`` with E standard exponential.

    ``argmax(logit + G)`` picks index i with probability ∝ exp(logit_i) (the Gumbel-max trick),
    and works with log-weights, so no weight ever underflows however bad a score is. E comes from
    NumPy's ziggurat sampler, which is accurate in both tails; an E of exactly 0 (probability
    ~2^-64) is replaced by the smallest double, so the logarithm never warns.
    """
    e = rng.standard_exponential(size)
    return -np.log(np.maximum(e, np.finfo(np.float64).smallest_subnormal))
