"""Hard neighbouring pairs for common query types.

An audit is only as strong as the pair of datasets it runs on: the bound can reach the true ε only
on a pair where the privacy loss is largest. These helpers return such pairs for bounded data:
records piled on one bound, and the neighbour that adds, removes or moves one record to the other
bound (Kamath 2020, "bounded vs unbounded" neighbours: replace one record, or add/remove one).
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError, PrivacyParameterError

__all__ = [
    "Pair",
    "Relation",
    "count_pair",
    "histogram_pair",
    "mean_pair",
    "noisy_max_pair",
    "quantile_pair",
    "sum_pair",
]

Relation = Literal["add_remove", "replace"]
FloatArray = npt.NDArray[np.float64]


class Pair(NamedTuple):
    """Two neighbouring datasets ``d0`` and ``d1`` (unpack as ``d0, d1 = pair``)."""

    d0: Any
    d1: Any


def _relation(relation: object) -> Relation:
    if relation == "add_remove":
        return "add_remove"
    if relation == "replace":
        return "replace"
    raise PrivacyParameterError(f"relation must be 'add_remove' or 'replace', got {relation!r}.")


def _size(n: object, minimum: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or int(n) < minimum:
        raise PrivacyParameterError(f"n must be an int >= {minimum}, got {n!r}.")
    return int(n)


def _bounds(bounds: object) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)  # type: ignore[attr-defined]
    except (TypeError, ValueError) as exc:
        raise DataError(f"bounds must be a pair (lower, upper), got {bounds!r}.") from exc
    if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
        raise DataError(f"bounds must be finite with lower < upper, got {bounds!r}.")
    return lo, hi


def count_pair(n: int = 10) -> Pair:
    """``n`` records and the same with one more: a count moves by 1 (add/remove neighbours).

    >>> d0, d1 = count_pair(3)
    >>> d0.size, d1.size
    (3, 4)
    """
    m = _size(n, 0)
    return Pair(np.ones(m), np.ones(m + 1))


def sum_pair(
    bounds: tuple[float, float], n: int = 10, *, relation: Relation = "add_remove"
) -> Pair:
    """A bounded sum's worst pair: ``n`` records at the bound of larger magnitude, and the same
    with one more such record (add/remove) or with one record moved to the other bound (replace).

    >>> d0, d1 = sum_pair((0.0, 5.0), 3)
    >>> d0.tolist(), d1.tolist()
    ([5.0, 5.0, 5.0], [5.0, 5.0, 5.0, 5.0])
    >>> sum_pair((0.0, 5.0), 3, relation="replace").d1.tolist()
    [0.0, 5.0, 5.0]
    """
    lo, hi = _bounds(bounds)
    m = _size(n)
    if _relation(relation) == "replace":
        d0 = np.full(m, hi)
        d1 = d0.copy()
        d1[0] = lo
        return Pair(d0, d1)
    far = hi if abs(hi) >= abs(lo) else lo
    return Pair(np.full(m, far), np.full(m + 1, far))


def mean_pair(
    bounds: tuple[float, float], n: int = 10, *, relation: Relation = "add_remove"
) -> Pair:
    """For means, variances and standard deviations: ``n`` records at the upper bound, and the
    same with one record at the lower bound added (add/remove) or swapped in (replace).

    >>> d0, d1 = mean_pair((0.0, 1.0), 2)
    >>> d0.tolist(), d1.tolist()
    ([1.0, 1.0], [1.0, 1.0, 0.0])
    """
    lo, hi = _bounds(bounds)
    m = _size(n)
    d0 = np.full(m, hi)
    if _relation(relation) == "replace":
        d1 = d0.copy()
        d1[0] = lo
        return Pair(d0, d1)
    return Pair(d0, np.append(d0, lo))


def quantile_pair(
    bounds: tuple[float, float], q: float = 0.5, *, relation: Relation = "add_remove"
) -> Pair:
    """For the ``q``-quantile (the median by default): a few records in two piles at a quarter
    and three quarters of the bounds, sized so that the target rank falls exactly between them,
    and the neighbour with one more record at the lower bound (or, for ``q > 1/2``, the upper
    one), or with a record moved there from the far pile (replace).

    For ``q ≤ 1/2``: 1 record at ``A`` and ``m = round((1 − q)/q)`` at ``B``, so the score
    ``−|(1 − q)·#below − q·#above|`` is 0 between the piles and ``−q(1 + m)`` below ``A``. The
    added record at the lower bound raises the score below ``A`` by ``1 − q`` and lowers it
    between the piles by as much: the two regions' log-probabilities move apart by ``2(1 − q)``,
    the most one record can do, and both regions keep large probabilities. Piling every record on
    one point instead leaves the output almost always on one side for ``q ≠ 1/2`` and shows
    nothing (ε_LB = 0 for ``q = 0.25``).

    >>> d0, d1 = quantile_pair((0.0, 1.0), 0.25)
    >>> d0.tolist(), d1.tolist()
    ([0.25, 0.75, 0.75, 0.75], [0.25, 0.75, 0.75, 0.75, 0.0])
    >>> quantile_pair((0.0, 1.0)).d1.tolist()
    [0.25, 0.75, 0.0]
    >>> quantile_pair((0.0, 1.0), 0.9, relation="replace").d1.tolist()
    [1.0, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.75]
    """
    lo, hi = _bounds(bounds)
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 < float(q) < 1.0:
        raise PrivacyParameterError(f"q must be a fraction in (0, 1), got {q!r}.")
    qq = float(q)
    a, b = lo + (hi - lo) / 4, lo + 3 * (hi - lo) / 4
    if qq <= 0.5:
        near, far, edge = a, b, lo
        m = max(1, round((1 - qq) / qq))
    else:
        near, far, edge = b, a, hi
        m = max(1, round(qq / (1 - qq)))
    d0 = np.array([near] + [far] * m) if qq <= 0.5 else np.array([far] * m + [near])
    if _relation(relation) == "replace":
        d1 = d0.copy()
        d1[int(np.flatnonzero(d0 == far)[0])] = edge
        return Pair(d0, d1)
    return Pair(d0, np.append(d0, edge))


def histogram_pair(edges: npt.ArrayLike, n: int = 10, *, relation: Relation = "add_remove") -> Pair:
    """Records all in the first bin, and one more there (add/remove: one count moves by 1) or one
    moved to the last bin (replace: two counts move by 1).

    >>> d0, d1 = histogram_pair([0, 1, 2, 3], 2, relation="replace")
    >>> d0.tolist(), d1.tolist()
    ([0.5, 0.5], [2.5, 0.5])
    """
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 3 or not np.all(np.isfinite(e)) or not np.all(np.diff(e) > 0):
        raise DataError("edges must be at least 3 finite increasing bin edges.")
    m = _size(n)
    first, last = (e[0] + e[1]) / 2, (e[-2] + e[-1]) / 2
    d0 = np.full(m, first)
    if _relation(relation) == "replace":
        d1 = d0.copy()
        d1[0] = last
        return Pair(d0, d1)
    return Pair(d0, np.append(d0, first))


def noisy_max_pair(k: int = 4, *, monotone: bool = True) -> Pair:
    """Score vectors for report-noisy-max, exponential mechanism and permute-and-flip.

    Candidate 0 starts one behind the others. With ``monotone=True`` (counting queries: one person
    moves every score the same way) the neighbour lifts candidate 0 level with them; otherwise
    (each score of sensitivity 1, any direction) the others also drop by one. Either way the
    probability of selecting candidate 0 changes as much as the mechanism allows.

    >>> d0, d1 = noisy_max_pair(3)
    >>> d0.tolist(), d1.tolist()
    ([0.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    >>> noisy_max_pair(3, monotone=False).d1.tolist()
    [1.0, 0.0, 0.0]
    """
    m = _size(k, 2)
    d0: FloatArray = np.ones(m)
    d0[0] = 0.0
    if monotone:
        return Pair(d0, np.ones(m))
    d1: FloatArray = np.zeros(m)
    d1[0] = 1.0
    return Pair(d0, d1)
