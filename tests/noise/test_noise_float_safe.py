"""Float-safe real noise: outputs on a data-independent grid, the Mironov attack, timing claims."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpkit.errors import DataError, PrivacyParameterError
from dpkit.noise import (
    gaussian,
    gaussian_grid,
    laplace,
    laplace_grid,
    round_to_grid,
    rounded_sensitivity,
)
from dpkit.random import seeded_generator
from tests.noise._pmf import CHI2_P_MIN, chi2_pvalue, dlap_cdf


def _on_grid(y: np.ndarray, grid: int) -> bool:
    with np.errstate(over="ignore"):  # values that overflow when scaled are multiples anyway
        scaled = np.ldexp(y, -grid)
    return bool(np.all(scaled == np.rint(scaled)))


def test_round_to_grid_exact() -> None:
    x = np.array([0.0, 1e-300, -1e-300, 0.3, -2.5, 1e300, -1e300, 2.0**60 + 2.0**8, 5e-324])
    for g in (-40, -1, 0, 3, -1070):
        r = round_to_grid(x, g)
        assert _on_grid(r, g)
        assert np.all(np.abs(r - x) <= math.ldexp(0.5, g))
    assert round_to_grid(np.array([0.75]), -1)[0] == 1.0  # ties to even: 1.5 -> 2 halves
    assert round_to_grid(np.array([0.25]), -1)[0] == 0.0  # 0.5 -> 0


def test_laplace_noise_is_discrete_laplace_on_grid() -> None:
    scale = 2.5
    g = laplace_grid(scale)
    y = laplace(np.full(400_000, 7.0), scale, rng=3)
    assert _on_grid(y, g)
    z = np.ldexp(y - 7.0, -g)  # exact: both on the grid, difference well inside 2^53 units
    su = scale / 2.0**g
    cuts = np.unique(np.floor(su * stats.laplace.ppf(np.linspace(0, 1, 41)[1:-1])))
    edges = np.concatenate([[-np.inf], cuts + 0.5, [np.inf]])
    cdf = np.concatenate([[0.0], dlap_cdf(cuts, su), [1.0]])
    assert chi2_pvalue(z.astype(np.int64), edges, np.diff(cdf)) > CHI2_P_MIN


def test_gaussian_noise_on_grid_with_right_variance() -> None:
    sigma = 3.0
    g = gaussian_grid(sigma)
    y = gaussian(np.zeros(400_000), sigma, rng=4)
    assert _on_grid(y, g)
    # variance of a discrete Gaussian with σ ≫ 1 grid step equals σ² to 1e-12; 5 sd of s²
    sd = sigma**2 * math.sqrt(2 / y.size)
    assert abs(float(np.mean(y * y)) - sigma**2) < 5 * sd


def test_mironov_attack_naive_vs_dpkit() -> None:
    """McSherry's (2016) warning (Mironov 2012): x + float Laplace leaks x through the set of
    outputs.

    For input 1, every output in (0, 0.5) is 1 + Y computed exactly, hence a multiple of 2^-53;
    for input 0 the output Y itself has finer bits. So "output in (0, 0.5) and not a multiple of
    2^-53" happens under input 0 and never under input 1: infinite privacy loss.
    """
    rng = np.random.default_rng(2012)
    n = 200_000

    def leaky_event(y: np.ndarray) -> np.ndarray:
        fine = np.ldexp(y, 53) != np.rint(np.ldexp(y, 53))
        return (y > 0) & (y < 0.5) & fine

    naive0 = 0.0 + rng.laplace(0.0, 1.0, n)
    naive1 = 1.0 + rng.laplace(0.0, 1.0, n)
    assert leaky_event(naive0).sum() > 1000  # happens under input 0 ...
    assert leaky_event(naive1).sum() == 0  # ... and never under input 1

    safe0 = laplace(np.zeros(n), 1.0, rng=1)
    safe1 = laplace(np.ones(n), 1.0, rng=2)
    assert leaky_event(safe0).sum() == 0 and leaky_event(safe1).sum() == 0
    # Stronger: both inputs produce outputs on the same grid, and the output set of input 1 is the
    # output set of input 0 shifted by 1 (a grid point): no output is impossible under either.
    g = laplace_grid(1.0)
    assert _on_grid(safe0, g) and _on_grid(safe1, g)


def test_same_seed_same_noise_whatever_the_data() -> None:
    """The noise, and the random stream consumed, do not depend on the input values."""
    for seed in range(5):
        a, b = seeded_generator(seed), seeded_generator(seed)
        ya = laplace(np.array([0.0, 5.0]), 2.0, rng=a)
        yb = laplace(np.array([1000.0, -3.25]), 2.0, rng=b)
        assert np.array_equal(ya - np.array([0.0, 5.0]), yb - np.array([1000.0, -3.25]))
        assert _bytes_used(a) == _bytes_used(b)


def _bytes_used(rng: np.random.Generator) -> int:
    # AESCounter fills 64 bytes per refill; counter[0] counts 16-byte blocks
    s = rng.bit_generator.state["s"]
    return int(16 * int(s["counter"][0]) - 64 + int(s["offset"]))


def _spearman_work_vs_magnitude(draw_one) -> float:  # type: ignore[no-untyped-def]
    rng = seeded_generator(99)
    work, mag = [], []
    for _ in range(600):
        before = _bytes_used(rng)
        mag.append(abs(draw_one(rng)))
        work.append(_bytes_used(rng) - before)
    return float(stats.spearmanr(work, mag).statistic)


def test_work_does_not_track_the_noise_magnitude() -> None:
    """Jin et al. (2022): a sampler whose work grows with |noise| leaks it through timing.

    dpkit draws every release from a whole block of attempts (at least 2^10), so the randomness
    consumed (a proxy for time that is exact and machine-independent) is set by the block, not by
    the one sample released. A one-attempt-at-a-time sampler, by contrast, does visibly more work
    for larger noise; the same statistic catches it, so the check has power.
    """
    rho_dpkit = _spearman_work_vs_magnitude(lambda g: laplace(0.0, 1000.0, rng=g))
    # null sd of Spearman's rho at n = 600 is 1/sqrt(599) ≈ 0.041; 0.2 is ~5 sd
    assert abs(rho_dpkit) < 0.2, rho_dpkit

    def naive_geometric(g: np.random.Generator) -> int:
        v = 0
        while g.random() < math.exp(-1):
            v += 1
        return v

    rho_naive = _spearman_work_vs_magnitude(naive_geometric)
    assert rho_naive > 0.5, rho_naive


def test_rounded_sensitivity() -> None:
    assert rounded_sensitivity(1.0, -10) >= 1.0 + 2.0**-10
    assert rounded_sensitivity(1.0, -10, coordinates=4) >= 1.0 + 4 * 2.0**-10
    assert rounded_sensitivity(1.0, -10, coordinates=4, norm=2) >= 1.0 + 2 * 2.0**-10
    assert rounded_sensitivity(1.0, -10, coordinates=4, norm=2) < 1.0 + 2.01 * 2.0**-10
    with pytest.raises(PrivacyParameterError):
        rounded_sensitivity(1.0, -10, norm=3)
    with pytest.raises(PrivacyParameterError):
        rounded_sensitivity(-1.0, -10)


def test_scalar_in_scalar_out() -> None:
    assert isinstance(laplace(1.0, 1.0, rng=0), float)
    assert isinstance(gaussian(1, 1.0, rng=0), float)
    assert laplace([[1.0, 2.0]], 1.0, rng=0).shape == (1, 2)  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None, [1.0, float("nan")], "a"])
def test_bad_values(bad: object) -> None:
    with pytest.raises(DataError):
        laplace(bad, 1.0, rng=0)
    with pytest.raises(DataError):
        gaussian(bad, 1.0, rng=0)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), None])
def test_bad_noise_scales(bad: object) -> None:
    with pytest.raises(PrivacyParameterError):
        laplace(1.0, bad, rng=0)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        gaussian(1.0, bad, rng=0)  # type: ignore[arg-type]


def test_bad_grid() -> None:
    with pytest.raises(PrivacyParameterError, match="grid"):
        laplace(1.0, 1.0, grid=1.5, rng=0)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="grid"):
        laplace(1.0, 1.0, grid=-5000, rng=0)
    with pytest.raises(PrivacyParameterError, match="too small"):
        laplace(1.0, 1e-320, rng=0)
