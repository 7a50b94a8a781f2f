"""Numeric randomizers: unbiased with their exact variances, audited, bad input refused."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from dpkit.audit import Above, InSet, Predicate, epsilon_lower_bound
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local import DuchiMean, HybridMean, PiecewiseMean
from dpkit.local._coins import ONE

MECHS = [
    DuchiMean(epsilon=0.5),
    DuchiMean(epsilon=2.0),
    PiecewiseMean(epsilon=1.0),
    PiecewiseMean(epsilon=4.0),
    PiecewiseMean(epsilon=2.0, cells=64),
    HybridMean(epsilon=0.5),
    HybridMean(epsilon=3.0),
]


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: f"{m.name}-{m.epsilon}")
@pytest.mark.parametrize("t", [-1.0, -0.3, 0.0, 0.8, 1.0])
def test_unbiased_with_exact_variance(mech, t):
    reps = 200_000
    y = mech.randomize(np.full(reps, t), rng=int(1000 * (t + 2) + 10 * mech.epsilon))
    var = float(mech.variance(t))
    # mean within 5 exact standard errors
    assert abs(y.mean() - t) < 5 * math.sqrt(var / reps)
    # sample variance within 5 of its standard errors, √((μ₄ − σ⁴)/reps) from the sample
    m4 = float(np.mean((y - y.mean()) ** 4))
    assert abs(y.var() - var) < 5 * math.sqrt(max(m4 - var**2, 0.0) / reps), (y.var(), var)


def test_published_variances():
    # Wang et al. 2019: Duchi C² − t² with C = (e^ε+1)/(e^ε−1); PM
    # t²/(e^{ε/2}−1) + (e^{ε/2}+3)/(3(e^{ε/2}−1)²) — the grid version converges to it
    for eps in (0.5, 1.0, 3.0):
        e, h = math.exp(eps), math.exp(eps / 2)
        c = (e + 1) / (e - 1)
        d = DuchiMean(epsilon=eps)
        assert pytest.approx(c, rel=1e-12) == d.C
        assert float(d.variance(0.5)) == pytest.approx(c * c - 0.25, rel=1e-12)
        pm = PiecewiseMean(epsilon=eps)
        assert pytest.approx((h + 1) / (h - 1), rel=1e-4) == pm.C
        for t in (0.0, 0.7, 1.0):
            want = t * t / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)
            assert float(pm.variance(t)) == pytest.approx(want, rel=1e-3)
    # the hybrid's worst case is below both parts' (Wang et al. 2019, Lemma 4)
    for eps in (1.0, 2.0, 5.0):
        ts = np.linspace(-1, 1, 101)
        hy = HybridMean(epsilon=eps).variance(ts).max()
        assert hy <= DuchiMean(epsilon=eps).variance(ts).max()
        assert hy <= PiecewiseMean(epsilon=eps).variance(ts).max()


def test_mean_estimate_covers_truth():
    x = np.random.default_rng(0).uniform(-1, 1, 50_000)
    for m in (DuchiMean(epsilon=1.0), PiecewiseMean(epsilon=1.0), HybridMean(epsilon=1.0)):
        est = m.estimate_mean(m.randomize(x, rng=3))
        assert abs(est.value - x.mean()) < 4 * math.sqrt(est.variance)
        # the reported variance is (average report variance + spread of the values)/n, to 3%
        exact = (float(np.mean(m.variance(x))) + float(x.var())) / x.size
        assert est.variance == pytest.approx(exact, rel=0.03)
        assert est.ci(0.05) == pytest.approx(1.959964 * math.sqrt(est.variance))


TRIALS = 200_000


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_duchi_audit(eps):
    m = DuchiMean(epsilon=eps)
    r = epsilon_lower_bound(
        lambda t, n, rng: m.randomize(np.full(n, t), rng=rng),
        -1.0,
        1.0,
        trials=TRIALS,
        rng=1,
        region=InSet((m.C,)),
    )
    assert 0.85 * eps <= r.epsilon <= eps, r


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_piecewise_audit(eps):
    m = PiecewiseMean(epsilon=eps, cells=4096)
    top = m.C - m.m * 2 * m.C / m.cells  # the window of t = 1 is the top m cells
    r = epsilon_lower_bound(
        lambda t, n, rng: m.randomize(np.full(n, t), rng=rng),
        -1.0,
        1.0,
        trials=TRIALS,
        rng=2,
        region=Above(top),
    )
    assert 0.8 * eps <= r.epsilon <= eps, r


def test_hybrid_audit_with_selected_region():
    m = HybridMean(epsilon=2.0, cells=256)
    r = epsilon_lower_bound(
        lambda t, n, rng: m.randomize(np.full(n, t), rng=rng), -1.0, 1.0, trials=TRIALS, rng=3
    )
    assert 0.3 <= r.epsilon <= 2.0, r


@dataclass(frozen=True, kw_only=True)
class _OverconfidentDuchi(DuchiMean):
    """Broken on purpose: the coin range of ε = 2.5 under a claim of ε = 1."""

    name: ClassVar[str] = "broken"

    def _calibrate(self) -> None:
        super()._calibrate()
        object.__setattr__(self, "_num", DuchiMean(epsilon=2.5)._num)


def test_broken_numeric_randomizer_is_caught():
    m = _OverconfidentDuchi(epsilon=1.0)
    assert m._num > DuchiMean(epsilon=1.0)._num and m._num < ONE
    r = epsilon_lower_bound(
        lambda t, n, rng: m.randomize(np.full(n, t), rng=rng),
        -1.0,
        1.0,
        trials=TRIALS,
        rng=4,
        region=Predicate(lambda y: y > 0, name="+C"),
    )
    assert r.epsilon > 1.0, r


@pytest.mark.parametrize("cls", [DuchiMean, PiecewiseMean, HybridMean])
def test_bad_input(cls):
    m = cls(epsilon=1.0)
    for bad in ([np.nan], None, ["a"], [[[0.1, 0.2]]]):
        with pytest.raises(DataError):
            m.randomize(bad, rng=0)
    for far, bound in (([1.5], [1.0]), ([np.inf], [1.0]), ([-1.01], [-1.0])):  # clamped
        np.testing.assert_array_equal(m.randomize(far, rng=0), m.randomize(bound, rng=0))
    with pytest.raises(DataError, match="no reports"):
        m.estimate_mean(np.zeros(0))
    with pytest.raises(DataError):
        m.estimate_mean(np.array([0.123456]))  # not an output of this mechanism
    with pytest.raises(DataError):
        m.estimate_mean(cls(epsilon=2.0).randomize(np.zeros(200), rng=0))
    with pytest.raises(DataError):
        m.estimate_mean(None)
    for eps in (0.0, -1.0, math.inf, None):
        with pytest.raises(PrivacyParameterError):
            cls(epsilon=eps)
    with pytest.raises(PrivacyParameterError):
        PiecewiseMean(epsilon=1.0, cells=4)


def test_vector_mean_unbiased_with_exact_variance():
    from dpkit.local import VectorMean

    vm = VectorMean(epsilon=6.0, d=6)  # k = 2 coordinates per user at ε/2 each
    assert vm.k == 2
    t = np.array([0.9, -0.2, 0.0, 0.5, -1.0, 1.0])
    n, reps = 3000, 300
    ests = np.array(
        [vm.estimate_mean(vm.randomize(np.tile(t, (n, 1)), rng=r)).value for r in range(reps)]
    )
    var = vm.variance(t) / n
    assert np.all(np.abs(ests.mean(axis=0) - t) < 5 * np.sqrt(var / reps))
    # sample variances of 300 near-normal means: relative SE √(2/299) ≈ 0.082; 5 SE ≈ 0.41
    assert np.all(np.abs(ests.var(axis=0, ddof=1) / var - 1) < 0.41)


def test_vector_mean_audit_and_errors():
    from dpkit.local import DuchiMean, VectorMean, VectorReports

    vm = VectorMean(epsilon=1.0, d=3, base=DuchiMean)
    c = vm._one.C

    def mech(x, n, rng):
        r = vm.randomize(np.tile(x, (n, 1)), rng=rng)
        return (r.values[:, 0] == c) * (r.indices[:, 0] + 1)  # coordinate seen at +C, else 0

    r = epsilon_lower_bound(
        mech, [-1.0, 0, 0], [1.0, 0, 0], trials=TRIALS, rng=5, region=InSet((1,))
    )
    assert r.epsilon <= 1.0
    with pytest.raises(DataError):
        vm.randomize(np.zeros((4, 2)), rng=0)
    with pytest.raises(DataError):
        vm.randomize(np.full((4, 3), np.nan), rng=0)
    clamped = vm.randomize(np.full((4, 3), 2.0), rng=0)  # beyond [-1, 1]: clamped, not refused
    np.testing.assert_array_equal(clamped.values, vm.randomize(np.ones((4, 3)), rng=0).values)
    good = vm.randomize(np.zeros((4, 3)), rng=0)
    with pytest.raises(DataError):
        vm.estimate_mean(VectorReports(good.indices + 3, good.values))
    with pytest.raises(DataError):
        vm.estimate_mean(VectorReports(good.indices, good.values * 0.5))
    with pytest.raises(DataError):
        vm.estimate_mean(VectorReports(good.indices[:0], good.values[:0]))
    with pytest.raises(PrivacyParameterError):
        VectorMean(epsilon=1.0, d=0)
