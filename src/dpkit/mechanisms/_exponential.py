"""The exponential mechanism (McSherry and Talwar 2007): finite sets and intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit._checks import check_epsilon, check_positive
from dpkit.accounting import ExponentialEvent
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._base import FloatArray, SupportsCharge, charge
from dpkit.mechanisms._interval import (
    ScoreFunction,
    cell_probabilities,
    cells_for,
    check_bounds,
    interval_grid,
    log_weights,
    sample_cell,
)
from dpkit.mechanisms._selection import (
    check_candidates,
    check_scores,
    gumbel,
    scaled_scores,
    score_scale,
)
from dpkit.random import RNGLike, as_generator

__all__ = ["Exponential"]


@dataclass(frozen=True, kw_only=True)
class Exponential:
    """The exponential mechanism: pick an output with probability ∝ exp(ε · score / (2Δ)).

    McSherry and Talwar (2007); McSherry 2016, "the exponential mechanism". If every output's score
    changes by at most Δ between neighbouring datasets, selecting output ``r`` with probability
    ∝ ``exp(ε u(r) / (2Δ))`` is ε-DP. With ``monotonic=True`` the factor is ε/Δ; this is valid
    only when, for every pair of neighbours, all scores move in the same direction (for instance
    scores that are counts of records, under add/remove neighbours).

    Sampling is by the Gumbel-max trick, ``argmax(ε u/(2Δ) + G)``, on log-weights: no weight is
    ever exponentiated, so nothing underflows however low a score is (the failure of
    diffprivlib's issue #107). Residual float issue, stated plainly: exact sampling from
    ``exp(ε u)`` over arbitrary real scores is not possible in floating point; the log-weights
    are rounded to about 1e-16 relative, and the Gumbel variates come from a float exponential
    sampler, so the probabilities are those of the mechanism up to relative errors of that
    order. The output set (the candidates; the grid of :meth:`select_interval`) never depends on
    the data, so there is no support leak of the kind Mironov (2012) exploited. Where an exactly
    implemented selection is wanted, use :class:`PermuteAndFlip`, whose acceptance coins are
    exact, and which is never less accurate.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    sensitivity : float
        Δ > 0: how much any single score can change between neighbouring datasets.
    monotonic : bool
        Whether scores are monotonic in the data (see above); halves the noise when valid.

    Examples
    --------
    >>> from dpkit.mechanisms import Exponential
    >>> em = Exponential(epsilon=1.0)
    >>> em.select(["red", "green", "blue"], [10, 30, 0], rng=0)
    'green'
    >>> em.probabilities([0, 0, 2]).round(3)
    array([0.212, 0.212, 0.576])
    """

    epsilon: float
    sensitivity: float = 1.0
    monotonic: bool = False
    event: ExponentialEvent = field(init=False, repr=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        sens = check_positive(self.sensitivity, "sensitivity")
        if not isinstance(self.monotonic, bool):
            raise PrivacyParameterError(f"monotonic must be True or False, got {self.monotonic!r}.")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "sensitivity", sens)
        # relation: none declared, the utility's sensitivity is the caller's (its relation's)
        object.__setattr__(self, "event", ExponentialEvent(epsilon=eps))

    @property
    def delta(self) -> float:
        """Always 0: the exponential mechanism is pure ε-DP."""
        return 0.0

    @property
    def scale(self) -> float:
        """The factor multiplying scores: ε/(2Δ), or ε/Δ when monotonic."""
        return score_scale(self.epsilon, self.sensitivity, self.monotonic)

    def probabilities(self, scores: object) -> FloatArray:
        """Selection probability of each candidate, ``softmax(scale · scores)``.

        For analysis and tests; :meth:`select` never computes these (it would underflow).
        """
        s = scaled_scores(scores, self.scale)
        w = np.exp(s - s.max())
        return np.asarray(w / w.sum(), dtype=np.float64)

    def select_index(
        self,
        scores: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> int:
        """Index of the selected candidate; see :meth:`select`."""
        logits = scaled_scores(scores, self.scale)
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        return int(np.argmax(logits + gumbel(gen, int(logits.size))))

    def select(
        self,
        candidates: Sequence[Any],
        scores: object,
        *,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> Any:
        """Select one of ``candidates`` with probability ∝ exp(scale · score).

        Parameters
        ----------
        candidates : sequence
            The possible outputs, fixed independently of the data.
        scores : array_like of float
            One finite score per candidate, computed from the data; higher is better.
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

    def select_interval(
        self,
        points: object,
        scores: ScoreFunction | object,
        bounds: tuple[float, float],
        *,
        grid: int | None = None,
        rng: RNGLike = None,
        accountant: SupportsCharge | None = None,
        label: str | None = None,
    ) -> float:
        """The exponential mechanism over the interval ``bounds`` (Smith 2011).

        The outputs are the grid points ``K · 2**grid`` in ``[lo, hi]`` — data-independent, about
        2^40 of them by default (:func:`interval_grid`), all exact doubles. The data ``points``
        are clipped to the bounds and rounded to the same grid (each record is mapped on its own,
        so neighbours stay neighbours), then sorted if they are not already. The score of a grid
        point y depends on where the points lie relative to it:

        * ``scores`` an array of ``n + 1`` numbers: y scores ``scores[#{points ≤ y}]`` (Smith's
          form: gap i between the i-th and (i+1)-th sorted points is weighted by its length);
        * ``scores`` a callable ``scores(less, greater)``: y scores
          ``scores(#{points < y}, #{points > y})``. Points equal to y count in neither, so a
          value shared by many records can win by itself — McSherry's (2016) score for the median,
          ``−|#{x > y} − #{x < y}|``, is ``lambda less, greater: -abs(greater - less)``.

        Each cell (a run of grid points of equal score) is chosen with probability ∝
        ``count · exp(scale · score)`` by Gumbel-max in log space; then a grid point inside it is
        drawn uniformly by an exact integer draw, so the uniform draw is float-safe. Cells of
        length 0 (repeated points) have probability 0. O(n) after sorting, vectorised. ε-DP when
        the score of every grid point changes by at most Δ between neighbours.

        Parameters
        ----------
        points : array_like of float
            The data (1-d), preferably sorted.
        scores : array_like or callable
            As above.
        bounds : (float, float)
            ``(lo, hi)``, lo < hi, chosen without looking at the data.
        grid : int, optional
            Grid exponent; default :func:`interval_grid` of the bounds.
        rng, accountant, label
            As in :meth:`select`.

        Returns
        -------
        float
            A multiple of ``2**grid`` in ``[lo, hi]``.

        Examples
        --------
        McSherry 2016: 1,000 copies of 0.4, bounds [-1, 1], ε = 0.1: the median is 0.4 (to the
        grid).

        >>> import numpy as np
        >>> from dpkit.mechanisms import Exponential
        >>> x = np.full(1000, 0.4)
        >>> y = Exponential(epsilon=0.1).select_interval(
        ...     x, lambda less, greater: -np.abs(greater - less), (-1.0, 1.0), rng=0)
        >>> abs(y - 0.4) <= 2.0**-40
        True
        """
        lo, hi = check_bounds(bounds)
        g = interval_grid(lo, hi) if grid is None else _check_grid(grid, lo, hi)
        cells = cells_for(points, scores, (lo, hi), g)
        logw = log_weights(cells, self.scale)  # scores clamped: no overflow, no refusal
        gen = as_generator(rng)
        charge(accountant, self.event, label, rng=rng)
        return float(np.ldexp(float(sample_cell(cells, logw, gen)), g))

    def interval_probabilities(
        self,
        points: object,
        scores: ScoreFunction | object,
        bounds: tuple[float, float],
        *,
        grid: int | None = None,
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The cells of :meth:`select_interval` as ``(start, stop, probability)`` arrays.

        ``start`` and ``stop`` are the first and last output values of each cell. For analysis
        and tests only; it is not private (it reads the data without noise).
        """
        lo, hi = check_bounds(bounds)
        g = interval_grid(lo, hi) if grid is None else _check_grid(grid, lo, hi)
        start, count, prob = cell_probabilities(cells_for(points, scores, (lo, hi), g), self.scale)
        first = np.ldexp(start.astype(np.float64), g)
        last = np.ldexp((start + count - 1).astype(np.float64), g)
        return first, last, prob


def _check_grid(grid: object, lo: float, hi: float) -> int:
    if isinstance(grid, bool) or not isinstance(grid, int | np.integer):
        raise PrivacyParameterError(f"grid must be an int exponent, got {grid!r}.")
    g = int(grid)
    finest = math.frexp(max(abs(lo), abs(hi)))[1] - 53  # grid points stay exact doubles
    if g < finest:
        raise PrivacyParameterError(
            f"grid={g} is too fine for bounds ({lo!r}, {hi!r}): grid points would not be exact "
            f"doubles; use grid >= {finest}."
        )
    if math.ldexp(1.0, g) > hi - lo:
        raise PrivacyParameterError(f"grid={g} is coarser than the bounds ({lo!r}, {hi!r}).")
    return g
