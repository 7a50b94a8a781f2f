"""KS exponential mechanism (Wasserman & Zhou 2010): exact sampler against enumeration, and its
rate."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit.accounting import Accountant, ExponentialEvent, Neighbouring, PureDP
from dpkit.random import as_generator
from dpkit.release import ks_synthetic
from dpkit.release._density_noise import SLACK
from dpkit.release._ks_mechanism import KSSampler, gap_utilities


def _enumerate(utility: np.ndarray, k: int, beta: float) -> dict[tuple[int, ...], float]:
    """Every monotone path C_0 ≤ … ≤ C_{m−2} ≤ k with its exact probability."""
    rows = utility.shape[0]
    weights = {}
    for path in itertools.combinations_with_replacement(range(k + 1), rows):
        u = max(utility[j, c] for j, c in enumerate(path))
        weights[(*path, k)] = math.exp(-beta * u)
    total = sum(weights.values())
    return {p: w / total for p, w in weights.items()}


def _ks_true(x: np.ndarray, grid: np.ndarray, path: tuple[int, ...], k: int) -> float:
    """n‖F_x − F_z‖∞ by brute force over a fine set of points (checks the gap utilities)."""
    z = np.repeat(grid, np.diff(np.r_[0, path]))
    t = np.sort(np.r_[x, grid, x - 1e-9, grid - 1e-9, grid + 1e-9])
    fx = np.searchsorted(np.sort(x), t, side="right") / x.size
    fz = np.searchsorted(z, t, side="right") / k
    return float(np.max(np.abs(fx - fz)) * x.size)


@pytest.mark.parametrize(("n", "epsilon"), [(4, 2.0), (40, 5.0)])
def test_sampler_matches_full_enumeration(n: int, epsilon: float) -> None:
    # m = 4 grid points, k = 3: 20 paths. With n = 40, ε = 5 the utility range is nε/2 = 100
    # in exponent units, so the level refinement and the rejection step are exercised.
    rng = np.random.default_rng(n)
    x = np.round(rng.beta(2, 3, size=n), 3)
    grid = np.linspace(0, 1, 4)
    k = 3
    util = gap_utilities(x, grid, k)
    probs = _enumerate(util, k, epsilon * SLACK / (2 * k))
    for path in probs:  # the integer gap utilities are exactly k · n‖F_x − F_z‖∞
        u = max(util[j, c] for j, c in enumerate(path[:-1]))
        assert u / k == pytest.approx(_ks_true(x, grid, path, k), abs=1e-6)
    sampler = KSSampler(util, epsilon * SLACK / (2 * k))
    gen = np.random.default_rng(7)
    draws = [tuple(sampler.draw(gen)) for _ in range(5_000)]
    keys = sorted(probs, key=lambda p: -probs[p])
    expected = np.array([probs[p] for p in keys]) * len(draws)
    tally: dict[tuple[int, ...], int] = {}
    for d in draws:
        tally[d] = tally.get(d, 0) + 1
    observed = np.array([tally.get(p, 0) for p in keys])
    big = expected >= 5  # pool rare paths so the chi-square approximation holds
    observed = np.r_[observed[big], observed[~big].sum()]
    expected = np.r_[expected[big], expected[~big].sum()]
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_public_function_uses_the_exact_sampler() -> None:
    x = np.array([0.1, 0.35, 0.4, 0.8])
    out = ks_synthetic(x, bounds=(0, 1), epsilon=2.0, size=3, grid=4, rng=11)
    grid = np.linspace(0, 1, 4)
    sampler = KSSampler(gap_utilities(x, grid, 3), Fraction(2.0 * SLACK) / 6)
    # the same generator ks_synthetic builds from rng=11 (seeded AES counter), so the same draws
    path = sampler.draw(as_generator(11))
    assert np.array_equal(out.values, np.repeat(grid, np.diff(np.r_[0, path])))
    # and a different stream gives a different sample here (the comparison has power)
    others = {
        tuple(KSSampler(gap_utilities(x, grid, 3), Fraction(2.0 * SLACK) / 6).draw(as_generator(s)))
        for s in range(12, 40)
    }
    assert len(others) > 1
    # (declaring the relation its utilities are for: add/remove by default)
    assert out.event == ExponentialEvent(epsilon=2.0 * SLACK, neighbouring=Neighbouring.ADD_REMOVE)


def test_ks_error_is_about_n_to_minus_one_third() -> None:
    # Wasserman and Zhou (2010): k ≍ n^{2/3} gives ‖F − F_z‖∞ = O_P(n^{-1/3}). Over n = 250,
    # 2000, 16000 (4 replications), the slope of log KS error on log n is −1/3 ± 0.1, and
    # n^{1/3}·error stays between 0.5 and 3 (measured ≈ 0.8–1.0 for this density).
    sizes = [250, 2000, 16_000]
    errors = []
    for n in sizes:
        errs = []
        for r in range(4):
            x = np.random.default_rng(r).beta(2, 5, size=n)
            z = ks_synthetic(x, bounds=(0, 1), epsilon=1.0, n=n, rng=100 + r)
            assert z.k == math.ceil(n ** (2 / 3) - 1e-9)
            errs.append(stats.kstest(z.values, stats.beta(2, 5).cdf).statistic)
        errors.append(float(np.mean(errs)))
    slope = np.polyfit(np.log(sizes), np.log(errors), 1)[0]
    assert -1 / 3 - 0.1 < slope < -1 / 3 + 0.1, slope
    scaled = np.array(errors) * np.array(sizes) ** (1 / 3)
    assert np.all((scaled > 0.5) & (scaled < 3.0)), scaled


def test_charges_exponential_event_and_noisy_count() -> None:
    acct = Accountant(PureDP(epsilon=1.0))
    x = np.random.default_rng(3).uniform(size=500)
    z = ks_synthetic(x, bounds=(0, 1), epsilon=1.0, accountant=acct, rng=2)
    assert acct.spent.epsilon == pytest.approx(1.0)
    assert 40 < z.k < 90  # k = ceil(n̂^{2/3}) with n̂ a noisy count near 500 (k(500) = 63)
    assert np.all(np.isin(z.values, z.grid))
    assert z.cdf([1.0])[0] == 1.0


def test_empty_data_gives_a_sample() -> None:
    z = ks_synthetic(np.empty(0), bounds=(0, 1), epsilon=1.0, size=5, grid=6, rng=3)
    assert z.values.size == 5
