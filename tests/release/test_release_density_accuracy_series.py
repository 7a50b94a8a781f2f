"""series_density_accuracy: the L2 norm of the released expansion's noise stays within the
half-width as often as promised, and the degree is chosen before anything is charged.

The half-width is the exact ``1 − alpha`` quantile of ``‖Z‖₂`` (up to a relative ~1% on the safe
side, module notes of ``_series_accuracy``): by orthonormality of the cosine basis the L2 norm
of the noise function is ``‖β̃ − β̂‖₂``. So over 300 releases (fixed seed) the share of releases
within it must lie in ``1 − alpha ± 4`` binomial sd (plus 0.02 above for the safe-side slack,
worth about 0.015 of coverage at 12 coefficients), for Laplace (δ = 0) and Gaussian (δ > 0)
noise. Releases use a public n, so β̂ = exact fixed-point sums / (n·2^P) is known exactly.

With a private n the release divides by a noisy count, and the half-width (at ``expected_n`` =
the true n) must cover at least ``1 − alpha`` of releases: it adds the count's error with the
worst-case ‖β̂‖₂, so it is conservative and only the lower side is asserted.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting import Accountant, Neighbouring, PureDP
from dpkit.errors import PrivacyParameterError
from dpkit.random import seeded
from dpkit.release import series_degree, series_density, series_density_accuracy
from dpkit.release._series import exact_sums, plan_noise

ALPHA = 0.1
X = np.random.default_rng(0).beta(2.0, 5.0, 400)


def _band(m: int) -> float:
    return 4 * math.sqrt(ALPHA * (1 - ALPHA) / m)


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_l2_half_width_covers(delta: float) -> None:
    kw = {"bounds": (0, 1), "epsilon": 1.0, "delta": delta, "n": X.size, "degree": 12}
    w = series_density_accuracy(alpha=ALPHA, **kw)
    bits, caps, _ = plan_noise((12,), 1, 1.0, delta)
    exact = np.array(exact_sums(X[:, None], (12,), bits, caps), dtype=float)
    exact /= math.ldexp(float(X.size), bits)
    gen = seeded(8)
    m = 300
    norms = np.array(
        [np.linalg.norm(series_density(X, rng=gen, **kw).raw - exact) for _ in range(m)]
    )
    share = float(np.mean(norms <= w))
    assert 1 - ALPHA - _band(m) <= share <= 1 - ALPHA + 0.02 + _band(m)


def test_half_width_is_in_density_units_on_the_box() -> None:
    # p(x) = f(u)/V on a box of volume V: the L2 norm over the box is the cube's over √V
    kw = {"epsilon": 1.0, "n": 1000, "degree": 8}
    unit = series_density_accuracy(bounds=(0, 1), **kw)
    wide = series_density_accuracy(bounds=(0, 10), **kw)
    assert wide == pytest.approx(unit / math.sqrt(10.0), rel=1e-12)
    # replace-one doubles the sensitivity, so the half-width (the √M term aside)
    rep = series_density_accuracy(bounds=(0, 1), neighbouring=Neighbouring.REPLACE, **kw)
    assert rep == pytest.approx(2 * unit, rel=1e-3)


def test_degree_is_chosen_from_public_inputs_before_the_charge() -> None:
    acct = Accountant(PureDP(epsilon=5.0))
    # a private n and no degree: the degree would depend on the data, so the call is refused
    with pytest.raises(PrivacyParameterError, match="expected_n"):
        series_density(X, bounds=(0, 1), epsilon=1.0, accountant=acct, rng=1)
    with pytest.raises(PrivacyParameterError, match="expected_n"):
        series_density_accuracy(bounds=(0, 1), epsilon=1.0)
    assert not acct.ledger
    # with a public guess of n, the degree is the rule's at that guess whatever the data
    dens = series_density(X, bounds=(0, 1), epsilon=1.0, expected_n=1000, accountant=acct, rng=1)
    assert dens.raw.size == series_degree(1000, 1, 0.9)  # 10% of ε buys the noisy count
    half = series_density(X[:200], bounds=(0, 1), epsilon=1.0, expected_n=1000, rng=1)
    assert half.raw.size == dens.raw.size
    assert len(acct.ledger) == 1
    # the accuracy is planned for the same release
    w = series_density_accuracy(bounds=(0, 1), epsilon=1.0, expected_n=1000)
    assert w > series_density_accuracy(bounds=(0, 1), epsilon=1.0, n=1000)  # ε/10 for the count


def test_l2_half_width_covers_with_a_private_n() -> None:
    # β̃ − β̂ = Z/n̂ + β̂(n − n̂)/n̂: the second term is not small at n = 150 with ε/10 for the count
    # (the count's noise has scale 20), and a half-width of Z alone covered 0.839 of these
    # releases. 800 releases: binomial sd √(0.9·0.1/800) ≈ 0.0106, so a true 0.90 coverage falls
    # below the bound 0.9 − 4 sd ≈ 0.858 with probability < 10⁻⁴.
    x = X[:150]
    kw = {"bounds": (0, 1), "epsilon": 0.5, "degree": 8, "expected_n": x.size}
    w = series_density_accuracy(alpha=ALPHA, **kw)
    bits, caps, _ = plan_noise((8,), 1, 0.5 * 0.9, 0.0)  # 10% of ε buys the count
    exact = np.array(exact_sums(x[:, None], (8,), bits, caps), dtype=float)
    exact /= math.ldexp(float(x.size), bits)
    gen = seeded(8)
    m = 800
    norms = np.array(
        [np.linalg.norm(series_density(x, rng=gen, **kw).raw - exact) for _ in range(m)]
    )
    assert float(np.mean(norms <= w)) >= 1 - ALPHA - _band(m)
