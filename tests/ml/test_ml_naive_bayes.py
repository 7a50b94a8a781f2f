"""GaussianNB: the budget split and the post-processing of its noisy statistics."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.accounting import Accountant, PureDP, epsilon_of
from dpkit.mechanisms import Laplace
from dpkit.ml import GaussianNB
from dpkit.ml._moments import group_moments_plan

G = np.random.default_rng(7)
LOW = np.array([-1.0, 0.0, 10.0])
HIGH = np.array([1.0, 4.0, 12.0])
HALF = (HIGH - LOW) / 2


def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    y = G.integers(0, 3, n)
    X = LOW + (HIGH - LOW) * G.uniform(0.2, 0.8, (n, 3)) + 0.1 * y[:, None]
    return X, y


@pytest.mark.parametrize("eps", [1e-3, 0.1, 1.0, 100.0])
def test_released_means_and_variances_stay_in_the_declared_box(eps: float) -> None:
    # At small ε the noisy sums and counts are far outside any plausible range (a noisy
    # mean of several box widths, a negative variance); every draw must still come back
    # inside the box, with a variance between the data-independent floor and h².
    X, y = _data(60)
    for seed in range(40):
        nb = GaussianNB(epsilon=eps, bounds=(LOW, HIGH), classes=[0, 1, 2], rng=seed).fit(X, y)
        assert np.all(nb.theta_ >= LOW) and np.all(nb.theta_ <= HIGH)
        assert np.all(nb.var_ >= 1e-3 * HALF**2 * (1 - 1e-12))
        assert np.all(nb.var_ <= HALF**2 * (1 + 1e-12))
        assert np.all(nb.class_prior_ > 0) and np.isclose(nb.class_prior_.sum(), 1.0)


def test_noise_dominated_variances_tend_to_the_public_default() -> None:
    # At ε = 1e-3 the sums of squares carry Laplace noise of scale Σh²/(3ε/16) ≈ 2.4e4 against
    # counts of at most a few hundred: the estimate is pure noise, and the variance must sit at
    # the default (h/2)² (within 5%: the inverse-variance weight of the raw value is < 1e-4).
    # Measured over seeds 40-239, 28 of 200 fits have a variance more than 5% off the default,
    # with the exact samplers' streams before and after their speed-up alike (a seed-by-seed
    # assertion held on these ten seeds only by luck): at most 3 of 10 may be (P ≈ 0.05 at a
    # 14% rate; a fit that tracked the raw value would miss on every seed).
    X, y = _data(300)
    near = 0
    for seed in range(10):
        nb = GaussianNB(epsilon=1e-3, bounds=(LOW, HIGH), classes=[0, 1, 2], rng=seed).fit(X, y)
        near += bool(np.allclose(nb.var_, HALF**2 / 4, rtol=0.05, atol=0.0))
    assert near >= 7, near


def test_accurate_variances_are_kept_at_large_epsilon() -> None:
    # At ε = 1e4 the noise is negligible (Laplace scales ≤ 1e-3 on sums over ~1000 records):
    # means and variances must be the data's own (uniform on 60% of the box, so a within-class
    # variance of (1.2h)²/12 = 0.12h²), not pulled to the default (h/2)² = 0.25h².
    X, y = _data(3000)
    nb = GaussianNB(epsilon=1e4, bounds=(LOW, HIGH), classes=[0, 1, 2], rng=0).fit(X, y)
    for c in range(3):
        np.testing.assert_allclose(nb.var_[c], X[y == c].var(axis=0), rtol=0.05)
        np.testing.assert_allclose(nb.theta_[c], X[y == c].mean(axis=0), atol=0.01)


def test_the_split_is_charged_exactly_and_matches_the_noise_scales() -> None:
    X, y = _data(50)
    acct = Accountant(PureDP(epsilon=1.0))
    nb = GaussianNB(epsilon=0.8, bounds=(LOW, HIGH), classes=[0, 1, 2], accountant=acct, rng=1)
    nb.fit(X, y)
    # the three sequential parts add up to the declared ε, no more and no less
    assert epsilon_of(nb.event_, delta=0.0) == pytest.approx(0.8, rel=1e-12)
    assert acct.ledger[0].event == nb.event_
    # the scales are those of Laplace mechanisms at ε/4, 9ε/16 and 3ε/16 (sensitivity / ε_part,
    # never below it: the float-safe sampler may only round the scale up)
    for key, sens, part in [
        ("counts", 1.0, 0.2),
        ("sums", float(HALF.sum()), 0.45),
        ("squares", float((HALF**2).sum()), 0.15),
    ]:
        assert nb.noise_[key] >= sens / part
        assert nb.noise_[key] == pytest.approx(sens / part, rel=1e-9)
    assert nb.noise_["counts"] == pytest.approx(Laplace(epsilon=0.2, sensitivity=1.0).scale)


def test_group_moments_plan_rejects_a_malformed_split() -> None:
    for shares in [(0.5, 0.5), (0.5, 0.6, -0.1), (0.2, 0.2, 0.2), (0.0, 0.5, 0.5)]:
        with pytest.raises(ValueError, match="shares"):
            group_moments_plan(
                epsilon=1.0, low=LOW, high=HIGH, groups=2, squares=True, shares=shares
            )
    plan = group_moments_plan(epsilon=1.0, low=LOW, high=HIGH, groups=2, squares=True)
    assert plan.counts.epsilon == plan.sums.epsilon == plan.squares.epsilon  # type: ignore[union-attr]
