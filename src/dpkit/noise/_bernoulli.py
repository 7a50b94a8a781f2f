"""Public exact Bernoulli(exp(−γ)) sampler."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit._checks import Rational, check_size, exact_fraction
from dpkit.errors import PrivacyParameterError
from dpkit.noise._kernels import INT_LIMIT, bernoulli_exp_rational
from dpkit.random import RNGLike, as_generator

__all__ = ["bernoulli_exp"]


def bernoulli_exp(
    gamma: Rational, size: int | tuple[int, ...] | None = None, *, rng: RNGLike = None
) -> npt.NDArray[np.bool_] | bool:
    """Exact samples of Bernoulli(exp(−γ)) for rational γ ≥ 0.

    Canonne, Kamath and Steinke (2020), Algorithm 1: only uniform integer draws compared with
    integer thresholds, so the success probability is exactly exp(−γ).

    Parameters
    ----------
    gamma : int, Fraction or float
        γ ≥ 0, taken at its exact value; its numerator and denominator must be below 2^62
        (every float at least 2^-10 qualifies; pass a Fraction for others).
    size : int or tuple of ints, optional
        Output shape; ``None`` returns a bool.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; an int seed is reproducible and not secure.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpkit.noise import bernoulli_exp
    >>> x = bernoulli_exp(Fraction(1, 2), size=200_000, rng=0)
    >>> bool(abs(x.mean() - 0.6065) < 0.005)
    True
    """
    shape = check_size(size)
    frac = Fraction(0) if gamma == 0 else exact_fraction(gamma, "gamma")
    if frac.numerator >= INT_LIMIT or frac.denominator >= INT_LIMIT:
        raise PrivacyParameterError(
            f"gamma={gamma!r} needs integers beyond 2^62 to represent exactly; pass a Fraction "
            "with a smaller numerator and denominator."
        )
    n = int(np.prod(shape)) if shape else 1
    num = np.full(n, frac.numerator, dtype=np.int64)
    out = bernoulli_exp_rational(as_generator(rng), num, frac.denominator)
    return out.reshape(shape) if size is not None else bool(out[0])
