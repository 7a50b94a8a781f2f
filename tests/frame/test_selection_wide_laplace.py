"""Laplace key selection with a wide noise (a tiny ε): the threshold still bounds δ.

Its threshold was solved with ``ln r``, ``r = e^{-1/b}`` rounded to within 2^-53 of 1, so at
``b`` near the sampler's limit (4.5e15) ``ln r`` was 25% off and a unit alone in its keys passed
3 times as often as δ allows."""

from __future__ import annotations

import pytest

from dpkit.frame._selection import key_selection
from dpkit.mechanisms._tails import discrete_laplace_upper_tail


@pytest.mark.parametrize("epsilon", [1.0, 1e-6, 1e-10, 1e-12, 1e-15])
def test_laplace_selection_keeps_a_lone_units_keys_at_most_delta(epsilon: float) -> None:
    delta = 1e-5
    sel = key_selection("laplace", epsilon=epsilon, delta=delta, max_groups=2, replace=False)
    assert sel.scale is not None
    tail = discrete_laplace_upper_tail(float(sel.scale), sel.threshold - 1)
    assert 1.0 - (1.0 - tail) ** 2 <= delta  # a lone unit's 2 keys, 1 unit each
    # and not looser than it needs: one less would break it (the tail moves by a relative
    # 1/b per step, so this holds while 1/b is far above the float resolution)
    if epsilon >= 1e-10:
        wider = discrete_laplace_upper_tail(float(sel.scale), sel.threshold - 2)
        assert 1.0 - (1.0 - wider) ** 2 > delta - 1e-14
