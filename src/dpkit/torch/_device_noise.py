"""The exact discrete Gaussian on the model's device, from a ChaCha20 stream, pooled over steps.

The algorithm is Canonne, Kamath and Steinke (2020, "The Discrete Gaussian for Differential
Privacy", Algorithms 1–3) with the same rational parameters as :mod:`dpkit.noise` (σ = a/b in
grid units, from the same rounding) and fused first steps; its Bernoulli(exp(−1)) comes from one
draw on [0, 16!) (the NumPy samplers now compare one 62-bit word with exact thresholds of e^−v
instead: another exact route to the same law, so the two draw different streams).
Each accept/reject decision compares a uniform integer with an integer threshold, so every
probability is the exact rational the algorithms call for, and the accepted samples are i.i.d.
from the discrete Gaussian. Work runs on whole blocks with masks, survivors compacted after each
pass (no Python loop per sample).

Uniform integers below ``m`` come from 62-bit (or, for ``m ≤ 2**32``, 32-bit) ChaCha20 words by
rejection: a word at or above the largest multiple of ``m`` that fits is redrawn, and the rest is
reduced modulo ``m``, so no value is favoured (no modulo bias).

The noise does not depend on the data, so :class:`DeviceGaussian` draws it for several steps at
once into a pool on the device (fewer, larger kernel launches); each sample is handed out once
and a pool is never reused across runs (``clear()`` drops it, e.g. when a checkpoint is loaded;
``resume()`` also moves the stream past every block made before the checkpoint).
"""

from __future__ import annotations

import math
import os
import weakref

import numpy as np
import torch
from torch import Tensor

from dpkit.errors import PrivacyParameterError
from dpkit.noise._discrete import DGAUSS_MAX_NUMERATOR
from dpkit.noise._float_safe import _check_grid, _in_grid_units
from dpkit.noise._scales import rational_at_least
from dpkit.random import is_secure
from dpkit.torch._chacha import ChaChaStream, random_key

__all__ = ["DeviceGaussian", "ExactSampler", "add_on_grid", "round_to_grid"]

INT_LIMIT = 1 << 62
_F16 = math.factorial(16)
_THRESHOLDS = [_F16 // math.factorial(k) for k in range(16, 0, -1)]  # ascending: 1, 16, …, 16!


class ExactSampler:
    """Exact Bernoulli, geometric, discrete Laplace and discrete Gaussian draws on a stream.

    A line-by-line counterpart of :mod:`dpkit.noise._kernels` and ``_discrete`` in torch ops.
    """

    def __init__(self, stream: ChaChaStream) -> None:
        self.stream = stream
        self.device = stream.device
        self._thresholds = torch.tensor(_THRESHOLDS, dtype=torch.int64, device=self.device)

    # uniform integers -------------------------------------------------------------------------

    def below(self, high: int, n: int) -> Tensor:
        """``n`` uniform integers in [0, high), 1 ≤ high ≤ 2**62, by rejection (exact)."""
        if not 1 <= high <= INT_LIMIT:
            raise PrivacyParameterError("uniform bound outside [1, 2**62].")
        if high & (high - 1) == 0:  # a power of two: the low bits are uniform as they are
            if high <= 1 << 32:
                return self.stream.words(n) & (high - 1)
            return self.stream.bits62(n) & (high - 1)
        wide = high > 1 << 32
        span = INT_LIMIT if wide else 1 << 32
        limit = span // high * high  # the largest multiple of high that fits: no modulo bias
        x = self.stream.bits62(n) if wide else self.stream.words(n)
        bad = torch.nonzero(x >= limit).reshape(-1)
        while bad.numel():
            redo = self.stream.bits62(bad.numel()) if wide else self.stream.words(bad.numel())
            x[bad] = redo
            bad = bad[redo >= limit]
        return x % high

    # CKS Algorithm 1 ---------------------------------------------------------------------------

    def exp1(self, n: int) -> Tensor:
        """Exact Bernoulli(exp(−1)): K > k ⇔ R < 16!/k! for R uniform on [0, 16!)."""
        r = self.below(_F16, n)
        k = 1 + (self._thresholds.numel() - torch.searchsorted(self._thresholds, r, right=True))
        out = (k & 1) == 1
        tail = torch.nonzero(r == 0).reshape(-1)  # K > 16 (probability 1/16!): loop on from 17
        if tail.numel():
            ones = torch.ones(tail.numel(), dtype=torch.int64, device=self.device)
            out[tail] = self.loop_from(ones, 1, 17)
        return out

    def step(self, num: Tensor, den: int, k: int) -> Tensor:
        """Bernoulli(num / (den · k)), exactly."""
        if den * k >= INT_LIMIT:
            return (self.below(k, num.numel()) == 0) & (self.below(den, num.numel()) < num)
        return self.below(den * k, num.numel()) < num

    def loop_from(self, num: Tensor, den: int, k0: int) -> Tensor:
        """Algorithm 1 for γ = num/den ∈ [0, 1] from counter K = k0: True when K stops odd."""
        k = k0
        accept = self.step(num, den, k)
        out = ~accept if k & 1 else torch.zeros_like(accept)
        idx = torch.nonzero(accept).reshape(-1)
        num = num[idx]
        while idx.numel():
            k += 1
            accept = self.step(num, den, k)
            if k & 1:
                out[idx] = ~accept
            else:
                out[idx] = False
            keep = torch.nonzero(accept).reshape(-1)
            idx, num = idx[keep], num[keep]
        return out

    def exp_fraction(self, num: Tensor, den: int) -> Tensor:
        """Bernoulli(exp(−num/den)) for 0 ≤ num ≤ den, the first two steps fused when small."""
        n = num.numel()
        if n == 0 or 2 * den * den >= 1 << 56:
            return self.loop_from(num, den, 1)
        r = self.below(2 * den * den, n)
        out = r >= 2 * den * num  # K = 1: accept
        more = torch.nonzero(r < num * num).reshape(-1)  # K ≥ 3: keep looping
        if more.numel():
            out[more] = self.loop_from(num[more], den, 3)
        return out

    def exp_parts(self, whole: Tensor, frac: Tensor, den: int) -> Tensor:
        """Bernoulli(exp(−(whole + frac/den))) for whole ≥ 0, 0 ≤ frac < den."""
        alive = torch.ones(whole.numel(), dtype=torch.bool, device=self.device)
        todo = torch.nonzero(whole > 0).reshape(-1)
        remaining = whole[todo]
        while todo.numel():
            ok = self.exp1(todo.numel())
            alive[todo[~ok]] = False
            remaining = remaining - 1
            keep = torch.nonzero(ok & (remaining > 0)).reshape(-1)
            todo, remaining = todo[keep], remaining[keep]
        live = torch.nonzero(alive).reshape(-1)
        alive[live] = self.exp_fraction(frac[live], den)
        return alive

    def geometric(self, n: int) -> Tensor:
        """Successes of Bernoulli(exp(−1)) before the first failure: P(V ≥ v) = exp(−v)."""
        first = self.exp1(n)
        v = first.to(torch.int64)
        idx = torch.nonzero(first).reshape(-1)
        while idx.numel():
            idx = idx[self.exp1(idx.numel())]
            v[idx] += 1
        return v

    # CKS Algorithms 2 and 3 --------------------------------------------------------------------

    def laplace(self, t: int, s: int, attempts: int) -> Tensor:
        """Accepted discrete Laplace draws of scale t/s from ``attempts`` attempts."""
        w = self.below(2 * t, attempts)  # U uniform on [0, t) and an independent sign bit
        if t > 1:
            w = w[self.exp_fraction(w >> 1, t)]
        u, sign = w >> 1, w & 1
        v = self.geometric(u.numel())
        if v.numel() and int(v.max()) >= INT_LIMIT // t - 1:
            raise OverflowError("geometric tail beyond int64 (probability below e^-1000)")
        y = u + t * v
        if s != 1:
            y = torch.div(y, s, rounding_mode="floor")
        keep = (y | (sign ^ 1)) != 0  # a negative zero is rejected
        y = torch.where(sign == 1, -y, y)
        return y[keep]

    def gaussian(self, a: int, b: int, attempts: int) -> Tensor:
        """Accepted discrete Gaussian draws of σ = a/b (Algorithm 3 with t = σ)."""
        y = self.laplace(a, b, attempts)
        c = (b * y.abs() - a).abs()
        top = int(c.max()) if c.numel() else 0
        if top >= 1 << 40 or top >= a << 26:
            raise OverflowError("discrete Laplace draw far beyond any reachable tail")
        den = 2 * a * a
        if top < 1 << 31:  # c² < 2**62
            sq = c * c
            ok = self.exp_parts(torch.div(sq, den, rounding_mode="floor"), sq % den, den)
        else:
            # |Y| beyond ~60σ (probability below e^-60 per draw): c² needs more than 63 bits,
            # so its quotient and remainder by 2a² are taken exactly in Python integers
            pairs = [divmod(int(v) * int(v), den) for v in c.tolist()]
            whole = torch.tensor([q for q, _ in pairs], dtype=torch.int64, device=self.device)
            frac = torch.tensor([r for _, r in pairs], dtype=torch.int64, device=self.device)
            ok = self.exp_parts(whole, frac, den)
        return y[ok]


def gaussian_parameters(sigma: float, grid: int) -> tuple[int, int]:
    """σ in grid units as the rational (a, b) :func:`dpkit.noise.gaussian` samples with.

    Refuses (before anything is drawn) a σ whose integer arithmetic would not fit int64 here.
    """
    g = _check_grid(grid)
    a, b = rational_at_least(_in_grid_units(sigma, g), "sigma", max_numerator=DGAUSS_MAX_NUMERATOR)
    # the kernels compute 2a² (fused draws on [0, 2·(2a²)²) are skipped above 2**56), a·V and
    # b·|Y| below 2**62; a ≤ 2**25 keeps every one of them in range
    if a > DGAUSS_MAX_NUMERATOR or b >= 1 << 36:
        raise PrivacyParameterError(
            "sigma on this grid needs integers beyond int64 in the exact sampler; use the "
            "default grid (dpkit.noise.gaussian_grid)."
        )
    return a, b


class DeviceGaussian:
    """Exact discrete Gaussian noise of σ = ``sigma`` on the grid ``2**grid``, made on ``device``.

    The integer noise has the distribution of :func:`dpkit.noise.gaussian`'s for the same σ and
    grid; :meth:`add` adds it to a float64 tensor exactly as that function does (round to the
    grid, add, the IEEE sum being the correctly rounded grid point).

    Parameters
    ----------
    sigma : float
        Standard deviation in the units of the values.
    grid : int
        Grid exponent.
    gen : numpy.random.Generator
        Draws the 256-bit ChaCha20 key (dpkit's secure generator unless the caller seeded it);
        torch's own generator is never used.
    device : torch.device or str
    ahead : int
        Steps of noise drawn per refill of the pool (at most ``max_pool`` samples in all).
    max_pool : int
        The most samples held in the pool (its memory is 8 bytes a sample).

    Examples
    --------
    >>> import torch
    >>> from dpkit.random import seeded
    >>> noise = DeviceGaussian(1.0, -24, gen=seeded(0), device="cpu")
    >>> y = noise.add(torch.zeros(4, dtype=torch.float64))
    >>> bool(((y * 2**24) % 1 == 0).all())
    True
    """

    def __init__(
        self,
        sigma: float,
        grid: int,
        *,
        gen: np.random.Generator,
        device: torch.device | str,
        ahead: int = 16,
        max_pool: int = 1 << 23,
    ) -> None:
        self.grid = _check_grid(grid)
        self.a, self.b = gaussian_parameters(sigma, self.grid)
        self.device = torch.device(device)
        self.ahead = ahead
        self.max_pool = max_pool
        self._sampler = ExactSampler(ChaChaStream(random_key(gen), self.device))
        self._pool = torch.empty(0, dtype=torch.int64, device=self.device)
        self._forked = False  # set in a forked child: re-key before the next draw
        self.secure = is_secure(gen)
        if self.secure:
            _SECURE.add(self)

    def _rekey(self) -> None:
        """A new key from the operating system and an empty pool (in a forked child)."""
        self._sampler = ExactSampler(ChaChaStream(os.urandom(32), self.device))
        self.clear()
        self._forked = False

    def sample(self, n: int) -> Tensor:
        """``n`` fresh exact samples (int64), drawn now (no pool)."""
        if self._forked:
            self._rekey()
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        filled = 0
        while filled < n:
            # an attempt yields a sample with probability ≈ 0.48 (as in dpkit.noise)
            attempts = int((n - filled) * 2.2) + 1024
            got = self._sampler.gaussian(self.a, self.b, attempts)
            take = min(got.numel(), n - filled)
            out[filled : filled + take] = got[:take]
            filled += take
        return out

    def take(self, n: int) -> Tensor:
        """The next ``n`` unused samples of the pool, refilled for ``ahead`` steps when short."""
        if self._forked:
            self._rekey()
        if self._pool.numel() < n:
            per = max(n, min(self.ahead * n, self.max_pool))
            self._pool = self.sample(per)
        out = self._pool[:n]
        self._pool = self._pool[n:]  # handed out once: the pool keeps only what follows
        return out

    def clear(self) -> None:
        """Drop the pooled samples (e.g. when a checkpoint is loaded)."""
        self._pool = torch.empty(0, dtype=torch.int64, device=self.device)

    @property
    def counter(self) -> int:
        """The next ChaCha20 block of the key: every block before it has been made."""
        return self._sampler.stream.counter

    def resume(self, counter: int) -> None:
        """Continue after a checkpoint taken at block ``counter``: drop the pool and buffered
        words and go on from that block (never back), so no (key, block) is used twice.

        A run keyed from a seed makes the same key again when it is rebuilt; without this it
        would draw the noise of its first steps again after a resume.
        """
        self.clear()
        self._sampler.stream.skip_to(counter)

    def add(self, x: Tensor) -> Tensor:
        """``round(x) + 2**grid · Z`` for a float64 tensor ``x``, Z from the pool."""
        z = self.take(x.numel()).reshape(x.shape)
        return add_on_grid(x, z, self.grid)


def _times_power(x: Tensor, e: int) -> Tensor:
    """``x · 2**e`` for |e| ≤ 2098: one product by a normal power of two, or two (each exact
    where the result is a multiple of the smallest subnormal, as every use here ensures)."""
    if -1022 <= e <= 1023:
        return x * math.ldexp(1.0, e)
    half = e // 2
    return x * math.ldexp(1.0, half) * math.ldexp(1.0, e - half)


def round_to_grid(x: Tensor, grid: int) -> Tensor:
    """Torch counterpart of :func:`dpkit.noise.round_to_grid` (float64, ties to even, exact).

    The same vectorised operations for every value (no path chosen from the data): values at or
    beyond ``2**(grid + 53)`` are already multiples of ``2**grid`` and are kept as they are.
    """
    limit = math.ldexp(1.0, grid + 53)
    small = x.abs() < limit
    rounded = _times_power(torch.round(_times_power(x, -grid)), grid)  # round: ties to even
    return torch.where(small, rounded, x)


def add_on_grid(x: Tensor, noise: Tensor, grid: int) -> Tensor:
    """Torch counterpart of ``dpkit.noise._float_safe._add_on_grid``: the same float64 values.

    ``Z · 2**grid`` is exact (|Z| < 2**53), and the IEEE sum is the correctly rounded value of the
    exact grid point ``(k + Z) · 2**grid``.
    """
    return round_to_grid(x, grid) + _times_power(noise.to(torch.float64), grid)


# A forked child would continue its parent's ChaCha20 stream and pool, releasing the same noise
# (which cancels in the difference of two releases): as dpkit.random does for its generators,
# every sampler keyed from a secure generator gets a fresh key from the OS in the child. The
# hook only marks the samplers; the new key is made at the child's first draw, because torch
# must not run at fork time (CUDA cannot be used in a forked child, e.g. a DataLoader worker,
# and a parallel CPU op there can wait forever on its parent's thread pool).
_SECURE: weakref.WeakSet[DeviceGaussian] = weakref.WeakSet()


def _rekey_after_fork() -> None:
    for noise in list(_SECURE):
        noise._forked = True


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_rekey_after_fork)
