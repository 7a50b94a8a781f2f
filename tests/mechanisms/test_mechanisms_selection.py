"""Exponential mechanism, its interval form, report-noisy-max and permute-and-flip.

Selection frequencies are compared with exact probabilities by chi-square at p > 1e-4 with
fixed seeds (see test_mechanisms_additive.py for the rationale).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpkit.errors import DataError
from dpkit.mechanisms import Exponential, PermuteAndFlip, ReportNoisyMax, interval_grid

P_MIN = 1e-4


def _frequencies(draw: object, m: int, n: int) -> np.ndarray:
    return np.bincount([draw() for _ in range(n)], minlength=m)  # type: ignore[operator]


def test_exponential_frequencies_match_softmax() -> None:
    scores = np.array([0.0, 1.0, 2.0, 5.0, 4.5])
    em = Exponential(epsilon=1.0, sensitivity=1.0)
    p = np.exp(scores / 2) / np.exp(scores / 2).sum()  # exp(ε u / 2Δ) normalised
    assert np.allclose(em.probabilities(scores), p)
    gen = np.random.default_rng(21)
    counts = _frequencies(lambda: em.select_index(scores, rng=gen), 5, 20_000)
    assert stats.chisquare(counts, p * 20_000).pvalue > P_MIN


def test_exponential_monotonic_doubles_the_rate() -> None:
    em = Exponential(epsilon=1.0, sensitivity=2.0, monotonic=True)
    assert em.scale == 0.5
    assert Exponential(epsilon=1.0, sensitivity=2.0).scale == 0.25


def test_exponential_never_underflows() -> None:
    # diffprivlib issue #107: weights exp(ε u) underflow to 0 for very negative scores
    em = Exponential(epsilon=1.0)
    scores = np.array([-1e6, -2e6, -1e6 - 3.0, -5e5 - 1e3])
    assert em.select_index(scores, rng=0) == 3
    big = Exponential(epsilon=50.0)
    assert big.select_index([-1e300, 0.0, -1e300], rng=1) == 1


def test_select_returns_candidate_and_checks_lengths() -> None:
    em = Exponential(epsilon=1.0)
    assert em.select(["x", "y"], [0.0, 100.0], rng=0) == "y"
    with pytest.raises(DataError, match="candidates"):
        em.select(["x"], [0.0, 1.0])
    for bad in ([], [math.nan], [[1.0]], None):
        with pytest.raises(DataError):
            em.select_index(bad)


def _brute_force_interval(
    points: np.ndarray, score: object, lo: float, hi: float, grid: int, scale: float, atoms: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Exponential mechanism over every grid point, straight from the definition."""
    step = 2.0**grid
    ys = np.arange(math.ceil(lo / step), math.floor(hi / step) + 1) * step
    x = np.rint(np.clip(points, lo, hi) / step) * step
    if atoms:
        u = np.array([score((x < y).sum(), (x > y).sum()) for y in ys])  # type: ignore[operator]
    else:
        u = np.array([score[(x <= y).sum()] for y in ys])  # type: ignore[index]
    w = np.exp(scale * (u - u.max()))
    return ys, w / w.sum()


def test_interval_with_atoms_matches_brute_force() -> None:
    pts = np.array([0.2, 0.5, 0.5, 0.55, 0.9, 3.0])  # a tie, a point outside the bounds
    lo, hi, grid = 0.0, 1.0, -4  # 17 grid points
    em = Exponential(epsilon=1.5)

    def median_score(less: np.ndarray, greater: np.ndarray) -> np.ndarray:
        return -np.abs(np.asarray(greater) - np.asarray(less))  # McSherry's (2016) median score

    ys, p = _brute_force_interval(pts, median_score, lo, hi, grid, em.scale, atoms=True)
    gen = np.random.default_rng(31)
    out = np.array(
        [em.select_interval(pts, median_score, (lo, hi), grid=grid, rng=gen) for _ in range(8_000)]
    )
    idx = np.rint(out / 2.0**grid).astype(int) - int(ys[0] / 2.0**grid)
    counts = np.bincount(idx, minlength=ys.size)
    keep = p * 8_000 >= 5  # chi-square needs expected counts ≥ 5; pool the rest
    obs, exp = counts[keep], p[keep] * 8_000
    if not keep.all():
        obs, exp = np.append(obs, counts[~keep].sum()), np.append(exp, p[~keep].sum() * 8_000)
    assert stats.chisquare(obs, exp).pvalue > P_MIN
    # the reported cell probabilities agree with the brute force too
    first, last, cell_p = em.interval_probabilities(pts, median_score, (lo, hi), grid=grid)
    for a, b, q in zip(first, last, cell_p, strict=True):
        assert q == pytest.approx(p[(ys >= a) & (ys <= b)].sum(), abs=1e-12)


def test_interval_gap_scores_match_brute_force() -> None:
    pts = np.array([0.1, 0.3, 0.3, 0.7])
    gap_scores = np.array([0.0, 1.0, 2.0, 3.0, 1.0])  # n + 1 scores
    lo, hi, grid = 0.0, 1.0, -3
    em = Exponential(epsilon=2.0)
    ys, p = _brute_force_interval(pts, gap_scores, lo, hi, grid, em.scale, atoms=False)
    gen = np.random.default_rng(32)
    out = np.array(
        [em.select_interval(pts, gap_scores, (lo, hi), grid=grid, rng=gen) for _ in range(8_000)]
    )
    counts = np.bincount(np.rint(out * 8).astype(int), minlength=ys.size)
    assert stats.chisquare(counts, p * 8_000).pvalue > P_MIN


def _median_score(less: np.ndarray, greater: np.ndarray) -> np.ndarray:
    return -np.abs(greater - less)


def test_seed001_concentrated_median() -> None:
    # McSherry 2016: 1,000 points in [0.123, 0.124], bounds [-1, 1], ε = 0.1: "the samples mostly
    # all lie within an interval about 0.00006 wide" around 0.1235, though the bounds are 2000×
    # wider
    x = np.sort(np.random.default_rng(1).uniform(0.123, 0.124, 1000))
    em = Exponential(epsilon=0.1)
    first, last, p = em.interval_probabilities(x, _median_score, (-1.0, 1.0))

    def mass_beyond(w: float) -> float:  # exact probability of landing farther than w
        return float(p[(last < 0.1235 - w) | (first > 0.1235 + w)].sum())

    assert mass_beyond(1e-4) < 2e-4  # within ~0.0001 "almost always"
    assert mass_beyond(2e-4) < 1e-8
    assert mass_beyond(0.0015) < 1e-20  # outside the data's range: as if it were impossible
    gen = np.random.default_rng(2)
    draws = [em.select_interval(x, _median_score, (-1.0, 1.0), rng=gen) for _ in range(100)]
    assert np.all(np.abs(np.array(draws) - 0.1235) < 2e-4)


def test_seed001_all_equal_median() -> None:
    # McSherry 2016: 1,000 copies of 0.4 -> exactly 0.4 (to the grid) but with probability ~exp(-22)
    x = np.full(1000, 0.4)
    em = Exponential(epsilon=0.1)
    grid = interval_grid(-1.0, 1.0)
    target = np.rint(0.4 / 2.0**grid) * 2.0**grid
    first, last, p = em.interval_probabilities(x, _median_score, (-1.0, 1.0))
    atom = (first == target) & (last == target)
    assert 1.0 - p[atom].sum() < math.exp(-20)
    gen = np.random.default_rng(3)
    assert all(
        em.select_interval(x, _median_score, (-1.0, 1.0), rng=gen) == target for _ in range(50)
    )


def test_interval_outputs_on_grid_within_bounds() -> None:
    x = np.random.default_rng(4).normal(50, 10, 5000)
    em = Exponential(epsilon=1.0)
    g = interval_grid(0.0, 100.0)
    gen = np.random.default_rng(5)
    for _ in range(20):
        y = em.select_interval(x, _median_score, (0.0, 100.0), rng=gen)
        assert 0.0 <= y <= 100.0 and (y / 2.0**g).is_integer()
        assert abs(y - 50) < 2  # the median of N(50, 10) with n=5000, at ε = 1


def test_interval_unsorted_points_and_huge_n() -> None:
    em = Exponential(epsilon=10.0)
    x = np.random.default_rng(6).uniform(-5, 5, 200_000)
    y = em.select_interval(x, _median_score, (-5.0, 5.0), rng=1)  # unsorted: sorted internally
    assert abs(y - np.median(x)) < 0.01


def test_interval_grid_keeps_points_exact() -> None:
    g = interval_grid(1e6, 1e6 + 1)
    assert g >= math.frexp(1e6 + 1)[1] - 53  # every grid point K·2^g has |K| < 2^53
    em = Exponential(epsilon=1.0)
    y = em.select_interval([1e6 + 0.5], [0.0, 0.0], (1e6, 1e6 + 1), rng=0)
    assert 1e6 <= y <= 1e6 + 1


@pytest.mark.parametrize(
    "bounds", [(1.0, 0.0), (0.0, 0.0), (0.0, math.inf), (math.nan, 1.0), None, (1.0,)]
)
def test_interval_bad_bounds(bounds: object) -> None:
    with pytest.raises(DataError):
        Exponential(epsilon=1.0).select_interval([0.5], [0.0, 0.0], bounds)  # type: ignore[arg-type]


def test_interval_bad_inputs() -> None:
    em = Exponential(epsilon=1.0)
    with pytest.raises(DataError, match="one entry per gap"):
        em.select_interval([0.1, 0.2], [0.0, 1.0], (0.0, 1.0))
    with pytest.raises(DataError, match="NaN"):
        em.select_interval([0.1, math.nan], [0.0, 1.0, 0.0], (0.0, 1.0))
    with pytest.raises(DataError, match="vectorised"):
        em.select_interval([0.1], lambda less, greater: 1.0, (0.0, 1.0))


def _pf_exact(scores: np.ndarray, c: float) -> np.ndarray:
    """Permute-and-flip probabilities by enumerating orders, independently of the library."""
    from itertools import permutations

    p = np.exp(c * (scores - scores.max()))
    out = np.zeros(scores.size)
    for order in permutations(range(scores.size)):
        alive = 1.0
        for r in order:
            out[r] += alive * p[r] / math.factorial(scores.size)
            alive *= 1 - p[r]
    return out


@pytest.mark.parametrize("monotonic", [False, True])
def test_permute_and_flip_matches_enumeration(monotonic: bool) -> None:
    scores = np.array([3.0, 5.0, 4.0, 1.0])
    pf = PermuteAndFlip(epsilon=1.0, monotonic=monotonic)
    exact = _pf_exact(scores, 1.0 if monotonic else 0.5)
    assert np.allclose(pf.probabilities(scores), exact, atol=1e-9)
    gen = np.random.default_rng(41)
    counts = _frequencies(lambda: pf.select_index(scores, rng=gen), 4, 20_000)
    assert stats.chisquare(counts, exact * 20_000).pvalue > P_MIN


def test_permute_and_flip_handles_large_gaps_and_real_scores() -> None:
    pf = PermuteAndFlip(epsilon=1.0)
    assert pf.select_index([0.0, 1e9, -1e12], rng=0) == 1
    scores = np.array([0.1, 0.35, 0.2])
    exact = _pf_exact(scores, 0.5)
    assert np.allclose(pf.probabilities(scores), exact, atol=1e-9)


def test_permute_and_flip_clamps_scores_that_would_overflow() -> None:
    # never refused on a score's value: clamped to ±score_limit (1-Lipschitz per score)
    pf = PermuteAndFlip(epsilon=1.0)
    assert pf.select_index([1e300, 0.0], rng=0) == pf.select_index([pf.score_limit, 0.0], rng=0)
    assert PermuteAndFlip(epsilon=1.0, sensitivity=1e10).select_index([1e300, 0.0], rng=0) == 0


def test_permute_and_flip_beats_exponential() -> None:
    # McKenna & Sheldon (2020): never larger expected error than the exponential mechanism
    scores = np.array([10.0, 9.0, 7.0, 7.0, 2.0, 0.0])
    pf = PermuteAndFlip(epsilon=1.0).probabilities(scores)
    em = Exponential(epsilon=1.0).probabilities(scores)
    gap = scores.max() - scores
    assert (pf * gap).sum() <= (em * gap).sum()


def test_report_noisy_max_exponential_is_permute_and_flip() -> None:
    # Ding, Kifer et al. (2021): report-noisy-max with exponential noise = permute-and-flip
    scores = np.array([2.0, 0.0, 3.0, 2.5])
    rnm = ReportNoisyMax(epsilon=2.0)
    exact = _pf_exact(scores, 1.0)
    gen = np.random.default_rng(51)
    counts = _frequencies(lambda: rnm.select_index(scores, rng=gen), 4, 20_000)
    assert stats.chisquare(counts, exact * 20_000).pvalue > P_MIN


def test_report_noisy_max_gumbel_is_exponential_mechanism() -> None:
    scores = np.array([2.0, 0.0, 3.0, 2.5])
    rnm = ReportNoisyMax(epsilon=2.0, noise="gumbel")
    p = Exponential(epsilon=2.0).probabilities(scores)
    gen = np.random.default_rng(52)
    counts = _frequencies(lambda: rnm.select_index(scores, rng=gen), 4, 20_000)
    assert stats.chisquare(counts, p * 20_000).pvalue > P_MIN
    assert rnm.select(["a", "b", "c", "d"], [0, 0, 1e6, 0], rng=0) == "c"


@pytest.mark.parametrize(("whole", "num"), [(0, 1), (0, 3), (1, 0), (2, 1)])
def test_exact_coin_of_permute_and_flip(whole: int, num: int) -> None:
    from dpkit.mechanisms._permute_and_flip import _ONE, coins

    gen = np.random.default_rng(60 + num)
    gamma = whole * _ONE + _ONE * num // 4  # γ = whole + num/4, in units of 2**-60
    hits = int(coins(gen, [gamma] * 40_000).sum())
    assert stats.binomtest(hits, 40_000, math.exp(-(whole + num / 4))).pvalue > P_MIN


@pytest.mark.parametrize(("whole", "num"), [(0, 1), (1, 3)])
def test_exact_fallback_of_the_coin(whole: int, num: int) -> None:
    # The exact path (taken when the float bracket cannot decide) on its own, from no known bits
    from dpkit.mechanisms._permute_and_flip import _ONE, _resolve

    gen = np.random.default_rng(70 + num)
    gamma = whole * _ONE + _ONE * num // 4
    # 4,000 draws (the decimal path is slow): a bias of 0.04 would be ~5 standard errors
    hits = sum(_resolve(gen, gamma, 0, 0) for _ in range(4_000))
    assert stats.binomtest(hits, 4_000, math.exp(-(whole + num / 4))).pvalue > P_MIN


@settings(max_examples=60, deadline=None)
@given(
    pts=st.lists(st.floats(-2.0, 2.0, allow_nan=False), max_size=12),
    grid=st.integers(-6, -1),
    atoms=st.booleans(),
)
def test_interval_cells_partition_the_grid(pts: list[float], grid: int, atoms: bool) -> None:
    """Property: the cells tile every grid point of [lo, hi] exactly once, with the right counts."""
    from dpkit.mechanisms._interval import cells_for

    lo, hi = -1.0, 1.0
    x = np.array(pts, dtype=np.float64)
    scores: object = _median_score if atoms else np.zeros(x.size + 1)
    start, count, _ = cells_for(x, scores, (lo, hi), grid).flat()
    ys = np.arange(math.ceil(lo / 2.0**grid), math.floor(hi / 2.0**grid) + 1)
    covered = np.concatenate([np.arange(s, s + c) for s, c in zip(start, count, strict=True)])
    assert np.array_equal(np.sort(covered), ys)
    if atoms:  # every cell's score is the brute-force one at each of its grid points
        k = np.sort(np.rint(np.clip(x, lo, hi) / 2.0**grid))
        for s, c, u in zip(
            start, count, cells_for(x, scores, (lo, hi), grid).flat()[2], strict=True
        ):
            for y in range(s, s + c):
                assert u == _median_score(np.array((k < y).sum()), np.array((k > y).sum()))
