"""Exact samplers against their exact distributions (chi-square on 10^6 samples, fixed seeds)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit.errors import PrivacyParameterError
from dpkit.noise import bernoulli_exp, discrete_gaussian, discrete_laplace
from tests.noise._pmf import CHI2_P_MIN, chi2_pvalue, dgauss_pmf, dlap_cdf

N = 1_000_000


@pytest.mark.parametrize("scale", [1, 3.5, 100, 2**40])
def test_discrete_laplace_matches_pmf(scale: float) -> None:
    x = discrete_laplace(scale, size=N, rng=20260 + int(math.log2(scale) * 10))
    # 60 equiprobable-ish bins from the exact CDF; the outer bins hold the tails.
    # ~60 bins cut near the quantiles of the continuous Laplace; their exact probabilities come
    # from the discrete CDF, so the cut points need not be exact quantiles.
    cuts = np.unique(np.floor(scale * stats.laplace.ppf(np.linspace(0, 1, 61)[1:-1])))
    edges = np.concatenate([[-np.inf], cuts + 0.5, [np.inf]])
    cdf = np.concatenate([[0.0], dlap_cdf(cuts, scale), [1.0]])
    p = chi2_pvalue(x, edges, np.diff(cdf))
    assert p > CHI2_P_MIN, p


def _dlap_moments(scale: float) -> tuple[float, float]:
    r = math.exp(-1 / scale)
    c = (1 - r) / (1 + r)
    var = 2 * r / (1 - r) ** 2
    # E X^4 = 2c Σ k^4 r^k = 2c r(1 + 11r + 11r² + r³)/(1 − r)^5
    m4 = 2 * c * r * (1 + 11 * r + 11 * r * r + r**3) / (1 - r) ** 5
    return var, m4


@pytest.mark.parametrize("scale", [1, 3.5, 100, 2**40])
def test_discrete_laplace_variance(scale: float) -> None:
    x = discrete_laplace(scale, size=N, rng=7).astype(np.float64)
    var, m4 = _dlap_moments(scale)
    # sample second moment (mean known 0) has sd sqrt((m4 - var²)/n); allow 5 sd (p ≈ 6e-7).
    sd = math.sqrt((m4 - var * var) / N)
    assert abs(float(np.mean(x * x)) - var) < 5 * sd


@pytest.mark.parametrize("sigma", [0.5, 1, 10, 1000])
def test_discrete_gaussian_matches_pmf(sigma: float) -> None:
    x = discrete_gaussian(sigma, size=N, rng=31 + int(sigma))
    k, p = dgauss_pmf(sigma)
    cdf = np.cumsum(p)
    cuts = np.unique(k[np.searchsorted(cdf, np.linspace(0, 1, 61)[1:-1])])
    edges = np.concatenate([[-np.inf], cuts.astype(np.float64) - 0.5, [np.inf]])
    probs = np.array([p[(k >= lo) & (k < hi)].sum() for lo, hi in itertools.pairwise(edges)])
    pval = chi2_pvalue(x, edges, probs)
    assert pval > CHI2_P_MIN, pval


@pytest.mark.parametrize("sigma", [0.5, 1, 10, 1000])
def test_discrete_gaussian_variance(sigma: float) -> None:
    x = discrete_gaussian(sigma, size=N, rng=5).astype(np.float64)
    k, p = dgauss_pmf(sigma)
    kf = k.astype(np.float64)
    var, m4 = float(np.sum(p * kf**2)), float(np.sum(p * kf**4))
    sd = math.sqrt((m4 - var * var) / N)
    assert abs(float(np.mean(x * x)) - var) < 5 * sd
    assert abs(float(np.mean(x))) < 5 * math.sqrt(var / N)


# the last two have a denominator of 2^40: the first two steps of the loop take two draws there
@pytest.mark.parametrize(
    "gamma",
    [
        Fraction(0),
        Fraction(1, 3),
        Fraction(1),
        Fraction(5, 2),
        7,
        Fraction(2**39 + 1, 2**40),
        Fraction(3 * 2**40 + 5, 2**40),
    ],
)
def test_bernoulli_exp_probability(gamma: Fraction) -> None:
    n = 400_000
    x = bernoulli_exp(gamma, size=n, rng=11)
    p = math.exp(-float(gamma))
    # two-sided exact binomial test at the fixed seed
    assert stats.binomtest(int(x.sum()), n, p).pvalue > CHI2_P_MIN


def test_scalar_outputs_and_shapes() -> None:
    assert isinstance(discrete_laplace(2, rng=1), int)
    assert isinstance(discrete_gaussian(2, rng=1), int)
    assert isinstance(bernoulli_exp(Fraction(1, 2), rng=1), bool)
    assert discrete_laplace(2, size=(3, 4), rng=1).shape == (3, 4)
    assert discrete_gaussian(2, size=0, rng=1).shape == (0,)


def test_seed_reproducible() -> None:
    a = discrete_gaussian(3, size=1000, rng=42)
    b = discrete_gaussian(3, size=1000, rng=42)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, discrete_gaussian(3, size=1000, rng=43))


def test_float_scale_rounded_up_not_down() -> None:
    # 0.1 is not a small rational: the sampler uses a/b >= 0.1 within a relative 2^-51.
    from dpkit.noise._scales import rational_at_least

    a, b = rational_at_least(0.1, "scale", max_numerator=1 << 52)
    assert Fraction(a, b) >= Fraction(0.1)
    assert Fraction(a, b) - Fraction(0.1) < Fraction(0.1) * Fraction(1, 2**50)
    a, b = rational_at_least(math.pi, "sigma", max_numerator=1 << 25)
    assert Fraction(a, b) >= Fraction(math.pi) and a <= 1 << 25
    assert Fraction(a, b) / Fraction(math.pi) - 1 < Fraction(1, 2**23)


@pytest.mark.parametrize("bad", [0, -1, -0.5, float("nan"), float("inf"), None, "1", True])
@pytest.mark.parametrize("sampler", [discrete_laplace, discrete_gaussian])
def test_bad_scales(sampler, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PrivacyParameterError):
        sampler(bad, size=3, rng=0)


@pytest.mark.parametrize("size", [1.5, -1, "3", (2, 2.0), True])
def test_bad_sizes(size: object) -> None:
    with pytest.raises(PrivacyParameterError, match="size"):
        discrete_laplace(1, size=size, rng=0)  # type: ignore[arg-type]


def test_bad_gamma() -> None:
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(PrivacyParameterError):
            bernoulli_exp(bad, rng=0)
    with pytest.raises(PrivacyParameterError, match="2\\^62"):
        bernoulli_exp(Fraction(1, 2**70), rng=0)


def test_sigma_too_large_is_refused() -> None:
    with pytest.raises(PrivacyParameterError, match="too large"):
        discrete_gaussian(2**31, size=2, rng=0)


def test_divmod_square_is_exact() -> None:
    """The wide path splits c² by 2a² in wrapping 64-bit arithmetic; check against Python ints."""
    from dpkit.noise._discrete import _divmod_square

    g = np.random.default_rng(5)
    for a in (1, 3, 2**25 + 1, 2**30 - 7, 2**30):
        c = np.concatenate([g.integers(0, 2**40, 2000), [0, 1, 2**40 - 1, a, 2 * a]])
        c = c[c < min(2**40, a * 2**26)].astype(np.int64)
        q, r = _divmod_square(c, a)
        for ci, qi, ri in zip(c.tolist(), q.tolist(), r.tolist(), strict=True):
            assert (qi, ri) == divmod(ci * ci, 2 * a * a)


@pytest.mark.parametrize("sigma", [2**25 + 0.5, 5e7, 2**30])
def test_discrete_gaussian_wide_path(sigma: float) -> None:
    """σ above 2^25 (the wide path): chi-square against the pmf on 40 bins. For σ this large the
    mass of integers in [lo, hi) equals the normal mass of [lo − 1/2, hi − 1/2) to far below the
    test's resolution (Euler–Maclaurin: the error is O(σ^-2) relative)."""
    x = discrete_gaussian(sigma, size=400_000, rng=int(sigma) % 1000)
    cuts = np.unique(np.floor(sigma * stats.norm.ppf(np.linspace(0, 1, 41)[1:-1])))
    edges = np.concatenate([[-np.inf], cuts, [np.inf]])
    cdf = np.concatenate([[0.0], stats.norm.cdf((cuts - 0.5) / sigma), [1.0]])
    assert chi2_pvalue(x, edges, np.diff(cdf)) > CHI2_P_MIN


def test_sampled_sigma_is_what_the_sampler_uses() -> None:
    """Events are built from sampled_sigma: it must be a fixed point of the sampler's rounding
    (asking for it draws with exactly that σ), never below the request, and an exact float."""
    from dpkit.noise import sampled_sigma
    from dpkit.noise._discrete import gaussian_rational

    for s in (0.5, 1.0, 1.1348229656765771, 3.7306, 2**24 * 1.37, 2**25 + 0.5, 5e7, 1e-3):
        t = sampled_sigma(s)
        assert t >= s and t / s - 1 < 2.0**-23
        a, b = gaussian_rational(t)
        assert Fraction(a, b) == Fraction(t)
        assert sampled_sigma(t) == t
