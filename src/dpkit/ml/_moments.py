"""Noisy per-group moments of box-bounded records: the building block of GaussianNB,
StandardScaler and KMeans."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpkit.accounting import Event
from dpkit.mechanisms import Laplace
from dpkit.ml._base import FloatArray

__all__ = ["GroupMoments", "group_moments_plan"]


@dataclass(frozen=True, kw_only=True)
class GroupMoments:
    """Laplace mechanisms for per-group counts, sums and (optionally) sums of squares.

    Records are clipped to the box [low, high] and centred at its midpoint m, so each centred
    coordinate lies in [−h_j, h_j]. Under add/remove of one record, which lies in one group:
    the count vector moves by 1 in ℓ1, the sums by at most Σ h_j and the sums of squares by at
    most Σ h_j² (the Laplace mechanism's ℓ1 sensitivity, Dwork & Roth 2014, §3.3).
    """

    low: FloatArray
    high: FloatArray
    counts: Laplace
    sums: Laplace
    squares: Laplace | None

    @property
    def events(self) -> list[Event]:
        parts: list[Event] = [self.counts.event, self.sums.event]
        if self.squares is not None:
            parts.append(self.squares.event)
        return parts

    def release(
        self, X: FloatArray, groups: np.ndarray, k: int, gen: np.random.Generator
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        """Noisy (counts, sums of x, sums of squared centred x), sums in data units about m."""
        mid = (self.low + self.high) / 2
        u = np.clip(X, self.low, self.high) - mid
        d = X.shape[1]
        onehot = np.zeros((X.shape[0], k))
        onehot[np.arange(X.shape[0]), groups] = 1.0
        counts = np.asarray(self.counts.release(onehot.sum(axis=0), rng=gen))
        sums = np.asarray(self.sums.release((onehot.T @ u).reshape(k, d), rng=gen))
        squares = None
        if self.squares is not None:
            squares = np.asarray(self.squares.release((onehot.T @ (u * u)).reshape(k, d), rng=gen))
        return counts, sums, squares


def group_moments_plan(
    *,
    epsilon: float,
    low: FloatArray,
    high: FloatArray,
    groups: int,
    squares: bool,
    shares: tuple[float, ...] | None = None,
) -> GroupMoments:
    """Split ε over counts, sums (and sums of squares): equally, or by ``shares``.

    ``shares`` are public fractions of ε (one per released statistic, summing to 1); the three
    Laplace releases compose sequentially, so their ε add up to ``epsilon`` whatever the split.
    """
    parts = 3 if squares else 2
    if shares is None:
        shares = (1.0 / parts,) * parts
    if len(shares) != parts or any(s <= 0 for s in shares) or abs(sum(shares) - 1.0) > 1e-12:
        raise ValueError("shares must be one positive fraction per statistic, summing to 1.")
    half = (high - low) / 2
    shape = (groups, low.size)
    return GroupMoments(
        low=low,
        high=high,
        counts=Laplace(epsilon=epsilon * shares[0], sensitivity=1.0, shape=(groups,)),
        sums=Laplace(epsilon=epsilon * shares[1], sensitivity=float(np.sum(half)), shape=shape),
        squares=(
            Laplace(epsilon=epsilon * shares[2], sensitivity=float(np.sum(half**2)), shape=shape)
            if squares
            else None
        ),
    )
