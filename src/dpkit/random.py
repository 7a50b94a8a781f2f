"""Randomness for dpkit: secure by default, reproducible only on request.

Every sampling function in dpkit takes ``rng=None | int | numpy.random.Generator``:

* ``None`` (the default) draws from a **cryptographically secure** generator: AES-128 in counter
  mode (``randomgen.AESCounter``, using AES-NI where the CPU has it) keyed with 128 bits from the
  operating system (``os.urandom``). Its output cannot be predicted from earlier outputs, unlike
  NumPy's default PCG64, whose state can be recovered from a few outputs.
* An ``int`` seeds the same AES counter generator deterministically, for tests and simulations.
  **Seeded output is not secure**: anyone who knows or guesses the seed can subtract the noise.
* A ``numpy.random.Generator`` is used as it is (its security is the caller's responsibility).

A release charged to an accountant with anything but secure noise raises
:class:`~dpkit.errors.InsecureRandomnessWarning` (before any noise is drawn): the budget it pays
buys nothing against whoever knows the seed. Where reproducibility is the point (tests,
simulations), opt in explicitly with ``rng=dpkit.random.seeded(seed)``, which never warns, or
filter the warning (``warnings.simplefilter("ignore", InsecureRandomnessWarning)``; for pytest,
``filterwarnings = ["ignore::dpkit.errors.InsecureRandomnessWarning"]``).

Generators keyed by dpkit are re-keyed from ``os.urandom`` in the child after ``os.fork()``, so a
pre-fork server whose workers share one :class:`SecureGenerator` does not release the same noise
twice (noise that would cancel in the difference of two releases).

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
import warnings
import weakref
from typing import Any

import numpy as np
from randomgen import AESCounter

from dpkit.errors import InsecureRandomnessWarning, PrivacyParameterError

__all__ = [
    "RNGLike",
    "SecureGenerator",
    "SeededGenerator",
    "as_generator",
    "is_secure",
    "secure_generator",
    "seeded",
    "seeded_generator",
    "warn_if_insecure",
]

RNGLike = np.random.Generator | int | None
"""What every ``rng=`` argument accepts."""


def _os_key() -> int:
    return int.from_bytes(os.urandom(16), "little")


# Every live generator dpkit keyed from the OS, held weakly: membership is what makes a generator
# secure (a SecureGenerator wrapped around a caller's bit generator is not), and the fork hook
# re-keys each one in the child.
_KEYED: weakref.WeakSet[SecureGenerator] = weakref.WeakSet()


class SecureGenerator(np.random.Generator):
    """A :class:`numpy.random.Generator` over AES-128 counter mode keyed from ``os.urandom``.

    It behaves exactly like a NumPy generator. ``SecureGenerator()`` keys itself from the
    operating system; such a generator passes :func:`is_secure` and is re-keyed in the child
    process after ``os.fork()``, so parent and child never share a stream. Given a bit generator
    (``SecureGenerator(PCG64(0))``) it is an ordinary, **non-secure** generator: dpkit cannot
    vouch for a key it did not draw.

    Examples
    --------
    >>> from numpy.random import PCG64
    >>> is_secure(SecureGenerator()), is_secure(SecureGenerator(PCG64(0)))
    (True, False)
    """

    def __init__(self, bit_generator: np.random.BitGenerator | None = None) -> None:
        if bit_generator is None:
            super().__init__(AESCounter(key=_os_key()))
            _KEYED.add(self)
        else:
            super().__init__(bit_generator)

    def __reduce__(self) -> Any:
        # A copy (pickle, copy, deepcopy, or a generator sent to a process pool) would continue
        # the same AES stream as the original, so two releases would share their noise and cancel
        # in differences. A keyed generator therefore cannot be copied; one of a caller's own bit
        # generator copies as NumPy's generators do.
        if self in _KEYED:
            raise TypeError(
                "a secure generator cannot be copied or pickled: the copy would replay its noise. "
                "Create a new SecureGenerator() (or pass rng=None) in each process."
            )
        return super().__reduce__()


def _rekey_after_fork() -> None:
    # Runs in the child right after fork(): without it, parent and child would continue one AES
    # stream from the same counter and release identical noise.
    for gen in list(_KEYED):
        gen.bit_generator.seed(key=_os_key())  # type: ignore[attr-defined]


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_rekey_after_fork)


class SeededGenerator(np.random.Generator):
    """A reproducible, **not secure** generator chosen on purpose (see :func:`seeded`).

    Charged releases drawing from it do not raise
    :class:`~dpkit.errors.InsecureRandomnessWarning`: passing one is the explicit opt-in for tests
    and simulations. It is never re-keyed after ``fork()`` (reproducibility is its purpose).
    """


def seeded(seed: int) -> SeededGenerator:
    """An explicitly insecure, reproducible generator for tests and simulations.

    The same stream as ``rng=seed``, but charging an accountant with it does not warn: the caller
    has said the noise need not be secret. Never use it on real data.

    Parameters
    ----------
    seed : int
        A non-negative integer.

    Examples
    --------
    >>> import warnings, dpkit as dp
    >>> from dpkit.accounting import Accountant, PureDP
    >>> acct = Accountant(PureDP(epsilon=1.0))
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")   # no InsecureRandomnessWarning is raised
    ...     r = dp.mechanisms.Laplace(epsilon=0.5).release(3.0, rng=seeded(0), accountant=acct)
    >>> r == dp.mechanisms.Laplace(epsilon=0.5).release(3.0, rng=0)
    True
    """
    return SeededGenerator(seeded_generator(seed).bit_generator)


def secure_generator() -> np.random.Generator:
    """Return a new generator over AES-128 counter mode keyed from the operating system.

    Returns
    -------
    SecureGenerator
        A generator whose bit stream is computationally indistinguishable from random to anyone
        who does not know the 128-bit key, drawn fresh from ``os.urandom``.
    """
    return SecureGenerator()


def seeded_generator(seed: int, *, stream: int = 0) -> np.random.Generator:
    """Return a reproducible generator for tests and simulations (**not secure**).

    Parameters
    ----------
    seed : int
        A non-negative integer.
    stream : int
        Which of the independent streams derived from ``seed`` (``0``: the stream of ``rng=seed``;
        ``k > 0``: the k-th child of ``SeedSequence(seed)``). A stateful mechanism that is given
        the same int seed at every call uses stream k for its k-th call, so no two calls replay
        the same noise.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise PrivacyParameterError(
            f"rng seed must be a non-negative int, got {seed!r}; pass rng=None for secure noise."
        )
    if isinstance(stream, bool) or not isinstance(stream, numbers.Integral) or stream < 0:
        raise PrivacyParameterError(f"stream must be a non-negative int, got {stream!r}.")
    if stream == 0:
        return np.random.Generator(AESCounter(seed=int(seed)))
    child = np.random.SeedSequence(int(seed), spawn_key=(int(stream),))
    return np.random.Generator(AESCounter(seed=child))


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


def is_secure(rng: object) -> bool:
    """Whether ``rng`` is a :class:`SecureGenerator` keyed by dpkit from the OS.

    False for seeded generators, NumPy's own (PCG64 state is recoverable from a few outputs), and a
    ``SecureGenerator`` built around a caller's bit generator.
    """
    return isinstance(rng, SecureGenerator) and rng in _KEYED


def warn_if_insecure(rng: object, *, stacklevel: int = 3) -> None:
    """Check an ``rng=`` argument of a release that is about to be charged to an accountant.

    Raises :class:`~dpkit.errors.PrivacyParameterError` for something that is not an ``rng=``
    value (before the charge, so nothing is paid for a release that cannot happen) and warns
    :class:`~dpkit.errors.InsecureRandomnessWarning` when the noise would not be secure: an int
    seed, or a generator that is neither dpkit's secure one nor the explicit opt-in
    :func:`seeded`. It looks only at ``rng``, never at data, and draws nothing.

    >>> warn_if_insecure(None)   # secure: silent
    """
    if rng is None or isinstance(rng, SeededGenerator) or is_secure(rng):
        return
    if isinstance(rng, np.random.Generator):
        what = f"a numpy Generator over {type(rng.bit_generator).__name__} not keyed by dpkit"
    elif isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        what = "an int seed"
    else:
        as_generator(rng)  # type: ignore[arg-type]  # raises PrivacyParameterError
        return  # pragma: no cover - as_generator accepted it
    warnings.warn(
        f"this release is charged to an accountant but its noise comes from {what}: anyone who "
        "knows the seed can remove the noise. Pass rng=None for secure noise, or "
        "rng=dpkit.random.seeded(seed) to make reproducible noise an explicit choice.",
        InsecureRandomnessWarning,
        stacklevel=stacklevel,
    )
