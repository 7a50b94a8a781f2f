"""Privacy of the synthesisers: the plan's cost, charge before noise, audits, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit.accounting import (
    ZCDP,
    Accountant,
    ApproxDP,
    DiscreteGaussianEvent,
    Neighbouring,
    epsilon_of,
    zcdp_epsilon,
)
from dpkit.audit import Above, Coordinate, epsilon_lower_bound
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.release import (
    Categorical,
    Domain,
    Numeric,
    Synthesizer,
    discover_domain,
    partition_threshold,
)
from dpkit.release._marginals import marginal, noisy_counts
from dpkit.release._synth_plan import make_plan

DOM = Domain(
    {
        "a": Categorical(["x", "y", "z"]),
        "b": Numeric(0, 10, bins=4, atoms=[0]),
        "c": Categorical([0, 1]),
    }
)


def _data(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    gen = np.random.default_rng(seed)
    a = gen.choice(["x", "y", "z"], n)
    return {
        "a": a,
        "b": np.where(gen.random(n) < 0.3, 0.0, gen.uniform(0, 10, n)),
        "c": (a == "x").astype(int),
    }


@pytest.mark.parametrize("method", ["aim", "mst", "independent"])
@pytest.mark.parametrize("replace", [False, True])
def test_plan_spends_exactly_the_budget(method: str, replace: bool) -> None:
    # ρ of every part adds up to the budget (to the 1e-9 safety margin), for d = 2..12.
    for d in (2, 5, 12):
        plan = make_plan(method, 0.05, d, replace, 10**6)
        assert plan.spent_rho() <= 0.05
        assert plan.spent_rho() == pytest.approx(0.05, rel=1e-8)
        assert plan.rounds == (0 if method == "independent" else d - 1)


@pytest.mark.parametrize("method", ["aim", "mst"])
def test_zcdp_accountant_is_charged_the_whole_plan(method: str) -> None:
    acct = Accountant(ZCDP(rho=0.1))
    syn = Synthesizer(DOM, rho=0.1, method=method)
    syn.fit(_data(500), accountant=acct, rng=1)
    assert acct.spent.rho == pytest.approx(0.1, rel=1e-8)  # type: ignore[attr-defined]
    assert acct.spent.rho <= 0.1  # type: ignore[attr-defined]
    with pytest.raises(BudgetExceededError):
        syn.fit(_data(500), accountant=acct, rng=2)


def test_epsilon_delta_target_fits_an_approx_budget() -> None:
    # (ε, δ) is turned into the largest ρ whose CKS conversion gives (ε, δ); an (ε, δ)
    # accountant then accepts the fit exactly once.
    syn = Synthesizer(DOM, epsilon=1.0, delta=1e-6)
    assert zcdp_epsilon(syn.rho, 1e-6) == pytest.approx(1.0, rel=1e-9)
    assert epsilon_of(syn.event, delta=1e-6) <= 1.0 + 1e-9
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    syn.fit(_data(300), accountant=acct, rng=0)
    assert acct.spent.epsilon <= 1.0 * (1 + 1e-12)  # type: ignore[attr-defined]
    with pytest.raises(BudgetExceededError):
        syn.fit(_data(300), accountant=acct, rng=0)


def test_event_uses_the_neighbouring_relation() -> None:
    add = Synthesizer(DOM, rho=0.1).plan
    rep = Synthesizer(DOM, rho=0.1, neighbouring=Neighbouring.REPLACE).plan
    # Replace-one doubles Δ² (ℓ2 sensitivity √2), so σ grows by √2 at the same ρ.
    assert rep.sigma_round == pytest.approx(add.sigma_round * math.sqrt(2))
    assert rep.score_sensitivity == 2.0 and add.score_sensitivity == 1.0


def test_refused_charge_draws_no_noise() -> None:
    acct = Accountant(ZCDP(rho=0.01))
    gen = np.random.default_rng(5)
    before = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        Synthesizer(DOM, rho=0.1).fit(_data(100), accountant=acct, rng=gen)
    assert gen.bit_generator.state == before
    assert acct.spent.rho == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "bad",
    [
        {"a": ["x", None], "b": [1.0, 2.0], "c": [0, 1]},
        {"a": ["x", "y"], "b": [1.0, float("nan")], "c": [0, 1]},
        {"a": ["x", "y"], "b": [1.0, None], "c": [0, 1]},
        {"a": ["x", "y"], "b": ["1", "oops"], "c": [0, 1]},
        {"a": ["x", "y"], "b": [1.0, 2.0]},  # a column missing
        {"a": ["x", "y"], "b": [1.0, 2.0], "c": [0, 1], "d": [1, 2]},  # unknown column
        {"a": ["x", "y"], "b": [1.0], "c": [0, 1]},  # ragged
        [[1, 2, 3]],
    ],
)
def test_bad_data_is_refused_before_the_charge(bad: object) -> None:
    acct = Accountant(ZCDP(rho=1.0))
    with pytest.raises(DataError) as err:
        Synthesizer(DOM, rho=0.1).fit(bad, accountant=acct, rng=0)
    assert acct.spent.rho == 0  # type: ignore[attr-defined]
    assert "oops" not in str(err.value) and "'w'" not in str(err.value)  # no data echoed


@pytest.mark.parametrize(
    "odd",
    [
        {"a": ["x", "w"], "b": [1.0, 2.0], "c": [0, 1]},  # unknown category
        {"a": ["x", ["y"]], "b": [1.0, 2.0], "c": [0, 1]},  # a list value: was "ragged"
        {"a": np.array(["x", ["y"]], dtype=object), "b": [1.0, 2.0], "c": [0, 1]},
    ],
)
def test_values_outside_the_domain_are_not_refused(odd: object) -> None:
    # Refusing them would reveal that a record holds one (a membership oracle at ε = 0): the
    # record is dropped (DOM's "a" has no catch-all) and the fit goes on.
    model = Synthesizer(DOM, rho=0.1).fit(odd, rng=0)
    assert model.event == Synthesizer(DOM, rho=0.1).event


def test_out_of_range_numbers_are_clamped() -> None:
    codes = DOM.encode({"a": ["x", "y"], "b": [-5.0, 99.0], "c": [0, 1]})
    assert codes[:, 1].tolist() == [0, 4]  # -5 → 0, the atom; 99 → 10, the last bin


def test_empty_data_is_answered_with_noise() -> None:
    empty = {"a": np.array([], dtype=object), "b": np.array([]), "c": np.array([], dtype=int)}
    acct = Accountant(ZCDP(rho=1.0))
    model = Synthesizer(DOM, rho=0.5).fit(empty, accountant=acct, rng=3)
    assert acct.spent.rho > 0  # type: ignore[attr-defined]
    assert model.n_estimate >= 1.0
    assert model.sample(10, rng=0, output="dict")["a"].shape == (10,)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"epsilon": 0.0, "delta": 1e-6}, PrivacyParameterError),
        ({"epsilon": -1.0, "delta": 1e-6}, PrivacyParameterError),
        ({"epsilon": float("nan"), "delta": 1e-6}, PrivacyParameterError),
        ({"epsilon": 1.0, "delta": 1.0}, PrivacyParameterError),
        ({"epsilon": 1.0, "delta": 0.0}, PrivacyParameterError),
        ({"epsilon": 1.0}, PrivacyParameterError),
        ({"rho": 0.0}, PrivacyParameterError),
        ({"rho": 0.1, "epsilon": 1.0}, PrivacyParameterError),
        ({"rho": 0.1, "delta": 1e-6}, PrivacyParameterError),
        ({"rho": 0.1, "method": "gan"}, PrivacyParameterError),
        ({"rho": 0.1, "max_cells": 0}, PrivacyParameterError),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        Synthesizer(DOM, **kwargs)  # type: ignore[arg-type]


def test_domain_too_large_is_refused_with_the_memory_it_needs() -> None:
    wide = Domain({f"c{i}": Categorical(list(range(3000))) for i in range(3)})
    with pytest.raises(DataError, match=r"9,000,000 cells \(about 0\.5 GiB"):
        Synthesizer(wide, rho=1.0, method="mst")
    for method in ("aim", "mst", "independent"):
        with pytest.raises(DataError, match="GiB"):
            Synthesizer(Domain({"x": Numeric(0, 1, bins=2_000_000)}), rho=1.0, method=method)
    # AIM and the independent baseline need only the one-way tables here: they fit, and AIM
    # measures no pair (every pair is above max_cells).
    gen = np.random.default_rng(0)
    data = {f"c{i}": gen.integers(0, 3000, 50) for i in range(3)}
    for method in ("aim", "independent"):
        model = Synthesizer(wide, rho=1.0, method=method).fit(data, rng=1)
        assert all(len(m) == 1 for m in model.measured)


# --- audits of the measurement step ----------------------------------------------------------

SIGMA = 2.0
DELTA = 1e-5
CLAIM = epsilon_of(DiscreteGaussianEvent(sigma=SIGMA, sensitivity=1.0, dimension=2), delta=DELTA)
SHAPE = (2,)
D0 = np.zeros((20, 1), dtype=np.int64)  # 20 records in cell 0
D1 = np.zeros((21, 1), dtype=np.int64)  # one more: an add/remove neighbour


def _measurement(sigma: float):  # type: ignore[no-untyped-def]
    def mech(d: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        counts = marginal(d, SHAPE, (0,))
        return noisy_counts(np.tile(counts, (n, 1)), sigma, rng)

    return mech


def test_audit_marginal_measurement_does_not_exceed_its_claim() -> None:
    # The one-way marginal measured by the synthesisers' own noise function, on neighbours
    # differing in one record of cell 0; the test "cell 0 ≥ 21" is the likelihood-ratio test.
    res = epsilon_lower_bound(
        _measurement(SIGMA), D0, D1, trials=100_000, delta=DELTA, rng=11,
        region=Coordinate(0, Above(20.5)), confidence=0.999,
    )  # fmt: skip
    assert res.epsilon <= CLAIM
    assert res.epsilon > 0.3  # the audit has power: it sees a real part of the loss


def test_audit_catches_a_broken_measurement() -> None:
    # A variant that draws a quarter of the noise but claims the same ε is caught.
    res = epsilon_lower_bound(
        _measurement(SIGMA / 4), D0, D1, trials=100_000, delta=DELTA, rng=12, confidence=0.999
    )
    assert res.epsilon > CLAIM


# --- private domain discovery ----------------------------------------------------------------


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.1, 1e-9), (3.0, 1e-3)])
def test_partition_threshold_is_the_smallest_safe_one(eps: float, delta: float) -> None:
    # Discrete Laplace of scale 1/ε: P(Z ≥ k) = e^{-kε}/(1 + e^{-ε}) for k ≥ 1.
    def tail(k: int) -> float:
        return math.exp(-k * eps) / (1 + math.exp(-eps))

    tau = partition_threshold(eps, delta)
    assert tail(tau - 1) <= delta < tail(tau - 2)


def test_discovery_keeps_common_categories_and_charges() -> None:
    gen = np.random.default_rng(0)
    data = {
        "c": gen.choice(["a", "b", "tiny"], 4000, p=[0.5, 0.4995, 0.0005]),
        "x": gen.uniform(0, 100, 4000),
        "unused": np.full(4000, np.nan),  # columns not asked about are not read
    }
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    dom = discover_domain(
        data, numeric={"x": (0, 100)}, categorical=["c"], epsilon=1.0, delta=1e-6, bins=4,
        accountant=acct, rng=1,
    )  # fmt: skip
    cats = dom.columns["c"].categories  # type: ignore[union-attr]
    assert cats == ("a", "b", "other")  # "tiny" (2 records) cannot clear τ = 15
    edges = dom.columns["x"].bin_edges  # type: ignore[union-attr]
    assert edges[0] == 0 and edges[-1] == 100
    # Private quartiles of U(0, 100) on 4,000 points: within 5 of 25, 50, 75.
    assert np.all(np.abs(edges[1:-1] - [25, 50, 75]) < 5)
    assert 0 < acct.spent.epsilon <= 1.0 + 1e-12  # type: ignore[attr-defined]
    # Unselected values go to the catch-all category instead of failing after the charge.
    assert dom.names == ("x", "c")
    assert dom.encode({"c": ["tiny", "a"], "x": [1.0, 2.0]})[:, 1].tolist() == [2, 0]


def test_discovery_refuses_bad_input_before_charging() -> None:
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    with pytest.raises(DataError):
        discover_domain({"x": [1.0, float("nan")]}, numeric={"x": (0, 1)}, epsilon=1.0,
                        delta=1e-6, accountant=acct)  # fmt: skip
    with pytest.raises(DataError):
        discover_domain({"c": ["a", None]}, categorical=["c"], epsilon=1.0, delta=1e-6,
                        accountant=acct)  # fmt: skip
    with pytest.raises(PrivacyParameterError):
        discover_domain({"c": ["a"]}, categorical=["c"], epsilon=1.0, delta=1e-6,
                        neighbouring=Neighbouring.REPLACE)  # fmt: skip
    assert acct.spent.epsilon == 0  # type: ignore[attr-defined]


def test_discovery_on_empty_data_still_answers() -> None:
    dom = discover_domain(
        {"c": np.array([], dtype=object), "x": np.array([])}, numeric={"x": (0, 1)},
        categorical=["c"], epsilon=1.0, delta=1e-6, rng=0,
    )  # fmt: skip
    assert dom.columns["c"].categories == ("other",)  # type: ignore[union-attr]


def test_charge_matches_the_published_formulas() -> None:
    # d one-way tables at Δ²/(2σ₁²) and d − 1 rounds of ε²/8 (exponential mechanism, Cesar &
    # Rogers 2021) plus Δ²/(2σ²) (discrete Gaussian, Canonne, Kamath & Steinke 2020, Thm 14),
    # recomputed by hand and compared with what the accountant was charged.
    for nb, sens2 in ((Neighbouring.ADD_REMOVE, 1.0), (Neighbouring.REPLACE, 2.0)):
        syn = Synthesizer(DOM, rho=0.3, neighbouring=nb, estimator="closed")
        p = syn.plan
        want = 3 * sens2 / (2 * p.sigma_one_way**2)
        want += 2 * (p.select_epsilon**2 / 8 + sens2 / (2 * p.sigma_round**2))
        acct = Accountant(ZCDP(rho=1.0))
        acct.charge(syn.event)
        assert acct.spent.rho == pytest.approx(want, rel=1e-12)  # type: ignore[attr-defined]
        assert want == pytest.approx(0.3, rel=1e-8)


@pytest.mark.parametrize("eps", [3.0, 0.7, 1 / 3])
def test_partition_selection_noise_is_never_below_its_charged_epsilon(
    eps: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: the scale was the float 1.0/ε, which rounds down for these ε, so the noise
    # was (1/scale)-DP with 1/scale > ε: more than was charged. The true ε of discrete Laplace
    # noise of scale b on a count is exactly 1/b (b rational), so this compares exactly.
    import dpkit.release._discovery as disc

    seen: list[object] = []
    real = disc.discrete_laplace

    def spy(scale: object, *args: object, **kwargs: object) -> object:
        seen.append(scale)
        return real(scale, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(disc, "discrete_laplace", spy)
    data = {"c": np.array(["a"] * 50 + ["b"] * 50)}
    discover_domain(data, categorical=["c"], epsilon=eps, delta=1e-6, rng=0)
    (scale,) = seen
    assert 1 / Fraction(scale) <= Fraction(eps)  # type: ignore[arg-type]


def test_discovery_refuses_text_in_a_numeric_column_without_quoting_it() -> None:
    data = {"x": np.array(["secret-value", "1"], dtype=object)}
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    with pytest.raises(DataError) as info:
        discover_domain(data, numeric={"x": (0, 1)}, epsilon=1.0, delta=1e-6, accountant=acct)
    assert "secret" not in str(info.value)
    assert not acct.ledger  # refused before the charge


@pytest.mark.parametrize(
    ("values", "other"),
    [
        (["a"] * 100, None),  # no catch-all: Categorical refused None after the charge
        (np.array(["a"] * 100, dtype=object), ["not", "hashable"]),
    ],
)
def test_discovery_refuses_bad_categories_before_the_charge(values: object, other: object) -> None:
    # Regression: each of these was refused (or crashed with a bare ValueError) only after
    # discover_domain had charged the accountant and drawn the noise.
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    with pytest.raises(DataError):
        discover_domain(
            {"c": values}, categorical=["c"], epsilon=1.0, delta=1e-6, accountant=acct,
            rng=0, other=other,
        )  # fmt: skip
    assert not acct.ledger


def test_discovery_counts_unhashable_values_by_their_text() -> None:
    # Lists were refused, which revealed that a record held one; they are counted by text.
    col = np.array([[1]] * 100 + [[2]] * 100 + ["x"], dtype=object)
    dom = discover_domain({"c": col}, categorical=["c"], epsilon=1.0, delta=1e-6, rng=0)
    assert dom.columns["c"].categories == ("[1]", "[2]", "other")  # type: ignore[union-attr]


def test_discovery_merges_categories_that_compare_equal() -> None:
    # Regression: 1 and True (or 1 and 1.0) in an object column print differently, so both
    # could clear the threshold; Categorical then refused the "duplicate" after the charge,
    # an exception that depended on the noisy counts.
    col = np.array([1] * 200 + [True] * 200 + ["b"] * 200, dtype=object)
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    dom = discover_domain({"c": col}, categorical=["c"], epsilon=1.0, delta=1e-6,
                          accountant=acct, rng=0)  # fmt: skip
    cats = dom.columns["c"].categories  # type: ignore[union-attr]
    assert len(cats) == 3 and "b" in cats and 1 in cats  # 200 records each clear τ = 15


@pytest.mark.parametrize("bounds", [5, (0,), (0, 1, 2)])
def test_discovery_refuses_malformed_bounds_with_a_data_error(bounds: object) -> None:
    # Regression: Numeric(*bounds) raised a bare TypeError.
    with pytest.raises(DataError, match="pair"):
        discover_domain({"x": [1.0, 2.0]}, numeric={"x": bounds}, epsilon=1.0, delta=1e-6)  # type: ignore[dict-item]
