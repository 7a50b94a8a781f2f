"""The bound itself: Clopper–Pearson intervals and ε from error counts (exact tier)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from dpkit.audit import clopper_pearson, epsilon_from_counts
from dpkit.audit._clopper_pearson import cp_lower, cp_upper
from dpkit.errors import PrivacyParameterError


def test_known_answer_500_500_alpha_001() -> None:
    # Published auditing code (Jagielski et al. 2020; Nasr et al. 2021) uses two-sided
    # Clopper–Pearson intervals at alpha = 0.01: 0 errors of 500 gives the upper end
    # 1 - 0.005**(1/500) = 0.0105407 and eps = log((1 - 0.0105407) / 0.0105407) = 4.5419.
    r = epsilon_from_counts(
        false_positives=0, negatives=500, false_negatives=0, positives=500, confidence=0.99
    )
    hi = 1 - 0.005 ** (1 / 500)
    assert r.p_interval == (0.0, pytest.approx(hi, rel=1e-12))
    assert r.epsilon == pytest.approx(math.log((1 - hi) / hi), rel=1e-12)
    assert round(r.epsilon, 2) == 4.54
    assert r.p == r.q == 0.0


@pytest.mark.parametrize(("k", "n"), [(0, 10), (1, 10), (5, 10), (9, 10), (10, 10), (37, 1000)])
def test_cp_ends_solve_binomial_tails(k: int, n: int) -> None:
    alpha = 0.025
    hi = float(cp_upper(k, n, alpha))
    lo = float(cp_lower(k, n, alpha))
    # Defining equations: P(Bin(n, hi) <= k) = alpha and P(Bin(n, lo) >= k) = alpha.
    if k < n:
        assert binom.cdf(k, n, hi) == pytest.approx(alpha, rel=1e-9)
    else:
        assert hi == 1.0
    if k > 0:
        assert binom.sf(k - 1, n, lo) == pytest.approx(alpha, rel=1e-9)
    else:
        assert lo == 0.0
    assert clopper_pearson(k, n, confidence=0.95) == (pytest.approx(lo), pytest.approx(hi))


def test_cp_coverage_by_simulation() -> None:
    # The upper end at one-sided 0.025 must cover p in at least 97.5% of repetitions; the
    # Clopper–Pearson interval is conservative, so with 20_000 repetitions the observed miss rate
    # stays under 0.025 + 4 standard errors (0.0044) with overwhelming probability.
    rng = np.random.default_rng(5)
    for p in (0.001, 0.05, 0.3):
        k = rng.binomial(200, p, size=20_000)
        miss = np.mean(cp_upper(k, 200, 0.025) < p)
        assert miss < 0.025 + 4 * math.sqrt(0.025 * 0.975 / 20_000)


def test_bound_is_symmetric_and_uses_conservative_ends() -> None:
    r = epsilon_from_counts(false_positives=100, negatives=10_000, false_negatives=5_000,
                            positives=10_000)  # fmt: skip
    s = epsilon_from_counts(false_positives=5_000, negatives=10_000, false_negatives=100,
                            positives=10_000)  # fmt: skip
    assert r.epsilon == pytest.approx(s.epsilon)
    # Point estimates would give log(0.5 / 0.01) = 3.91; the upper ends must give less.
    assert 3.5 < r.epsilon < math.log(0.5 / 0.01)
    expected = math.log((1 - r.q_interval[1]) / r.p_interval[1])
    assert r.epsilon == pytest.approx(expected)


def test_delta_and_confidence_lower_the_bound() -> None:
    kw = {"false_positives": 3, "negatives": 50_000, "false_negatives": 45_000, "positives": 50_000}
    base = epsilon_from_counts(**kw)
    assert epsilon_from_counts(**kw, delta=0.05).epsilon < base.epsilon
    assert epsilon_from_counts(**kw, confidence=0.999).epsilon < base.epsilon
    # delta above the observed detection rate (0.1) removes all evidence.
    assert epsilon_from_counts(**kw, delta=0.2).epsilon == 0.0


def test_no_evidence_gives_zero() -> None:
    r = epsilon_from_counts(
        false_positives=5_000, negatives=10_000, false_negatives=5_000, positives=10_000
    )
    assert r.epsilon == 0.0
    assert not r.exceeds(0.1)
    assert r.delta_lower_bound(0.5) == 0.0


def test_delta_lower_bound_of_a_leak() -> None:
    # A record printed in the clear 10% of the time on D' and never on D: delta >= ~0.09.
    r = epsilon_from_counts(
        false_positives=0, negatives=10_000, false_negatives=9_000, positives=10_000
    )
    assert 0.09 < r.delta_lower_bound(1.0) < 0.1
    assert r.delta_lower_bound(1.0) <= r.delta_lower_bound(0.0)
    with pytest.raises(PrivacyParameterError):
        r.delta_lower_bound(math.inf)
    assert "ε ≥" in str(r)


@pytest.mark.parametrize(
    "kw",
    [
        {"false_positives": -1},
        {"false_positives": 11},
        {"negatives": 0},
        {"false_positives": 1.5},
        {"delta": 1.0},
        {"delta": float("nan")},
        {"confidence": 1.0},
        {"confidence": 0.0},
        {"confidence": True},
    ],
)
def test_bad_counts_raise(kw: dict[str, object]) -> None:
    args: dict[str, object] = {
        "false_positives": 1,
        "negatives": 10,
        "false_negatives": 1,
        "positives": 10,
    }
    args.update(kw)
    with pytest.raises(PrivacyParameterError):
        epsilon_from_counts(**args)  # type: ignore[arg-type]


def test_public_names_sorted_and_present() -> None:
    import dpkit.audit as audit

    assert list(audit.__all__) == sorted(audit.__all__)
    for name in audit.__all__:
        assert hasattr(audit, name), name
