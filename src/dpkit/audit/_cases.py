"""An audit case: a mechanism, a pair of neighbours and the ε it claims, ready to run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy.typing as npt

from dpkit.audit._audit import Progress, epsilon_lower_bound
from dpkit.audit._result import AuditResult
from dpkit.random import RNGLike

__all__ = ["AuditCase"]


@dataclass(frozen=True)
class AuditCase:
    """A mechanism with its claimed ε, on a hard pair of neighbours.

    Attributes
    ----------
    name : str
        Short label for tables.
    mechanism : callable
        ``mechanism(dataset, rng)`` or batched ``mechanism(dataset, n, rng)``.
    d0, d1 : object
        The neighbouring datasets.
    claimed_epsilon : float
        The ε the mechanism claims at ``delta`` (for dpkit's mechanisms: read from the
        accounting event, never restated).
    delta : float
        The δ of the claim.
    audit_delta : float, optional
        The δ the audit is run at, if not ``delta``. Only the Name & Shame control uses it: its
        claimed δ ≥ 1/n is void under the rule δ ≪ 1/n, so it is audited at δ = 1/n².
    region : callable, optional
        A fixed rejection region; otherwise one is chosen on a selection split.
    trials_factor : float
        Multiplies the number of runs (below 1 for slow, unbatched mechanisms).
    description : str
        One line on what is audited.
    """

    name: str
    mechanism: Callable[..., Any] = field(repr=False, compare=False)
    d0: Any = field(repr=False, compare=False)
    d1: Any = field(repr=False, compare=False)
    claimed_epsilon: float
    delta: float = 0.0
    audit_delta: float | None = None
    region: Callable[[npt.NDArray[Any]], npt.ArrayLike] | None = field(
        default=None, repr=False, compare=False
    )
    batched: bool | None = None
    trials_factor: float = 1.0
    description: str = ""

    def run(
        self,
        *,
        trials: int,
        confidence: float = 0.95,
        rng: RNGLike = None,
        progress: Progress | None = None,
    ) -> AuditResult:
        """Audit the case with ``trials × trials_factor`` runs per dataset."""
        return epsilon_lower_bound(
            self.mechanism,
            self.d0,
            self.d1,
            trials=max(4, round(trials * self.trials_factor)),
            delta=self.delta if self.audit_delta is None else self.audit_delta,
            confidence=confidence,
            rng=rng,
            region=self.region,
            batched=self.batched,
            progress=progress,
        )

    def runs(self, trials: int) -> int:
        """Total mechanism runs (both datasets) an audit with ``trials`` will make."""
        return 2 * max(4, round(trials * self.trials_factor))
