"""Sum and mean steps made once release what the one-shot release functions would.

:class:`SumSteps` / :class:`MeanSteps` hold everything public that a release prepares (grid,
budget split, calibrated noise, event); a curator makes them once per query and releases many
aggregates through them. These tests compare them with the parts released directly
(:func:`release_parts` on the same parts), draw for draw.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting import Accountant, ApproxDP, Neighbouring
from dpkit.random import seeded
from dpkit.stats._aggregate import (
    MU,
    ClippedMean,
    clamped_sum,
    mean_steps,
    release_mean,
    release_sum,
    sum_steps,
)
from dpkit.stats._common import release_parts
from dpkit.stats._fixed import power_exponent
from dpkit.stats._noisy import Part, plan

ADD = Neighbouring.ADD_REMOVE  # (the statistics' events declare their relation)

_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e300, -1e300, math.inf, -math.inf, math.nan, 7.25]


def test_the_mean_estimate_on_floats_is_numpy_s_bit_for_bit() -> None:
    gen = np.random.default_rng(0)
    for c, lo, hi in [(0.0, 0.0, 1.0), (50.0, 0.0, 100.0), (-0.0, -0.0, 0.0), (-3.5, -7.0, 0.0)]:
        f = ClippedMean(c, lo, hi)
        values = _EDGES + [float(v) for v in gen.normal(0, 100, 40)]
        for s in values:
            for n in values:
                with np.errstate(all="ignore"):  # (∞/∞: numpy warns, Python gives NaN)
                    fast, ref = f(s, n), f(np.float64(s), np.float64(n))
                assert type(fast) is float
                assert np.array_equal(np.float64(fast), ref, equal_nan=True), (s, n)
                assert math.copysign(1.0, fast) == math.copysign(1.0, float(ref)), (s, n)


def _direct_mean(agg, eps, dlt, rng):  # type: ignore[no-untyped-def]
    """The mean's two parts released by release_parts, as the statistic defines them."""
    lo, hi = agg.bounds
    k = power_exponent((lo, hi))
    tlo, thi = round(math.ldexp(lo, k)), round(math.ldexp(hi, k))
    centre = (tlo + thi) // 2
    sens = max(thi - centre, centre - tlo)
    c = math.ldexp(float(centre), -k)
    parts = [Part("centred sum", -k, sens, 1.0), Part("count", 0, 1, (hi - lo) / 2 * MU)]
    return release_parts(
        plan(parts, epsilon=eps, delta=dlt, neighbouring=ADD),
        [agg.total - agg.size * centre, agg.size],
        ClippedMean(c, lo, hi), delta=dlt, accountant=None, rng=rng, statistic="mean",
        sampling_sd=lambda _v, size: (hi - lo) / 2 / math.sqrt(size), limits=(lo, hi),
        corners=True,
    )  # fmt: skip


@pytest.mark.parametrize(("eps", "dlt"), [(1.0, 0.0), (0.01, 0.0), (0.5, 1e-7)])
@pytest.mark.parametrize("bounds", [(0.0, 100.0), (-3.0, 0.25), (10.0, 10.5)])
def test_mean_steps_release_what_the_parts_release(
    eps: float, dlt: float, bounds: tuple[float, float]
) -> None:
    x = np.random.default_rng(1).uniform(bounds[0] - 1, bounds[1] + 1, 2_000)
    agg = clamped_sum(x, bounds)
    steps = mean_steps(bounds, eps, dlt)
    for seed in range(5):
        got = steps.release(agg, None, seeded(seed))
        ref = _direct_mean(agg, eps, dlt, seeded(seed))
        assert got.value == ref.value and got.event == ref.event
        for alpha in (0.05, 0.2):
            assert got.ci(alpha) == ref.ci(alpha)
            assert got.ci(alpha, include_sampling=True) == ref.ci(alpha, include_sampling=True)
        lib = release_mean(agg, epsilon=eps, delta=dlt, rng=seeded(seed))
        assert lib.value == ref.value and lib.ci() == ref.ci()


def test_sum_steps_release_what_one_part_releases() -> None:
    bounds = (-2.0, 5.0)
    agg = clamped_sum(np.random.default_rng(2).uniform(-3, 6, 500), bounds)
    k = power_exponent(bounds)
    sens = max(abs(round(math.ldexp(-2.0, k))), abs(round(math.ldexp(5.0, k))))
    steps = sum_steps(bounds, 0.3, 0.0)
    for seed in range(5):
        got = steps.release(agg, None, seeded(seed))
        rel = release_parts(
            plan([Part("sum", -k, sens)], epsilon=0.3, delta=0.0), [agg.total], lambda t: t,
            delta=0.0, accountant=None, rng=seeded(seed), statistic="sum",
        )  # fmt: skip
        assert got.value == rel.value
        assert release_sum(agg, epsilon=0.3, rng=seeded(seed)).value == got.value


def test_each_release_through_steps_charges_and_draws_its_own() -> None:
    agg = clamped_sum(np.linspace(0, 10, 1001), (0.0, 10.0))
    steps = mean_steps((0.0, 10.0), 0.1, 0.0)
    acct = Accountant(ApproxDP(epsilon=1.0, delta=0.0))
    values = {steps.release(agg, acct, seeded(s)).value for s in range(10)}
    assert len(acct.ledger) == 10 and all(e.event is steps.plan.event for e in acct.ledger)
    assert len(values) > 1  # fresh noise each time
    with pytest.raises(Exception, match="exceed the budget"):
        steps.release(agg, acct, seeded(11))  # the eleventh ε = 0.1 does not fit


def test_steps_refuse_an_aggregate_clamped_to_other_bounds() -> None:
    agg = clamped_sum([1.0, 2.0], (0.0, 4.0))
    with pytest.raises(ValueError, match="other bounds"):
        mean_steps((0.0, 8.0), 1.0, 0.0).release(agg, None, seeded(0))
    with pytest.raises(ValueError, match="other bounds"):
        sum_steps((0.0, 2.0), 1.0, 0.0).release(agg, None, seeded(0))
