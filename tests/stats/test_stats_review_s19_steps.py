"""Review of the sum and mean steps: bounds compared by their bits, arguments checked when the
steps are made (before any charge), and the float-only corners only where declared."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import DataError, DPKitError, PrivacyParameterError
from dpkit.random import seeded
from dpkit.stats._aggregate import clamped_sum, mean_steps, sum_steps
from dpkit.stats._noisy import Part, plan
from dpkit.stats._release import PartsBox


def test_steps_refuse_an_aggregate_whose_bounds_differ_only_in_the_sign_of_zero() -> None:
    agg = clamped_sum(np.zeros(3), (-0.0, 1.0))
    for steps in (mean_steps((0.0, 1.0), 0.05, 0.0), sum_steps((0.0, 1.0), 0.05, 0.0)):
        with pytest.raises(ValueError, match="other bounds"):
            steps.release(agg, None, seeded(0))
    same = mean_steps((-0.0, 1.0), 0.05, 0.0).release(agg, None, seeded(0))
    assert 0.0 <= same.value <= 1.0


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: mean_steps((0.0, 1.0), 1.0, 0.0, n=0), DataError),
        (lambda: mean_steps((0.0, 1.0), 0.0, 0.0), PrivacyParameterError),
        (lambda: mean_steps((0.0, 1.0), 1.0, 1.0), PrivacyParameterError),
        (lambda: mean_steps((1.0, 0.0), 1.0, 0.0), DPKitError),
        (lambda: sum_steps((0.0, 1.0), float("nan"), 0.0), PrivacyParameterError),
        (lambda: sum_steps((0.0, float("inf")), 1.0, 0.0), DPKitError),
    ],
)
def test_bad_steps_are_refused_when_made(make: object, error: type[Exception]) -> None:
    acct = Accountant(ApproxDP(epsilon=10.0, delta=0.0))
    with pytest.raises(error):
        make().release(clamped_sum([0.5], (0.0, 1.0)), acct, seeded(0))  # type: ignore[operator]
    assert acct.ledger == ()


def test_corners_of_an_undeclared_statistic_keep_the_array_path() -> None:
    # Plain arithmetic on Python floats would raise ZeroDivisionError; on arrays it gives
    # non-finite values, which the interval drops (here: all of them, so it is refused).
    pl = plan([Part("s", 0, 1), Part("n", 0, 1)], epsilon=1.0, delta=0.0)
    box = PartsBox((3.0, 0.0), pl.parts, lambda s, n: s / (n - n), corners=True)
    with pytest.raises(DPKitError, match="too large"):
        box.interval(3.0, 0.05, False, "box")
