"""Attack on AIM's accounting with the joint fit: the noisy steps actually taken (each
selection ε_t²/8, each measurement Δ²/(2σ_t²), summed exactly from ``model.rounds``) never
exceed the charged plan, whatever the annealing did (tiny and huge ρ, replace-one, a model
cap that filters every new candidate)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.accounting import Neighbouring
from dpkit.release import Categorical, Domain, Synthesizer


@pytest.mark.parametrize(
    ("shape", "rho", "replace", "cap", "n"),
    [
        ((2, 2), 1e-6, False, 100_000, 2000),
        ((4, 5), 0.08, True, 50, 50),
        ((3, 5, 3), 1.0, True, 100_000, 1),
        ((2, 2, 2, 2), 1e6, False, 100_000, 3000),
        ((5, 2, 4), 2.7, False, 1, 0),
    ],
)
def test_rounds_spend_at_most_the_charge(shape, rho, replace, cap, n):
    gen = np.random.default_rng(7)
    names = [f"c{i}" for i in range(len(shape))]
    dom = Domain({k: Categorical(list(range(s))) for k, s in zip(names, shape, strict=True)})
    x = gen.integers(0, shape[0], n)
    data = {
        k: np.where(gen.random(n) < 0.7, x % s, gen.integers(0, s, n))
        for k, s in zip(names, shape, strict=True)
    }
    nb = Neighbouring.REPLACE if replace else Neighbouring.ADD_REMOVE
    synth = Synthesizer(dom, rho=rho, method="aim", neighbouring=nb, max_model_cells=cap)
    model = synth.fit(data, rng=3)
    p = synth.plan
    sens2 = Fraction(p.sensitivity) ** 2
    spent = p.columns * sens2 / (2 * Fraction(p.sigma_one_way) ** 2)
    for _, sigma, eps in model.rounds:
        spent += sens2 / (2 * Fraction(sigma) ** 2) + Fraction(eps) ** 2 / 8
    assert model.rounds  # at least one round ran
    assert spent <= Fraction(p.rho) <= Fraction(rho)
    assert spent >= Fraction(p.rho) * Fraction(999, 1000)  # and the rest is spent, not lost
