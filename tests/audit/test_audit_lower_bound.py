"""epsilon_lower_bound on hand-written mechanisms, pair helpers and the negative controls."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from dpkit.audit import (
    Above,
    InBins,
    InSet,
    OnLattice,
    Predicate,
    RowsIn,
    epsilon_lower_bound,
    is_batched,
)
from dpkit.audit._controls import (
    histogram_scale_epsilon,
    laplace_half_scale,
    naive_float_laplace,
    name_and_shame,
    negative_controls,
    noisy_max_value,
)
from dpkit.audit._pairs import (
    count_pair,
    histogram_pair,
    mean_pair,
    noisy_max_pair,
    quantile_pair,
    sum_pair,
)
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.noise import laplace

FloatArray = np.ndarray[Any, np.dtype[np.float64]]


def grid_laplace(scale: float) -> Any:
    def mech(d: float, n: int, rng: np.random.Generator) -> Any:
        return laplace(np.full(n, d), scale, rng=rng)

    return mech


def randomized_response(eps: float) -> Any:
    keep = math.exp(eps) / (1 + math.exp(eps))

    def mech(bit: int, n: int, rng: np.random.Generator) -> Any:
        return np.where(rng.random(n) < keep, bit, 1 - bit)

    return mech


def test_correct_laplace_is_not_refuted_and_bound_is_informative() -> None:
    r = epsilon_lower_bound(grid_laplace(1.0), 0.0, 1.0, trials=100_000, rng=3)
    # Laplace(1) on a sensitivity-1 pair is exactly 1-DP; a good region gets close to 1.
    assert 0.7 < r.epsilon <= 1.0
    # A tail threshold, or the likelihood-ranked bins (for a shifted Laplace the likelihood ratio
    # is monotone, so ranking bins by it rebuilds a tail region up to sampling noise).
    assert isinstance(r.region, Above | InBins) or "output <=" in str(r.region)
    assert r.selection_trials == 50_000
    assert r.negatives == r.positives == 50_000


def test_randomized_response_exact_epsilon_never_exceeded() -> None:
    # RR with log-odds eps is exactly eps-DP and the region {output = 1} attains it, so the bound
    # is close to eps from below. Each of the 12 seeded audits exceeds eps with probability at
    # most 5% (the confidence); the Clopper–Pearson ends are conservative and the fixed seeds
    # make the outcome deterministic.
    for seed, eps in enumerate([0.25, 0.5, 1.0, 2.0] * 3):
        r = epsilon_lower_bound(randomized_response(eps), 0, 1, trials=40_000, rng=seed)
        assert r.epsilon <= eps
        assert r.epsilon > 0.8 * eps
        assert isinstance(r.region, InSet | Above)


def test_unbatched_form_and_labels() -> None:
    def coin(d: str, rng: np.random.Generator) -> str:
        return d if rng.random() < 0.6 else "other"

    assert not is_batched(coin)
    r = epsilon_lower_bound(coin, "a", "b", trials=4_000, rng=1)
    # P(a | D) = 0.6 vs 0 on D' would be infinite ε; the region {"a"} shows it.
    assert r.epsilon > 3
    assert isinstance(r.region, InSet)


def test_vector_outputs_use_a_classifier() -> None:
    # Gaussian noise σ=1 on 5 coordinates, mean shifted by 0.5 in each: the classifier's
    # direction (shift 1.12 in units of σ) beats any single coordinate (shift 0.5). The noise
    # is rounded to a 2^-20 grid so that low-order bits carry no signal.
    shift = np.full(5, 0.5)

    def mech(d: FloatArray, n: int, rng: np.random.Generator) -> Any:
        return d + np.round(rng.normal(size=(n, 5)) * 2**20) / 2**20

    r = epsilon_lower_bound(mech, np.zeros(5), shift, trials=40_000, rng=2)
    assert r.epsilon > 0.5
    assert "linear score" in str(r.region)


def test_discrete_vector_rows() -> None:
    def mech(d: int, n: int, rng: np.random.Generator) -> Any:
        out = rng.integers(0, 2, size=(n, 2))
        out[:, 0] = np.where(rng.random(n) < 0.7, d, out[:, 0])
        return out

    r = epsilon_lower_bound(mech, 0, 1, trials=20_000, rng=4)
    assert isinstance(r.region, RowsIn)
    # True ratio P(first = 1 | D') / P(first = 1 | D) = 0.85 / 0.15: ε = log(5.67) = 1.73.
    assert 1.2 < r.epsilon <= 1.74


def test_fixed_region_uses_all_runs() -> None:
    r = epsilon_lower_bound(
        grid_laplace(1.0), 0.0, 1.0, trials=20_000, rng=0, region=lambda y: y >= 1.5
    )
    assert r.selection_trials == 0 and r.negatives == 20_000
    assert isinstance(r.region, Predicate) and str(r.region) == "<lambda>"
    assert r.epsilon <= 1.0
    r2 = epsilon_lower_bound(grid_laplace(1.0), 0.0, 1.0, trials=1_000, rng=0, region=OnLattice(0))
    assert r2.epsilon == 0.0


def test_progress_reports_every_run() -> None:
    seen: list[tuple[int, int]] = []
    epsilon_lower_bound(
        randomized_response(1.0),
        0,
        1,
        trials=50_000,
        rng=0,
        progress=lambda a, b: seen.append((a, b)),
    )
    assert seen[-1] == (100_000, 100_000)
    assert all(b == 100_000 for _, b in seen)
    assert [a for a, _ in seen] == sorted(a for a, _ in seen)
    seen.clear()
    epsilon_lower_bound(
        lambda d, rng: d, 0, 1, trials=10, rng=0, progress=lambda a, b: seen.append((a, b))
    )
    assert seen[-1] == (20, 20)


def test_bad_arguments() -> None:
    mech = grid_laplace(1.0)
    with pytest.raises(PrivacyParameterError, match="trials"):
        epsilon_lower_bound(mech, 0.0, 1.0, trials=2)
    with pytest.raises(PrivacyParameterError, match="trials"):
        epsilon_lower_bound(mech, 0.0, 1.0, trials=10.0)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="delta"):
        epsilon_lower_bound(mech, 0.0, 1.0, trials=10, delta=1.0)
    with pytest.raises(PrivacyParameterError, match="confidence"):
        epsilon_lower_bound(mech, 0.0, 1.0, trials=10, confidence=1.5)
    with pytest.raises(PrivacyParameterError, match="selection"):
        epsilon_lower_bound(mech, 0.0, 1.0, trials=10, selection=1.0)
    with pytest.raises(PrivacyParameterError, match="callable"):
        epsilon_lower_bound(42, 0.0, 1.0, trials=10)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="first axis"):
        epsilon_lower_bound(lambda d, n, rng: np.zeros(3), 0, 1, trials=10, rng=0)
    with pytest.raises(DataError, match="different shapes"):
        epsilon_lower_bound(lambda d, n, rng: np.zeros((n, d)), 1, 2, trials=10, rng=0)
    with pytest.raises(DataError, match="one boolean per trial"):
        epsilon_lower_bound(
            lambda d, n, rng: np.zeros(n), 1, 2, trials=10, rng=0, region=lambda y: True
        )


def test_pairs_are_neighbours() -> None:
    d0, d1 = count_pair(5)
    assert d1.size - d0.size == 1
    d0, d1 = sum_pair((-3.0, 2.0), 4)
    assert d1.sum() - d0.sum() == -3.0  # the larger-magnitude bound
    d0, d1 = sum_pair((-3.0, 2.0), 4, relation="replace")
    assert d0.size == d1.size and np.count_nonzero(d0 != d1) == 1
    d0, d1 = mean_pair((0.0, 1.0), 4, relation="replace")
    assert np.count_nonzero(d0 != d1) == 1
    d0, d1 = quantile_pair((0.0, 10.0), 0.25)
    # the target rank q·n falls between the piles: (1 − q)·#below == q·#above
    assert 0.75 * np.sum(d0 < 5) == 0.25 * np.sum(d0 > 5) and d1.tolist() == [*d0, 0.0]
    d0, d1 = quantile_pair((0.0, 10.0), 0.75)
    assert 0.25 * np.sum(d0 < 5) == 0.75 * np.sum(d0 > 5) and d1.tolist() == [*d0, 10.0]
    d0, d1 = quantile_pair((0.0, 10.0), 0.1, relation="replace")
    assert d0.size == d1.size and np.count_nonzero(d0 != d1) == 1
    d0, d1 = histogram_pair(np.linspace(0, 1, 5), 3)
    assert np.histogram(d1, np.linspace(0, 1, 5))[0].tolist() == [4, 0, 0, 0]
    d0, d1 = noisy_max_pair(4, monotone=False)
    assert np.max(np.abs(d0 - d1)) == 1.0
    with pytest.raises(PrivacyParameterError, match="relation"):
        sum_pair((0.0, 1.0), relation="swap")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="bounds"):
        mean_pair((1.0, 0.0))
    with pytest.raises(DataError, match="edges"):
        histogram_pair([0.0, 1.0])
    with pytest.raises(PrivacyParameterError):
        quantile_pair((0.0, 1.0), q=1.0)


# Negative controls: each must be caught with a bound clearly above its claim. Fixed seeds; the
# margins (>= 1.3x the claim, or far more) leave room for Clopper–Pearson slack at 30_000 runs.
@pytest.mark.parametrize(
    ("case", "at_least"),
    [
        (laplace_half_scale(1.0), 1.5),  # really 2-DP
        (laplace_half_scale(0.5), 0.75),  # really 1-DP
        (histogram_scale_epsilon(0.5), 1.3),  # really 2-DP
        (histogram_scale_epsilon(0.25), 2.0),  # really 4-DP
        (noisy_max_value(1.0), 2.5),  # value leaks k·ε/2 = 5
        (noisy_max_value(0.5), 0.8),
        (naive_float_laplace(1.0), 5.0),  # the lattice gives away the input
        (naive_float_laplace(0.1), 4.0),  # 40x the claim
        (name_and_shame(1.0), 3.0),  # infinite ε at δ = 1/n²
    ],
    ids=lambda v: v.name if hasattr(v, "name") else str(v),
)
def test_negative_controls_are_caught(case: Any, at_least: float) -> None:
    r = case.run(trials=30_000, rng=11)
    assert r.epsilon >= at_least > case.claimed_epsilon
    assert r.exceeds(case.claimed_epsilon)


def test_name_and_shame_meets_its_letter_but_not_its_spirit() -> None:
    case = name_and_shame(1.0, n=100)
    assert case.audit_delta == pytest.approx(1e-4)
    # At its own delta (5/n) Name & Shame *is* (0, δ)-DP: an honest audit must not refute it...
    published = Predicate(lambda y: y[:, 0] == 1, name="record 0 published as 1")
    r = epsilon_lower_bound(
        case.mechanism, case.d0, case.d1, trials=30_000, delta=case.delta, rng=5, region=published
    )
    assert r.epsilon <= case.claimed_epsilon
    # ...but the delta it needs at the claimed ε is at least 1/n: it publishes records.
    assert r.delta_lower_bound(case.claimed_epsilon) > 1 / 100


def test_control_list() -> None:
    cases = negative_controls(2.0)
    assert len(cases) == 5
    assert {c.claimed_epsilon for c in cases} == {2.0, 0.5}
    with pytest.raises(PrivacyParameterError):
        histogram_scale_epsilon(1.0)
