"""Regression tests from the independent review of the density releases."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.accounting import Accountant, PureDP


def test_bernstein_large_epsilon_does_not_refuse_after_charging() -> None:
    # At ε = 2^30 the fixed point had 2^49 units per record, so 10,000 records overflowed the
    # int64 lattice sums: a DataError raised after the accountant had been charged.
    from dpkit.release import bernstein_density

    x = np.random.default_rng(0).uniform(size=10_000)
    acct = Accountant(PureDP(epsilon=2.0**31))
    dens = bernstein_density(
        x,
        bounds=(0, 1),
        bandwidth=0.3,
        epsilon=2.0**30,
        degree=1,
        n=x.size,
        accountant=acct,
        rng=1,
    )
    # with essentially no noise the lattice values are the exact KDE at the two nodes
    const = 1.0 / np.sqrt(2 * np.pi * 0.09)
    exact = const * np.exp(-0.5 * (x[None, :] - np.array([[0.0], [1.0]])) ** 2 / 0.09).mean(1)
    assert np.allclose(dens.raw, exact, rtol=1e-6)


def test_series_large_epsilon_sums_do_not_wrap_around() -> None:
    # At ε = 1e8 the fixed point had 2^47 units per record: 2^16 records wrapped the int64 sum
    # silently, releasing a coefficient of the wrong sign.
    from dpkit.release import series_density

    x = np.zeros(70_000)  # ψ_1(0) = √2 for every record: β_1 = √2
    dens = series_density(x, bounds=(0, 1), epsilon=1e8, degree=1, n=x.size, rng=1)
    assert dens.raw[0] == pytest.approx(np.sqrt(2.0), rel=1e-6)
