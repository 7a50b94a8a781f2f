"""Audit cases for every statistic of :mod:`dpkit.stats`, each on a hard pair of neighbours.

Each statistic is called exactly as a user would (``f(x, bounds=..., epsilon=..., rng=...)``) and
its released value is the output audited. The claimed ε is read from the event of the
:class:`~dpkit.stats.Release` (:func:`dpkit.accounting.epsilon_of` at the statistic's δ); both
datasets must produce the same event, since an event that depended on the data would itself leak.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta, check_epsilon
from dpkit.accounting import Event, Neighbouring, epsilon_of
from dpkit.audit._cases import AuditCase
from dpkit.audit._pairs import count_pair, histogram_pair, quantile_pair, sum_pair
from dpkit.errors import DataError, DPKitError

__all__ = ["statistic_cases"]

Array = npt.NDArray[Any]
Call = Callable[[Any, np.random.Generator], Any]

UNIT = (0.0, 1.0)
"""Bounds of every audited dataset."""

SLOW = {"stats.mean (δ>0)": 0.05, "stats.count (δ>0)": 0.1, "stats.corr": 0.5}
"""Run-count multipliers for statistics costing 1.5-40 ms a call, so `dpkit audit` stays quick."""


def _case(
    name: str,
    call: Call,
    d0: Any,
    d1: Any,
    *,
    delta: float,
    factor: float,
    description: str,
) -> AuditCase:
    r0 = call(d0, np.random.default_rng(0))
    r1 = call(d1, np.random.default_rng(0))
    if r0.event != r1.event:
        raise DPKitError(
            f"{name}: the privacy event depends on the data ({r0.event} vs {r1.event})."
        )
    claim = epsilon_of(r0.event, delta=delta)

    def mech(d: Any, rng: np.random.Generator) -> Array:
        return np.asarray(call(d, rng).value, dtype=np.float64)

    return AuditCase(name, mech, d0, d1, claimed_epsilon=claim, delta=delta,
                     trials_factor=factor, description=description)  # fmt: skip


def statistic_cases(
    epsilon: float = 1.0, *, delta: float = 1e-5, factor: float = 0.04
) -> list[AuditCase]:
    """Audit cases for the statistics of :mod:`dpkit.stats` at ``epsilon`` (pure, and with
    ``delta`` for those offering the Gaussian variant). ``factor`` scales their runs (the
    statistics are audited one call at a time).

    >>> [c.name for c in statistic_cases(1.0)][:5]
    ['stats.count', 'stats.histogram', 'stats.sum', 'stats.mean', 'stats.count (δ>0)']
    """
    from dpkit import stats

    eps = check_epsilon(epsilon)
    dlt = check_delta(delta, allow_zero=False)
    cases: list[AuditCase] = []

    def add(name: str, call: Call, pair: tuple[Any, Any], what: str, d: float = 0.0) -> None:
        f = factor * SLOW.get(name, 1.0)
        cases.append(_case(name, call, pair[0], pair[1], delta=d, factor=f, description=what))

    edges = np.linspace(0.0, 1.0, 5)
    for d, tag in ((0.0, ""), (dlt, " (δ>0)")):

        def count(x: Any, g: np.random.Generator, d: float = d) -> Any:
            return stats.count(x, epsilon=eps, delta=d, rng=g)

        def histogram(x: Any, g: np.random.Generator, d: float = d) -> Any:
            return stats.histogram(x, bins=edges, epsilon=eps, delta=d, rng=g)

        def total(x: Any, g: np.random.Generator, d: float = d) -> Any:
            return stats.sum(x, bounds=UNIT, epsilon=eps, delta=d, rng=g)

        def mean(x: Any, g: np.random.Generator, d: float = d) -> Any:
            return stats.mean(x, bounds=UNIT, epsilon=eps, delta=d, rng=g)

        add(f"stats.count{tag}", count, count_pair(10), "10 vs 11 records", d)
        add(f"stats.histogram{tag}", histogram, histogram_pair(edges, 10),
            "4 bins, one more record in bin 0", d)  # fmt: skip
        add(f"stats.sum{tag}", total, sum_pair(UNIT, 10), "10 vs 11 records at 1", d)
        # Records at the centre: the centred sum is 0, so the noisy count barely moves the
        # estimate and the added record's full step in the sum shows (ε_LB 0.48 at ε = 1 from
        # 3000 runs, against 0.30 for 10 records at 1 plus one at 0).
        add(f"stats.mean{tag}", mean, (np.full(3, 0.5), np.array([0.5, 0.5, 0.5, 1.0])),
            "3 records at 0.5, plus one at 1", d)  # fmt: skip
    # var, std, cov and corr combine several noisy sums, so a pair moving the statistic a little
    # shows almost nothing (ε_LB 0 on 10 vs 11 records). Under replace-one neighbours n is public
    # and the count is not noised, and a single record can then carry one noisy sum's full
    # sensitivity straight into the value; the pairs were picked by simulating the released value.
    rep = Neighbouring.REPLACE
    # Ten records: nine at 1 and one moved from 0 to 1. Σu moves by its whole sensitivity 2 while
    # Σ(u² − 1/2) stays put, and with the mean near the bound the variance follows Σu almost
    # linearly (ε_LB 0.71-0.82 at ε = 2, against 0.49 for two records 0, 1 → 0.5, 1).
    ones = np.ones(10)
    var_pair = (np.append(ones[:-1], 0.0), ones)
    add("stats.var",
        lambda x, g: stats.var(x, bounds=UNIT, epsilon=eps, rng=g, neighbouring=rep),
        var_pair, "replace: 9 records at 1 and one at 0 → 1")  # fmt: skip
    add("stats.std",
        lambda x, g: stats.std(x, bounds=UNIT, epsilon=eps, rng=g, neighbouring=rep),
        var_pair, "replace: 9 records at 1 and one at 0 → 1")  # fmt: skip
    # 100 pairs at the four corners in equal numbers (Σu = Σv = Σuv = 0, both variances 1/4) and
    # one pair moved from (1, 0) to (1, 1): Σuv moves by its whole sensitivity 2, the means and
    # variances barely move, so cov and corr are close to a scaled noisy Σuv. Flipping y maps d0
    # onto d1, so the released values are mirror images (cov ε_LB 0.54-0.58, corr 0.34-0.35).
    corner_x = np.array([0.0, 0.0, 1.0, 1.0] * 25 + [1.0])
    corner_y = np.array([0.0, 1.0, 0.0, 1.0] * 25 + [0.0])
    xy0, xy1 = (corner_x, corner_y), (corner_x, np.append(corner_y[:-1], 1.0))
    add("stats.cov",
        lambda xy, g: stats.cov(xy[0], xy[1], bounds=(UNIT, UNIT), epsilon=eps, rng=g,
                                neighbouring=rep),
        (xy0, xy1), "replace: 25 pairs at each corner, and one (1, 0) → (1, 1)")  # fmt: skip
    add("stats.corr",
        lambda xy, g: stats.corr(xy[0], xy[1], bounds=(UNIT, UNIT), epsilon=eps, rng=g,
                                 neighbouring=rep),
        (xy0, xy1), "replace: 25 pairs at each corner, and one (1, 0) → (1, 1)")  # fmt: skip
    # The Gaussian mean with unknown n mixes two noisy sums (ε_LB 0 at ε = 1); with n public
    # (replace-one neighbours) it is one noisy centred sum, moved by its whole sensitivity here.
    add("stats.mean (δ>0, replace)",
        lambda x, g: stats.mean(x, bounds=UNIT, epsilon=eps, delta=dlt, rng=g, neighbouring=rep),
        (np.zeros(3), np.array([0.0, 0.0, 1.0])), "replace: 3 at 0, one → 1", dlt)  # fmt: skip
    add("stats.median",
        lambda x, g: stats.median(x, bounds=UNIT, epsilon=eps, rng=g),
        quantile_pair(UNIT), "records at 0.25, 0.75, plus one at 0")  # fmt: skip
    add("stats.quantile",
        lambda x, g: stats.quantile(x, 0.25, bounds=UNIT, epsilon=eps, rng=g),
        quantile_pair(UNIT, 0.25), "1 record at 0.25, 3 at 0.75, plus one at 0")  # fmt: skip
    # stats.bounds refuses (DataError, budget spent) when no class count clears its threshold
    # τ = ln(257/β)/ε; the refusal is an output too, coded (0, 0). Near τ both outcomes occur.
    tau = math.log(257 / 0.01) / eps
    k = max(1, round(tau))

    class _Refused:
        value = (0.0, 0.0)

    def private_range(x: Any, g: np.random.Generator) -> Any:
        try:
            return stats.bounds(x, epsilon=eps, rng=g)
        except DataError:
            return _Refused()

    event = stats.bounds(np.ones(4 * k + 100), epsilon=eps, rng=0).event
    cases.append(
        AuditCase("stats.bounds", lambda x, g: np.asarray(private_range(x, g).value),
                  np.ones(k), np.ones(k + 1), claimed_epsilon=epsilon_of(cast(Event, event)),
                  trials_factor=factor,
                  description=f"{k} vs {k + 1} records at 1 (a count near the threshold)")
    )  # fmt: skip
    return cases
