"""How accurate each cell of a grouped query will be, before anything is spent.

Everything here reads the calibrated :class:`~dpkit.frame._calibrate.NoisePlan` (public
parameters only) and computes each output cell's noise half-width the way
:func:`~dpkit.frame._finish.finish` computes the released intervals, so a cell's accuracy is its
released interval's half-width (count, distinct units, sum, histogram bins: exactly; a mean at a
stated public group size: the interval of a release whose noisy count comes out at that size).
A variance or standard deviation at a stated group size gets the half-width that holds for
every group of that size (worst case over the group's private mean and mean square, from the
joint law of its three noises, as ``dpkit.stats.accuracy`` gives for ``var`` with a private n).

Quantile cells get a rank error at leaf resolution (``{name}_rank``, in rows, see
:func:`_tree_rank_error`): their error in value depends on how densely the rows fill the leaves,
which is private.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpkit.errors import PrivacyParameterError
from dpkit.frame._aggs import Aggregation
from dpkit.frame._calibrate import MeasureNoise, NoisePlan
from dpkit.stats._accuracy_var_count import CountLaw, NoiseLaw, private_n_var_error

__all__ = ["cell_accuracy", "kept_from"]


def _mean_half_width(plan: NoisePlan, agg: Aggregation, alpha: float, n: float) -> float:
    """The mean's interval half-width where its noisy count is ``n`` and its centred sum 0.

    :func:`~dpkit.frame._finish._estimates` bounds ``s/n`` over the Bonferroni box of the two
    parts; at ``s = 0`` that range is ``±h_s/(n − h_n)``, capped at the bounds' half-range.
    """
    assert agg.bounds is not None
    ms = agg.measures()
    h_s = plan.of(ms[0]).half_width(alpha / 2)
    h_n = plan.of(ms[-1]).half_width(alpha / 2)
    half = agg.bounds[1] / 2 - agg.bounds[0] / 2
    if n - h_n <= 0:
        return half
    return half * min(1.0, h_s / (n - h_n))


def _var_bound(plan: NoisePlan, agg: Aggregation, alpha: float, n: float) -> float:
    """A bound on ``|released − exact|`` for a variance (or its square root) over any group of
    ``n`` rows, with probability at least ``1 − alpha``.

    :func:`~dpkit.frame._finish._estimates` releases ``h² · clip(clip(S₂/N, 0, 1) −
    clip(S₁/N, −1, 1)², 0, 1)`` from the normalised sums ``S₁ = Σu`` (``u ∈ [−1, 1]``),
    ``S₂ = Σu²`` and the noisy count ``N``: the smallest ``w`` that the joint law of the three
    noises keeps the release within, whatever the group's private mean and mean square
    (:func:`~dpkit.stats._accuracy_var_count.private_n_var_error`, with the estimator's clips),
    capped at ``h²`` (the release and the exact variance both lie in ``[0, h²]``). The standard
    deviation's error is at most the square root of the variance's.
    """
    assert agg.bounds is not None
    s1, s2, rows = (plan.of(m) for m in agg.measures())
    count = CountLaw(rows.kind, float(rows.scale), rows.unit, 0.0)
    err = private_n_var_error(_law(s1), _law(s2), count, n, 1.0, 0.0, alpha, 0, clip=True)
    half = agg.bounds[1] / 2 - agg.bounds[0] / 2
    w = half * half * min(1.0, err)
    return math.sqrt(w) if agg.stat == "std" else w


def _law(m: MeasureNoise) -> NoiseLaw:
    # rows are rounded to the fixed-point grid stochastically (unbiased, far below the noise;
    # as in the released intervals), so no rounding term
    return NoiseLaw(m.kind, m.real_scale, 0.0)


def _tree_rank_error(plan: NoisePlan, agg: Aggregation, alpha: float, q: float) -> float:
    """Rows of rank error of a tree quantile, at leaf resolution, with probability ``1 − alpha``.

    Every node of the tree (``B + B² + … + B^L`` of them) is within ``h`` of its exact count at
    ``alpha`` over all of them (Bonferroni); clipping a noisy count at 0 keeps it within ``h``.
    :func:`~dpkit.frame._finish._tree_quantiles` walks down carrying the rank still to find:
    at the root it is ``q·N̂`` (``|N̂ − N| ≤ Bh``); choosing a child misreads the rows before
    it by at most ``(B − 1)h``; rescaling the rank into the child's own children, whose sum is
    within ``(B + 1)h`` of the child's noisy count, moves it by at most that (the share is at
    most 1). So the exact rank ``q·N`` lies between the released leaf's first row minus ``E``
    and its last row plus ``E``, with ``E = (qB + (B − 1)L + (B + 1)(L − 1) + 1)·h`` (the last
    ``h``: the chosen leaf's own noisy count). A walk that meets an empty node keeps its share:
    the same bound holds (its children's noisy counts are within ``h`` of counts below ``h``).
    """
    b, levels = agg.branching, agg.levels
    nodes = sum(b ** (k + 1) for k in range(levels))
    h = plan.of(agg.measures()[0]).half_width(alpha / nodes)
    return (q * b + (b - 1) * levels + (b + 1) * (levels - 1) + 1) * h


def cell_accuracy(
    plan: NoisePlan,
    aggs: Sequence[Aggregation],
    alpha: float,
    expected_n: float | None = None,
) -> dict[str, float]:
    """Half-width of the ``1 − alpha`` noise interval of every output column of every released
    key (one value per column: every key gets the same noise distribution).

    Counts, distinct units, sums and histogram bins are exact. A mean's interval depends on
    its noisy count: it is given at ``expected_n`` rows per group (a public guess), and left
    out without one; variances and standard deviations get a worst-case bound at
    ``expected_n`` rows (:func:`_var_bound`), and quantiles a rank error in rows under
    ``{name}_rank`` (:func:`_tree_rank_error`).
    """
    out: dict[str, float] = {}
    for agg in aggs:
        ms = agg.measures()
        if agg.stat in ("count", "count_units", "sum"):
            out[agg.alias] = plan.of(ms[0]).half_width(alpha)
        elif agg.stat == "histogram":
            h = plan.of(ms[0]).half_width(alpha)
            for i in range(len(agg.edges) - 1):
                out[f"{agg.alias}_{i}"] = h
        elif agg.stat == "mean" and expected_n is not None:
            out[agg.alias] = _mean_half_width(plan, agg, alpha, float(expected_n))
        elif agg.stat in ("var", "std") and expected_n is not None:
            out[agg.alias] = _var_bound(plan, agg, alpha, float(expected_n))
        elif agg.stat == "quantiles":
            for q in agg.qs:
                out[f"{agg.alias}_{q:g}_rank"] = _tree_rank_error(plan, agg, alpha, q)
    return out


def kept_from(plan: NoisePlan, probability: float, *, keys_per_unit: int = 1) -> int | None:
    """The smallest number of units with which a key is kept with at least ``probability``
    (``None`` with public keys: every key is released)."""
    sel = plan.selection
    if sel is None:
        return None
    if not 0.0 < probability < 1.0:
        raise PrivacyParameterError("probability must be in (0, 1).")
    lo, hi = 0, 1
    while sel.keep_probability(hi, keys_per_unit=keys_per_unit) < probability:
        lo, hi = hi, hi * 2
        if hi > 2**62:  # pragma: no cover - every method keeps a large enough key surely
            raise PrivacyParameterError("no number of units reaches this probability.")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sel.keep_probability(mid, keys_per_unit=keys_per_unit) >= probability:
            hi = mid
        else:
            lo = mid
    return hi
