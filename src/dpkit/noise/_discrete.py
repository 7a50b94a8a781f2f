"""Exact discrete Laplace and discrete Gaussian samplers on the integers."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit._checks import Rational, check_size
from dpkit.errors import PrivacyParameterError
from dpkit.noise._kernels import (
    BLOCK,
    MIN_BLOCK,
    below,
    bernoulli_exp_fraction,
    bernoulli_exp_parts,
    bernoulli_exp_rational,
    geometric_exp1,
)
from dpkit.noise._parallel import PARALLEL_FROM, in_chunks
from dpkit.noise._pool import NoisePool
from dpkit.noise._scales import rational_at_least
from dpkit.random import RNGLike, as_generator

__all__ = [
    "DGAUSS_MAX_NUMERATOR",
    "DGAUSS_WIDE_NUMERATOR",
    "DLAP_MAX_NUMERATOR",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian_rational",
    "one_discrete_gaussian",
    "one_discrete_laplace",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
    "sampled_sigma",
]

IntArray = npt.NDArray[np.int64]

DLAP_MAX_NUMERATOR = 1 << 52
"""Largest numerator t of a discrete Laplace scale t/s (so X = U + tV stays below 2^62)."""

DGAUSS_MAX_NUMERATOR = 1 << 25
"""Largest numerator a of σ = a/b on the fast path: (b|Y| − a)² stays below 2^62 for |Y| < 60σ."""

DGAUSS_WIDE_NUMERATOR = 1 << 30
"""Largest numerator on the wide path (σ up to 2^30 ≈ 1.07·10^9): there (b|Y| − a)² is split
into quotient and remainder by 2a² with wrapping 64-bit arithmetic, exactly."""


def _fill(n: int, draw: _Draw) -> IntArray:
    """Call ``draw(attempts)`` on whole blocks until ``n`` accepted samples are collected.

    Each call does at least a full block of work, so the time of a small release does not track
    how many attempts its own sample needed.
    """
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        attempts = min(max(int((n - filled) * draw.overdraw) + 64, MIN_BLOCK), BLOCK)
        got = draw(attempts)
        take = min(got.size, n - filled)
        out[filled : filled + take] = got[:take]
        filled += take
    return out


class _Draw:
    overdraw: float = 1.0

    def __call__(self, attempts: int) -> IntArray:  # pragma: no cover - interface
        raise NotImplementedError


class _LaplaceDraw(_Draw):
    """CKS Algorithm 2: discrete Laplace with scale t/s (t, s positive integers)."""

    def __init__(self, t: int, s: int, rng: np.random.Generator):
        self.t, self.s, self.rng = t, s, rng
        # acceptance ≈ (1 − e^{-1}) (the exp(-U/t) test) × (1 − P(sign reject)); at t = 1 there
        # is no test (U = 0) and only the negative zero is rejected: 1 − (1 − e^{-1})/2 ≈ 0.684
        # (an overdraw of 1.0 there took five rounds to fill a chunk).
        self.overdraw = 1.55 if t == 1 else 1.75

    def __call__(self, attempts: int) -> IntArray:
        rng, t, s = self.rng, self.t, self.s
        # one draw on [0, 2t) gives both U (uniform on [0, t)) and an independent sign bit
        w = below(rng, 2 * t, attempts)
        if t > 1:
            w = w.take(bernoulli_exp_fraction(rng, w >> 1, t).nonzero()[0])
        sign = w & 1
        y = geometric_exp1(rng, w.size)
        if y.size and int(y.max()) >= (1 << 62) // t - 1:
            raise OverflowError("geometric tail beyond int64 (probability below e^-1000)")
        y *= t
        y += w >> 1  # U + tV
        if s & (s - 1) == 0:
            y >>= s.bit_length() - 1  # floor(y / s) for a power of two s (y >= 0)
        else:
            y //= s
        # a negative zero is rejected (it would count 0 twice): keep y ≠ 0 or sign 0
        keep = ((y | (sign ^ 1)) != 0).nonzero()[0]
        # y → −y where the sign bit is set, arithmetically: (y XOR −b) + b is −y for b = 1
        y ^= -sign
        y += sign
        kept: IntArray = y.take(keep)
        return kept


class _GaussianDraw(_Draw):
    """CKS Algorithm 3 with t = σ: Y ~ DLap(σ), accept with prob exp(-(|Y| − σ)²/(2σ²)).

    With σ = a/b the exponent is (b|Y| − a)² / (2a²), a ratio of integers. Algorithm 3 is exact for
    any t > 0 (the acceptance factor exp(-(|y| − σ²/t)²/2σ²) times exp(-|y|/t) is proportional to
    exp(-y²/2σ²)); t = σ keeps σ²/t an integer ratio with the same denominator.
    """

    def __init__(self, a: int, b: int, rng: np.random.Generator):
        self.a, self.b, self.rng = a, b, rng
        self.laplace = _LaplaceDraw(a, b, rng)
        self.overdraw = 1.0

    def __call__(self, attempts: int) -> IntArray:
        a, b = self.a, self.b
        y = self.laplace(attempts)
        c = np.abs(b * np.abs(y) - a)
        top = int(c.max()) if c.size else 0
        if top >= 1 << 40 or top >= a << 26:
            # |Y| beyond 2^26 σ (or 2^40): probability below exp(-2^26), not a real event
            raise OverflowError("discrete Laplace draw far beyond any reachable tail")
        if top < 1 << 31:
            ok = bernoulli_exp_rational(self.rng, c * c, 2 * a * a)
        else:
            whole, frac = _divmod_square(c, a)
            ok = bernoulli_exp_parts(self.rng, whole, frac, 2 * a * a)
        kept: IntArray = y.take(ok.nonzero()[0])
        return kept


def _divmod_square(c: IntArray, a: int) -> tuple[IntArray, IntArray]:
    """Exact ``divmod(c², 2a²)`` for 0 <= c < min(2^40, a·2^26) and a <= 2^30, in 64-bit integers.

    The quotient is first estimated in floating point (it is below 2^51, so the estimate is off by
    at most one); the remainder is then computed modulo 2^64, where the true value, whose
    magnitude is below 3·2^61, has a unique signed representative; one correction step fixes the
    estimate. Every comparison that decides anything is on exact integers.
    """
    den = 2 * a * a
    q = np.floor(np.square(c / a) / 2.0).astype(np.int64)
    cu = c.astype(np.uint64)
    r = (cu * cu - q.astype(np.uint64) * np.uint64(den)).view(np.int64)
    low = r < 0
    q[low] -= 1
    r[low] += den
    high = r >= den
    q[high] += 1
    r[high] -= den
    return q, r


def gaussian_rational(sigma: object) -> tuple[int, int]:
    """``(a, b)`` with ``a/b >= σ`` for the exact discrete Gaussian sampler.

    σ ≤ 2^25 is taken exactly when its numerator is at most 2^25 and otherwise rounded up by a
    relative 2^-24 at most (the fast path); σ up to 2^30 is rounded up to an integer (the wide
    path, a relative 2^-25 at most). Larger σ is refused.
    """
    try:
        return rational_at_least(sigma, "sigma", max_numerator=DGAUSS_MAX_NUMERATOR)
    except PrivacyParameterError:
        return rational_at_least(sigma, "sigma", max_numerator=DGAUSS_WIDE_NUMERATOR)


def sampled_sigma(sigma: object) -> float:
    """The σ the exact discrete Gaussian sampler actually uses when asked for ``sigma``.

    It is ``sigma`` itself when the sampler can use it exactly, else ``sigma`` rounded up (see
    :func:`gaussian_rational`); for a float ``sigma`` the result is an exact float, and asking
    the sampler for it draws with exactly that σ. Privacy events must be built from this value:
    the discrete Gaussian's δ(ε) is not monotone in σ, so "a little more noise than claimed" is
    not automatically safe.

    >>> sampled_sigma(0.5), sampled_sigma(3.0)
    (0.5, 3.0)
    >>> sampled_sigma(3.7306) >= 3.7306
    True
    """
    a, b = gaussian_rational(sigma)
    out = a / b
    if Fraction(out) != Fraction(a, b):
        raise PrivacyParameterError(
            f"sigma={sigma!r} has no exactly representable sampled value; pass a float."
        )
    return out


def _laplace_serial(t: int, s: int, n: int, rng: np.random.Generator) -> IntArray:
    return _fill(n, _LaplaceDraw(t, s, rng))


def _gaussian_serial(a: int, b: int, n: int, rng: np.random.Generator) -> IntArray:
    draw = _GaussianDraw(a, b, rng)
    # An attempt yields a sample with probability ≈ 0.48 at every σ (measured: 0.633 for the
    # discrete Laplace step times ≈ 0.76 for the Gaussian test); 2.2 attempts per sample usually
    # fill a chunk in one block plus a small top-up, where 1.8 took four rounds.
    draw.overdraw = 2.2
    return _fill(n, draw)


Sampler = Callable[[int, np.random.Generator], IntArray]


def sampler(kind: str, num: int, den: int) -> Sampler:
    """``f(n, rng)``: ``n`` exact samples on one generator, one thread (for :func:`draw`)."""
    if kind == "laplace":
        return lambda n, rng: _laplace_serial(num, den, n, rng)
    return lambda n, rng: _gaussian_serial(num, den, n, rng)


def draw(sample: Sampler, n: int, rng: np.random.Generator) -> IntArray:
    """``n`` samples: on ``rng`` itself when few, else in keyed chunks on threads (_parallel)."""
    if n < PARALLEL_FROM:
        return sample(n, rng)
    out = np.empty(n, dtype=np.int64)

    def work(start: int, stop: int, gen: np.random.Generator) -> None:
        out[start:stop] = sample(stop - start, gen)

    in_chunks(n, rng, work)
    return out


def sample_discrete_laplace(t: int, s: int, n: int, rng: np.random.Generator) -> IntArray:
    """``n`` exact discrete Laplace samples of scale ``t/s`` (integers, no validation)."""
    return draw(sampler("laplace", t, s), n, rng)


def sample_discrete_gaussian(a: int, b: int, n: int, rng: np.random.Generator) -> IntArray:
    """``n`` exact discrete Gaussian samples of σ = ``a/b`` (integers, no validation)."""
    return draw(sampler("gaussian", a, b), n, rng)


def one_discrete_laplace(t: int, s: int, gen: np.random.Generator) -> int:
    """One exact discrete Laplace sample of scale ``t/s`` (from a :class:`NoisePool`'s spare
    samples when ``gen`` is one). ``(t, s)`` must come from :func:`rational_at_least` with
    ``max_numerator=DLAP_MAX_NUMERATOR``, as :func:`discrete_laplace` makes them."""
    if isinstance(gen, NoisePool):
        return gen.take(("laplace", t, s), lambda k: sample_discrete_laplace(t, s, k, gen))
    return int(sample_discrete_laplace(t, s, 1, gen)[0])


def one_discrete_gaussian(a: int, b: int, gen: np.random.Generator) -> int:
    """One exact discrete Gaussian sample of σ = ``a/b``; ``(a, b)`` from
    :func:`gaussian_rational` (see :func:`one_discrete_laplace`)."""
    if isinstance(gen, NoisePool):
        return gen.take(("gaussian", a, b), lambda k: sample_discrete_gaussian(a, b, k, gen))
    return int(sample_discrete_gaussian(a, b, 1, gen)[0])


def discrete_laplace(
    scale: Rational, size: int | tuple[int, ...] | None = None, *, rng: RNGLike = None
) -> IntArray | int:
    """Exact samples of the discrete Laplace distribution on the integers.

    P(X = k) = (1 − e^{−1/b}) / (1 + e^{−1/b}) · e^{−|k|/b} for scale b.

    Adding it to an integer query of sensitivity Δ gives ε-DP with ε = Δ/b (the geometric
    mechanism, Ghosh, Roughgarden and Sundararajan 2009). Sampling follows Canonne, Kamath and
    Steinke (2020, Algorithm 2), with exact integer comparisons only.

    Parameters
    ----------
    scale : int, Fraction or float
        The scale b > 0, taken at its exact value. Scales whose numerator or denominator exceed
        2^52 are rounded *up* by a relative amount below 2^-51 (more noise, never less).
    size : int or tuple of ints, optional
        Output shape; ``None`` returns a Python int.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; an int seed is reproducible and not secure.

    Returns
    -------
    numpy.ndarray of int64, or int

    Examples
    --------
    >>> from dpkit.noise import discrete_laplace
    >>> x = discrete_laplace(3.5, size=100_000, rng=0)
    >>> x.dtype, abs(float(x.mean())) < 0.1
    (dtype('int64'), True)
    """
    shape = check_size(size)
    t, s = rational_at_least(scale, "scale", max_numerator=DLAP_MAX_NUMERATOR)
    gen = as_generator(rng)
    if size is None:
        return one_discrete_laplace(t, s, gen)
    n = int(np.prod(shape)) if shape else 1
    out = sample_discrete_laplace(t, s, n, gen)
    return out.reshape(shape) if size is not None else int(out[0])


def discrete_gaussian(
    sigma: Rational, size: int | tuple[int, ...] | None = None, *, rng: RNGLike = None
) -> IntArray | int:
    """Exact samples of the discrete Gaussian distribution on the integers.

    P(X = k) ∝ exp(−k² / (2σ²)). Adding it to an integer query of ℓ2 sensitivity Δ satisfies
    ρ-zCDP with ρ = Δ²/(2σ²) (Canonne, Kamath and Steinke 2020, Theorem 14). Sampling follows
    their Algorithm 3, with exact integer comparisons only.

    Parameters
    ----------
    sigma : int, Fraction or float
        σ > 0, taken at its exact value when its numerator is at most 2^25; otherwise rounded
        *up* (to a/b with a ≤ 2^25, or to an integer above 2^25), a relative increase below
        2^-24 (more noise, never less). σ above 2^30 ≈ 1.07·10^9 is refused.
    size : int or tuple of ints, optional
        Output shape; ``None`` returns a Python int.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; an int seed is reproducible and not secure.

    Examples
    --------
    >>> from dpkit.noise import discrete_gaussian
    >>> x = discrete_gaussian(10, size=100_000, rng=0)
    >>> bool(abs(x.var() / 100 - 1) < 0.02)
    True
    """
    shape = check_size(size)
    a, b = gaussian_rational(sigma)
    gen = as_generator(rng)
    if size is None:
        return one_discrete_gaussian(a, b, gen)
    n = int(np.prod(shape)) if shape else 1
    out = sample_discrete_gaussian(a, b, n, gen)
    return out.reshape(shape) if size is not None else int(out[0])
