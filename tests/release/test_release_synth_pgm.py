"""The joint estimator (Private-PGM's approach) and AIM/MST on it: exact inference, the fit,
the budget spent exactly, the model-size cap, and accuracy against the closed form."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

from dpkit.accounting import ZCDP, Accountant, Neighbouring
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.release import Categorical, Domain, Synthesizer, _pgm, _synth_aim
from dpkit.release._examples import fair_domain, load_fair
from dpkit.release._graphical import BayesNet, Family
from dpkit.release._junction import junction_tree, model_cells
from dpkit.release._marginals import tvd
from dpkit.release._pgm import NoisyMarginal, _model, fit_markov, potentials_from_net
from dpkit.release._report import mean_marginal_tvd
from dpkit.release._synth_plan import AIM_ONE_WAY_TOP_UP

SHAPE = (2, 3, 2, 3, 2)


def _brute(
    shape: tuple[int, ...], sets: list[tuple[int, ...]], pots: list[np.ndarray]
) -> np.ndarray:
    joint = np.zeros(shape)
    for idx in itertools.product(*[range(k) for k in shape]):
        logp = sum(p[tuple(idx[c] for c in s)] for s, p in zip(sets, pots, strict=True))
        joint[idx] = math.exp(logp)
    return joint / joint.sum()


def _net_joint(net: BayesNet) -> np.ndarray:
    joint = np.ones(net.shape)
    for fam in net.families:
        axes = (*fam.parents, fam.child)
        srt = sorted(axes)
        t = np.transpose(fam.table, [axes.index(a) for a in srt])
        joint = joint * t.reshape([net.shape[c] if c in axes else 1 for c in range(len(net.shape))])
    return joint


@pytest.mark.parametrize("direct_cells", [0, 50_000])
def test_junction_tree_marginals_equal_brute_force(
    direct_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Marginals across cliques are summed by einsum (0) or one broadcast product (50,000).
    monkeypatch.setattr(_pgm, "DIRECT_CELLS", direct_cells)
    _pgm._einsum_path.cache_clear()
    _pgm._elimination_plan.cache_clear()
    # A 5-cycle plus a chord: its graph must be triangulated before a junction tree exists.
    gen = np.random.default_rng(0)
    sets = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4), (1, 3)]
    pots = [gen.normal(size=[SHAPE[c] for c in s]) for s in sets]
    tree = junction_tree(SHAPE, sets)
    assert all(any(set(s) <= set(c) for c in tree.cliques) for s in sets)
    model = _model(SHAPE, sets, pots, tree, 1.0)
    joint = _brute(SHAPE, sets, pots)
    for cols in [(0,), (1, 3), (3, 1), (0, 2), (4, 2, 0), (0, 1, 2, 3, 4)]:
        want = tuple(sorted(cols))
        bf = joint.sum(axis=tuple(i for i in range(5) if i not in cols))
        bf = np.transpose(bf, [want.index(c) for c in cols])
        np.testing.assert_allclose(model.project(cols), bf, atol=1e-12)
    # The same distribution as a Bayesian network (what sampling draws from), exactly.
    np.testing.assert_allclose(_net_joint(model.to_network()), joint, atol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 20.0, 200.0])
def test_probability_space_inference_equals_log_space_or_declines(scale: float) -> None:
    # The fit's fast path (exponentiated potentials) must give log space's clique marginals
    # whenever it answers, and decline when the potentials span more than it can represent.
    gen = np.random.default_rng(1)
    sets = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4), (1, 3)]
    tree = junction_tree(SHAPE, sets)
    pots = [gen.normal(size=[SHAPE[c] for c in cl]) * scale for cl in tree.cliques]
    full, log_z = tree.calibrate_log(pots)
    fast = tree.calibrate_prob(pots)
    span = sum(float(p.max() - p.min()) for p in pots)
    assert (fast is None) == (span > 700.0)
    if fast is not None:
        for b, f in zip(fast, full, strict=True):
            np.testing.assert_allclose(b, np.exp(f - log_z), rtol=1e-9, atol=1e-300)


def test_fit_to_exact_marginals_of_a_tree_reproduces_the_table() -> None:
    # A table that is exactly a tree (0 − 1, 1 − 2, 1 − 3): the expected counts of 10,000
    # records. Given its pair marginals without noise, the fitted model is the table itself
    # (the maximum-entropy distribution with those marginals is the tree), to optimiser
    # tolerance (TVD below 1e-4, one record in 10,000).
    gen = np.random.default_rng(1)
    shape = (3, 4, 2, 3)
    p0 = gen.dirichlet(np.ones(3))
    p1 = gen.dirichlet(np.ones(4), size=3)
    p2 = gen.dirichlet(np.ones(2), size=4)
    p3 = gen.dirichlet(np.ones(3), size=4)
    table = 10_000 * np.einsum("a,ab,bc,bd->abcd", p0, p1, p2, p3)
    sets = [(0, 1), (1, 2), (1, 3)]
    meas = [
        NoisyMarginal(s, table.sum(axis=tuple(i for i in range(4) if i not in s)), 1.0)
        for s in sets
    ]
    model = fit_markov(shape, meas, 10_000.0, iterations=2000)
    for m in meas:
        assert tvd(model.project(m.cols), m.values) < 1e-4
    assert tvd(model.project((0, 1, 2, 3)), table) < 1e-4
    start = fit_markov(shape, meas, 10_000.0, iterations=0)  # independent columns
    assert tvd(start.project((0, 1, 2, 3)), table) > 0.05  # so the test can fail


def test_warm_start_from_the_closed_form_is_the_closed_form() -> None:
    gen = np.random.default_rng(2)
    shape = (2, 3, 4)
    net = BayesNet(
        shape,
        (
            Family(1, (), gen.dirichlet(np.ones(3))),
            Family(0, (1,), gen.dirichlet(np.ones(2), size=3)),
            Family(2, (1, 0), gen.dirichlet(np.ones(4), size=(3, 2))),
        ),
    )
    sets = [(0, 1, 2)]
    meas = [NoisyMarginal((0, 1, 2), np.zeros(shape), 1.0)]
    model = fit_markov(shape, meas, 1.0, warm=potentials_from_net(net, sets), iterations=0)
    np.testing.assert_allclose(model.project((0, 1, 2)), _net_joint(net), atol=1e-12)


SIZES = (3, 4, 2, 5, 3)
SMALL = Domain({k: Categorical(list(range(n))) for k, n in zip("abcde", SIZES, strict=True)})


def _small_data(seed: int = 0) -> dict[str, np.ndarray]:
    gen = np.random.default_rng(seed)
    a = gen.integers(0, 3, 3000)
    b = (a + gen.integers(0, 2, 3000)) % 4
    c = (b > 1).astype(int)
    d = np.where(gen.random(3000) < 0.7, b, gen.integers(0, 5, 3000))
    e = (a + c) % 3
    return dict(zip("abcde", (a, b, c, d, e), strict=True))


@pytest.mark.parametrize("relation", [Neighbouring.ADD_REMOVE, Neighbouring.REPLACE])
def test_aim_spends_the_whole_budget_exactly_and_never_more(relation: Neighbouring) -> None:
    syn = Synthesizer(SMALL, rho=0.05, neighbouring=relation)
    acct = Accountant(ZCDP(rho=0.05))
    steps: list[tuple[int, int]] = []
    model = syn.fit(_small_data(), accountant=acct, rng=3, progress=lambda *a: steps.append(a))
    assert steps[-1] == (1 + syn.plan.rounds, 1 + syn.plan.rounds)  # a progress bar ends full
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(steps))
    assert acct.spent.rho <= 0.05  # type: ignore[attr-defined]
    sens2 = 2.0 if relation is Neighbouring.REPLACE else 1.0
    p = syn.plan
    spent = len(SMALL.names) * sens2 / (2 * p.sigma_one_way**2)
    spent += sum(sens2 / (2 * s**2) + e**2 / 8 for _, s, e in model.rounds)
    assert spent <= p.rho  # what the rounds drew never exceeds the charged plan
    assert spent == pytest.approx(p.rho, rel=1e-9)  # and the last round spent the rest
    assert spent == pytest.approx(0.05, rel=1e-8)
    assert len(model.rounds) >= 2


@pytest.mark.parametrize("relation", [Neighbouring.ADD_REMOVE, Neighbouring.REPLACE])
def test_aim_measures_shallow_one_way_tables_again_within_its_budget(
    relation: Neighbouring,
) -> None:
    # At ρ = 0.002 the one-way tables' σ₀ ≈ 150 against cells of ~600 rows: every column is
    # below ONE_WAY_SNR noise sds per cell and is measured again, the repeats costing at most
    # AIM_ONE_WAY_TOP_UP of ρ (Δ²/(2σ²) each, no selection); the rounds then spend the rest.
    syn = Synthesizer(SMALL, rho=0.002, neighbouring=relation)
    acct = Accountant(ZCDP(rho=0.002))
    model = syn.fit(_small_data(), accountant=acct, rng=3)
    p = syn.plan
    sens2 = 2.0 if relation is Neighbouring.REPLACE else 1.0
    repeats = [(r, s) for r, s, e in model.rounds if e == 0.0]
    assert sorted(r for r, _ in repeats) == [(k,) for k in SMALL.names]
    assert all(s <= p.sigma_one_way for _, s in repeats)
    cost = sum(sens2 / (2 * s**2) for _, s in repeats)
    assert cost <= AIM_ONE_WAY_TOP_UP * p.rho * (1 + 1e-9)
    spent = len(SMALL.names) * sens2 / (2 * p.sigma_one_way**2)
    spent += sum(sens2 / (2 * s**2) + e**2 / 8 for _, s, e in model.rounds)
    assert spent <= p.rho
    assert spent == pytest.approx(p.rho, rel=1e-9)
    assert acct.spent.rho <= 0.002  # type: ignore[attr-defined]
    assert any(e > 0 for _, _, e in model.rounds)  # rounds follow the repeats
    # with σ₀ ≈ 3 every one-way cell is deep enough: nothing is measured again
    deep = Synthesizer(SMALL, rho=5.0, neighbouring=relation).fit(_small_data(), rng=3)
    assert all(e > 0 for _, _, e in deep.rounds)


def test_aim_keeps_the_model_within_its_size_cap() -> None:
    cap = 60
    syn = Synthesizer(SMALL, rho=1.0, max_model_cells=cap)
    model = syn.fit(_small_data(1), rng=4)
    names = list(SMALL.names)
    shape = SMALL.shape
    sets = [(c,) for c in range(len(names))]
    p = syn.plan
    used = len(names) / (2 * p.sigma_one_way**2)
    for r, s, e in model.rounds:
        used += 1 / (2 * s**2) + e**2 / 8
        cols = tuple(sorted(names.index(c) for c in r))
        # AIM's schedule: after a share f of ρ, a marginal that grows the junction tree keeps
        # it within f of the cap; one inside a measured set is free
        if not any(set(cols) <= set(o) for o in sets):
            assert model_cells(shape, [*sets, cols]) <= used / p.rho * cap * (1 + 1e-9)
        sets.append(cols)
    assert model_cells(shape, sets) <= cap
    assert any(len(r) > 1 for r, _, _ in model.rounds)  # the cap still allowed pairs


def test_mst_measures_one_ways_then_a_spanning_tree_of_pairs() -> None:
    syn = Synthesizer(SMALL, rho=0.5, method="mst")
    model = syn.fit(_small_data(2), rng=5)
    d = len(SMALL.names)
    assert model.measured[:d] == tuple((k,) for k in SMALL.names)
    pairs = model.measured[d:]
    assert len(pairs) == d - 1 and all(len(p) == 2 for p in pairs)
    comp = {k: k for k in SMALL.names}  # the pairs join every column without a cycle

    def root(a: str) -> str:
        while comp[a] != a:
            a = comp[a]
        return a

    for i, j in pairs:
        assert root(i) != root(j)
        comp[root(i)] = root(j)


FAIR = load_fair()
DOM = fair_domain()
CODES = DOM.encode(FAIR)


@functools.cache
def _fair(estimator: str, seed: int) -> tuple[float, float]:
    """(mean 3-way TVD of n synthetic rows, share of exact zeros in `affairs`) at ε = 1."""
    model = Synthesizer(DOM, epsilon=1.0, delta=1e-6, estimator=estimator).fit(FAIR, rng=seed)
    syn = model.sample(len(FAIR), rng=seed + 50, output="dict")
    codes = DOM.encode(syn)
    return mean_marginal_tvd(CODES, codes, DOM.shape, 3), float(np.mean(syn["affairs"] == 0))


def test_joint_fit_is_more_accurate_than_the_closed_form_on_fair() -> None:
    # Mean 3-way TVD over seeds 0–2 at ε = 1 (δ = 1e-6): the closed form measured 0.097, the
    # joint fit 0.090 (the reference AIM of private-pgm: 0.084). A reversal of the 3-seed
    # means would need the per-seed spread (~0.007) to line up against the joint fit.
    pgm = np.mean([_fair("pgm", s)[0] for s in range(3)])
    closed = np.mean([_fair("closed", s)[0] for s in range(3)])
    assert pgm < closed


def test_repeated_one_way_tables_help_aim_at_a_small_budget_on_fair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ε = 0.3 (δ = 1e-6), seeds 0–7: with the repeats AIM's mean 3-way TVD measured 0.128,
    # without them (ONE_WAY_SNR so small that no table is too shallow) 0.130; over 16 seeds
    # 0.1275 ± 0.0044 against 0.1305 ± 0.0059 (sd per seed). (Before the rounds' σ was capped,
    # _round_scale, the gap was larger: 0.134 against 0.141 over 16 seeds; seeds 0–2 alone now
    # differ by 0.0001, too little to test on.)
    def tvd3(seed: int) -> float:
        model = Synthesizer(DOM, epsilon=0.3, delta=1e-6).fit(FAIR, rng=seed)
        codes = DOM.encode(model.sample(len(FAIR), rng=seed + 1000, output="dict"))
        return mean_marginal_tvd(CODES, codes, DOM.shape, 3)

    with_repeats = np.mean([tvd3(s) for s in range(8)])
    monkeypatch.setattr(_synth_aim, "ONE_WAY_SNR", 1e-9)
    without = np.mean([tvd3(s) for s in range(8)])
    assert with_repeats < without


def test_round_scale_starts_the_rounds_finer_only_where_pairs_are_shallow() -> None:
    shape = (5, 8, 8, 6)  # pairs' cells 30, 40, 40, 48, 48, 64: the median (upper) is 48
    snr = _synth_aim.ROUND_SNR
    eps0 = math.sqrt(8 * 0.1 / 0.9 / (2 * 200.0**2))  # AIM's α = 0.9 split at σ₀ = 200
    sigma, eps = _synth_aim._round_scale(shape, 100.0 * snr * 48, 200.0, eps0, 1.0, 1.0)
    assert 100.0 <= sigma < 100.0 * (1 + 1e-6)  # n̂/(ROUND_SNR·48), rounded up to a sampled σ
    assert eps * sigma == pytest.approx(eps0 * 200.0)  # each round keeps AIM's α split
    # little left: a round takes at most a quarter of it, however shallow the pairs
    left = 1e-4
    sigma, eps = _synth_aim._round_scale(shape, 10.0, 200.0, eps0, 1.0, left)
    assert sigma < 200.0
    assert 1 / (2 * sigma**2) + eps**2 / 8 <= left / 4 * (1 + 1e-12)
    # deep pairs, nothing left, or no pairs at all: AIM's own σ₀ and ε₀
    for args in [(shape, 1e9, 1.0), (shape, 10.0, 0.0), ((5,), 10.0, 1.0)]:
        dims, n_hat, rest = args
        assert _synth_aim._round_scale(dims, n_hat, 200.0, eps0, 1.0, rest) == (200.0, eps0)


def test_finer_rounds_help_aim_at_a_small_budget_on_fair(monkeypatch: pytest.MonkeyPatch) -> None:
    # ε = 0.3 (δ = 1e-6), seeds 0–2: 0.126 with the rounds' σ capped by ROUND_SNR, 0.132 at
    # AIM's σ₀; the paired difference was negative on every one of seeds 0–7 (−0.001 to
    # −0.014), and over 48 seeds the means were 0.128 and 0.133 (sd per seed 0.003–0.005)
    def tvd3(seed: int) -> float:
        model = Synthesizer(DOM, epsilon=0.3, delta=1e-6).fit(FAIR, rng=seed)
        return mean_marginal_tvd(
            CODES, model.sample_codes(len(FAIR), rng=seed + 1000), DOM.shape, 3
        )

    finer = np.mean([tvd3(s) for s in range(3)])
    monkeypatch.setattr(_synth_aim, "ROUND_SNR", 1e-9)  # a cap no σ₀ reaches: AIM's own start
    assert finer < np.mean([tvd3(s) for s in range(3)])


def test_the_atom_at_zero_survives_the_joint_fit() -> None:
    real = float(np.mean(FAIR["affairs"] == 0))  # 0.678
    for s in range(3):  # sd of the share over seeds about 0.015; 0.08 is five of those
        assert abs(_fair("pgm", s)[1] - real) < 0.08


@pytest.mark.parametrize(
    "kwargs",
    [
        {"estimator": "exact"},
        {"estimator": None},
        {"max_model_cells": 0},
        {"max_model_cells": True},
        {"max_model_cells": 2.5},
        {"workload": []},
        {"workload": "ab"},
        {"workload": [("a", "zz")]},
        {"workload": [("a", "a")]},
        {"workload": [()]},
    ],
)
def test_bad_estimator_parameters_are_refused_at_construction(kwargs: dict[str, object]) -> None:
    with pytest.raises((PrivacyParameterError, DataError)) as err:
        Synthesizer(SMALL, rho=1.0, **kwargs)  # type: ignore[arg-type]
    assert "zz" not in str(err.value)  # no user-supplied value is echoed


def test_workload_steers_the_candidates() -> None:
    syn = Synthesizer(SMALL, rho=1.0, workload=[("a", "b")])
    model = syn.fit(_small_data(3), rng=6)
    assert all(set(r) <= {"a", "b"} for r, _, _ in model.rounds)
