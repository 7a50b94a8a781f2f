"""Single exact draws from a checked rational: the very draws the public samplers make."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.noise import NoisePool, discrete_gaussian, discrete_laplace
from dpkit.noise._discrete import (
    DLAP_MAX_NUMERATOR,
    gaussian_rational,
    one_discrete_gaussian,
    one_discrete_laplace,
)
from dpkit.noise._scales import rational_at_least
from dpkit.stats._noisy import Part, plan


@pytest.mark.parametrize("scale", [0.7, 3, Fraction(22, 7), 1e6 + 0.5])
def test_one_laplace_draw_is_discrete_laplaces_draw(scale: object) -> None:
    t, s = rational_at_least(scale, "scale", max_numerator=DLAP_MAX_NUMERATOR)
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert [one_discrete_laplace(t, s, a) for _ in range(50)] == [
        discrete_laplace(scale, rng=b) for _ in range(50)
    ]


@pytest.mark.parametrize("sigma", [0.5, 3.7306, Fraction(7, 3), 2.0**26 + 3])
def test_one_gaussian_draw_is_discrete_gaussians_draw(sigma: object) -> None:
    x, y = gaussian_rational(sigma)
    a, b = np.random.default_rng(6), np.random.default_rng(6)
    assert [one_discrete_gaussian(x, y, a) for _ in range(50)] == [
        discrete_gaussian(sigma, rng=b) for _ in range(50)
    ]


def test_a_pool_hands_each_sample_out_once_whichever_function_asks() -> None:
    # Both functions take from the same stash of that scale, in order, each sample once.
    t, s = rational_at_least(2.5, "scale", max_numerator=DLAP_MAX_NUMERATOR)
    seq = np.random.SFC64(11)
    pool = NoisePool(seq, batch=8)
    mixed = [one_discrete_laplace(t, s, pool) if i % 2 else discrete_laplace(2.5, rng=pool)
             for i in range(8)]  # fmt: skip
    ref = NoisePool(np.random.SFC64(11), batch=8)
    assert mixed == [discrete_laplace(2.5, rng=ref) for _ in range(8)]
    stash = pool._stash[("laplace", t, s)][0]
    assert not stash.any()  # all eight handed out, each erased


@pytest.mark.parametrize("delta", [0.0, 1e-7])
def test_a_parts_noise_is_drawn_at_its_planned_scale(delta: float) -> None:
    pl = plan([Part("sum", -20, 3 << 20), Part("count", 0, 1, 5.0)], epsilon=0.5, delta=delta)
    gen, ref = np.random.default_rng(9), np.random.default_rng(9)
    got = pl.draw([123 << 20, 1000], gen)
    want = []
    for p, total in zip(pl.parts, [123 << 20, 1000], strict=True):
        rounded = (total + (1 << (p.shift - 1))) >> p.shift if p.shift > 0 else total
        draw = discrete_laplace if p.kind == "laplace" else discrete_gaussian
        noisy = rounded + int(draw(p.scale, rng=ref))
        want.append(float(np.ldexp(float(noisy), p.part.exponent + p.shift)))
    assert list(got) == want
