"""Report-noisy-max: add noise to every score, report the index of the largest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dpkit._checks import check_epsilon, check_positive
from dpkit.accounting import ReportNoisyMaxEvent
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.mechanisms._selection import (
    check_candidates,
    check_scores,
    gumbel,
    scaled_scores,
    score_scale,
)
from dpkit.random import RNGLike, as_generator

__all__ = ["ReportNoisyMax"]


@dataclass(frozen=True, kw_only=True)
class ReportNoisyMax:
    """Report-noisy-max: the index of ``argmax(score + noise)``, never the noisy value; ε-DP.

    Dwork and Roth (2014, §3.3). Two noise distributions, each equal in law to another
    mechanism:

    * ``noise="exponential"`` (default): one-sided exponential noise of scale ``2Δ/ε`` (``Δ/ε``
      when ``monotonic``). Identical in distribution to :class:`PermuteAndFlip` (Ding, Kifer et
      al. 2021), hence at least as accurate as the exponential mechanism.
    * ``noise="gumbel"``: Gumbel noise of the same scale; identical in distribution to the
      exponential mechanism (the Gumbel-max trick).

    Only the index is returned: releasing the noisy maximum itself would cost more privacy.
    The noise is drawn in floating point; for an exactly implemented equivalent use
    :class:`PermuteAndFlip`.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    sensitivity : float
        Δ > 0: how much any single score can change between neighbours.
    monotonic : bool
        Whether all scores move in the same direction between neighbours (e.g. counts under
        add/remove); halves the noise when valid.
    noise : {"exponential", "gumbel"}
        The noise distribution.

    Examples
    --------
    >>> from dpkit.mechanisms import ReportNoisyMax
    >>> rnm = ReportNoisyMax(epsilon=1.0, monotonic=True)
    >>> rnm.select_index([120, 340, 80], rng=0)
    1
    """

    epsilon: float
    sensitivity: float = 1.0
    monotonic: bool = False
    noise: Literal["exponential", "gumbel"] = "exponential"
    event: ReportNoisyMaxEvent = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        sens = check_positive(self.sensitivity, "sensitivity")
        if not isinstance(self.monotonic, bool):
            raise PrivacyParameterError(f"monotonic must be True or False, got {self.monotonic!r}.")
        if self.noise not in ("exponential", "gumbel"):
            raise PrivacyParameterError(
                f"noise must be 'exponential' or 'gumbel', got {self.noise!r}."
            )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "sensitivity", sens)
        # relation: none declared, the utility's sensitivity is the caller's (its relation's)
        object.__setattr__(self, "event", ReportNoisyMaxEvent(epsilon=eps))

    @property
    def delta(self) -> float:
        """Always 0: report-noisy-max is pure ε-DP."""
        return 0.0

    @property
    def scale(self) -> float:
        """The factor multiplying scores: ε/(2Δ), or ε/Δ when monotonic (noise scale 1/scale)."""
        return score_scale(self.epsilon, self.sensitivity, self.monotonic)

    def select_index(
        self,
        scores: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> int:
        """Index of the largest noisy score."""
        logits = scaled_scores(scores, self.scale)
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        n = int(logits.size)
        noise = gen.standard_exponential(n) if self.noise == "exponential" else gumbel(gen, n)
        return int(np.argmax(logits + noise))

    def select(
        self,
        candidates: Sequence[Any],
        scores: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> Any:
        """The candidate with the largest noisy score (see :meth:`select_index`)."""
        s = check_scores(scores)
        check_candidates(candidates, int(s.size))
        return candidates[self.select_index(s, rng=rng, accountant=accountant, label=label)]
