"""Randomness for dpkit: secure by default, reproducible only on request.

Every sampling function in dpkit takes ``rng=None | int | numpy.random.Generator``:

* ``None`` (the default) draws from a **cryptographically secure** generator: AES-128 in counter
  mode (``randomgen.AESCounter``, using AES-NI where the CPU has it) keyed with 128 bits from the
  operating system (``os.urandom``). Its output cannot be predicted from earlier outputs, unlike
  NumPy's default PCG64, whose state can be recovered from a few outputs.
* An ``int`` seeds the same AES counter generator deterministically, for tests and simulations.
  **Seeded output is not secure**: anyone who knows or guesses the seed can subtract the noise.
* A ``numpy.random.Generator`` is used as it is (its security is the caller's responsibility).

>>> import dpkit.random as dr
>>> g = dr.as_generator(7)
>>> int(g.integers(0, 1000)) == int(dr.as_generator(7).integers(0, 1000))
True
>>> dr.is_secure(dr.secure_generator())
True
"""

from __future__ import annotations

import numbers
import os

import numpy as np
from randomgen import AESCounter

from dpkit.errors import PrivacyParameterError

__all__ = [
    "RNGLike",
    "SecureGenerator",
    "as_generator",
    "is_secure",
    "secure_generator",
    "seeded_generator",
]

RNGLike = np.random.Generator | int | None
"""What every ``rng=`` argument accepts."""


class SecureGenerator(np.random.Generator):
    """A :class:`numpy.random.Generator` over AES-128 counter mode keyed from ``os.urandom``.

    It behaves exactly like a NumPy generator; the subclass only marks it as secure, so that
    :func:`is_secure` can tell it from a seeded one.
    """


def secure_generator() -> np.random.Generator:
    """Return a new generator over AES-128 counter mode keyed from the operating system.

    Returns
    -------
    SecureGenerator
        A generator whose bit stream is computationally indistinguishable from random to anyone
        who does not know the 128-bit key, drawn fresh from ``os.urandom``.
    """
    key = int.from_bytes(os.urandom(16), "little")
    return SecureGenerator(AESCounter(key=key))


def seeded_generator(seed: int) -> np.random.Generator:
    """Return a reproducible generator for tests and simulations (**not secure**).

    Parameters
    ----------
    seed : int
        A non-negative integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise PrivacyParameterError(
            f"rng seed must be a non-negative int, got {seed!r}; pass rng=None for secure noise."
        )
    return np.random.Generator(AESCounter(seed=int(seed)))


def as_generator(rng: RNGLike = None) -> np.random.Generator:
    """Resolve an ``rng=`` argument to a :class:`numpy.random.Generator`.

    Parameters
    ----------
    rng : None, int or numpy.random.Generator
        ``None`` for a fresh secure generator, an int for a seeded (insecure, reproducible) one,
        or a generator to use as it is.
    """
    if rng is None:
        return secure_generator()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        return seeded_generator(int(rng))
    raise PrivacyParameterError(
        f"rng must be None (secure), an int seed or a numpy.random.Generator, got "
        f"{type(rng).__name__}."
    )


def is_secure(rng: np.random.Generator) -> bool:
    """Whether ``rng`` is a :class:`SecureGenerator` (keyed by dpkit from the OS)."""
    return isinstance(rng, SecureGenerator)
