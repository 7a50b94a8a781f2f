"""Synthetic tables on real data (Fair's affairs data, bundled with statsmodels): accuracy,
the atom at 0, never worse than independent marginals; outputs and the utility report."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpkit.release import (
    Categorical,
    Domain,
    Numeric,
    Synthesizer,
    utility_report,
)
from dpkit.release._examples import fair_domain, load_fair
from dpkit.release._graphical import BayesNet, Family, project_simplex
from dpkit.release._marginals import marginal, tvd
from dpkit.release._report import mean_marginal_tvd

FAIR = load_fair()
DOM = fair_domain()
CODES = DOM.encode(FAIR)
SEEDS = (0, 1, 2)


def _tvd3(method: str, eps: float, seed: int) -> float:
    # The closed-form estimator, the fast option; the joint fit (the default) is tested in
    # test_release_synth_pgm.py.
    model = Synthesizer(DOM, epsilon=eps, delta=1e-6, method=method, estimator="closed").fit(
        FAIR, rng=seed
    )
    return mean_marginal_tvd(CODES, model.sample_codes(len(FAIR), rng=seed + 50), DOM.shape, 3)


@pytest.mark.parametrize("eps", [1.0, 0.3])
@pytest.mark.parametrize("method", ["aim", "mst"])
def test_never_worse_than_independent_marginals(method: str, eps: float) -> None:
    # Seed by seed, the graphical model beats releasing one-way marginals at the same ε on
    # the workload of all 3-way marginals. Measured gaps (mean 3-way TVD, 3 seeds): ε = 1,
    # AIM 0.099 / MST 0.107 against 0.203; ε = 0.3, AIM 0.145 / MST 0.155 against 0.208 — the
    # seed-to-seed spread is about 0.01, so a reversal would be a real regression.
    for seed in SEEDS:
        assert _tvd3(method, eps, seed) < _tvd3("independent", eps, seed) - 0.02


def test_aim_at_epsilon_one_is_close_to_the_data() -> None:
    # Sampling alone (n rows from the true joint) gives about 0.07 on this workload; AIM at
    # ε = 1 measured 0.099 ± 0.01 over seeds; 0.13 leaves 3 spreads of room.
    assert np.mean([_tvd3("aim", 1.0, s) for s in SEEDS]) < 0.13


@pytest.mark.parametrize("eps", [1.0, 0.3])
def test_the_atom_at_zero_survives(eps: float) -> None:
    real = float(np.mean(FAIR["affairs"] == 0))  # 0.678
    assert real > 0.2
    for seed in SEEDS:
        model = Synthesizer(DOM, epsilon=eps, delta=1e-6, estimator="closed").fit(FAIR, rng=seed)
        syn = model.sample(len(FAIR), rng=seed, output="dict")
        # Over 6 seeds the share of exact zeros was 0.655–0.694 at ε = 0.3 (sd 0.015); 0.08
        # is five of those. Without the atom the share would be 0 (see the next test).
        assert abs(float(np.mean(syn["affairs"] == 0)) - real) < 0.08


def test_without_the_atom_the_zeros_are_smeared() -> None:
    cols = dict(DOM.columns)
    cols["affairs"] = Numeric(0.0, 60.0, bins=8)
    model = Synthesizer(Domain(cols), epsilon=1.0, delta=1e-6, estimator="closed").fit(FAIR, rng=0)
    syn = model.sample(2000, rng=0, output="dict")
    assert float(np.mean(syn["affairs"] == 0)) < 0.01


def test_train_on_synthetic_beats_the_majority_class() -> None:
    # Predicting occupation from the other columns: logistic regression on real records scored
    # 0.575 on held-out real records, the majority class 0.428; trained on AIM's synthetic table
    # at ε = 1 it scored 0.572–0.577, on the independent baseline's 0.423 (no signal).
    model = Synthesizer(DOM, epsilon=1.0, delta=1e-6, estimator="closed").fit(FAIR, rng=0)
    syn = model.sample(len(FAIR), rng=1, output="pandas")
    rep = utility_report(FAIR, syn, DOM, target="occupation", plots=False)
    tt = rep.train_test
    assert tt is not None
    assert tt.synthetic > tt.majority + 0.08
    assert tt.real > tt.majority + 0.08


def test_report_numbers_match_direct_computations(tmp_path: Path) -> None:
    model = Synthesizer(DOM, epsilon=3.0, delta=1e-6, method="mst", estimator="closed").fit(
        FAIR, rng=4
    )
    syn = model.sample(3000, rng=5, output="pandas")
    rep = utility_report(FAIR, syn, DOM)
    s_codes = DOM.encode(syn)
    for i, col in enumerate(rep.columns):
        assert col.name == DOM.names[i]
        want = tvd(marginal(CODES, DOM.shape, (i,)), marginal(s_codes, DOM.shape, (i,)))
        assert col.tvd == pytest.approx(want)
        if isinstance(DOM.columns[col.name], Numeric):
            ks = stats.ks_2samp(FAIR[col.name], syn[col.name]).statistic
            assert col.ks == pytest.approx(ks)
        else:
            assert col.ks is None
    pairs = list(itertools.combinations(range(9), 2))
    want2 = np.mean(
        [tvd(marginal(CODES, DOM.shape, c), marginal(s_codes, DOM.shape, c)) for c in pairs]
    )
    assert rep.tvd_2way == pytest.approx(want2)
    assert rep.kmarginal_score == pytest.approx(1000 * (1 - rep.tvd_3way))
    page = rep.to_html(tmp_path / "r.html").read_text()
    assert page.count("data:image/png;base64,") == 1
    assert "affairs" in page and "not itself private" in page
    assert "mean 3-way TVD" in rep.summary()


def test_any_number_of_rows_and_every_output_format() -> None:
    model = Synthesizer(DOM, epsilon=1.0, delta=1e-6, estimator="closed").fit(FAIR, rng=0)
    assert abs(len(model.sample(rng=0)) - len(FAIR)) < 200  # n̂: noisy n, σ_n ≈ 12
    assert type(model.sample(5, rng=1)).__name__ == "DataFrame"  # pandas in, pandas out
    big = model.sample(50_000, rng=1, output="numpy")
    assert big.shape == (50_000,) and big.dtype.names == DOM.names
    assert model.sample(0, rng=1, output="numpy").shape == (0,)
    df = model.sample(10, rng=2, output="pandas")
    assert list(df.columns) == list(DOM.names)
    assert set(df["rate_marriage"]) <= {1, 2, 3, 4, 5}
    d = model.sample(10, rng=2, output="dict")
    assert np.all((d["age"] >= 17.5) & (d["age"] <= 42))


def test_polars_output() -> None:
    pl = pytest.importorskip("polars")  # polars comes with the frame extra
    model = Synthesizer(DOM, epsilon=1.0, delta=1e-6, method="independent").fit(FAIR, rng=0)
    frame = model.sample(10, rng=2, output="polars")
    # A Polars table is read as well as a pandas one: same cells, same fit.
    pl_fair = pl.DataFrame({k: FAIR[k].to_numpy() for k in FAIR.columns})
    assert np.array_equal(DOM.encode(pl_fair), CODES)
    again = Synthesizer(DOM, epsilon=1.0, delta=1e-6, method="independent").fit(pl_fair, rng=0)
    assert again.n_estimate == model.n_estimate
    assert isinstance(frame, pl.DataFrame) and frame.columns == list(DOM.names)


def test_sampling_is_reproducible_and_integer_columns_stay_integer() -> None:
    dom = Domain({"k": Numeric(0, 100, bins=7, integer=True), "c": Categorical(["a", "b"])})
    gen = np.random.default_rng(0)
    data = {"k": gen.integers(0, 101, 800), "c": gen.choice(["a", "b"], 800)}
    model = Synthesizer(dom, rho=1.0, method="mst").fit(data, rng=0)
    a = model.sample(500, rng=3, output="dict")
    b = model.sample(500, rng=3, output="dict")
    assert np.array_equal(a["k"], b["k"]) and np.array_equal(a["c"], b["c"])
    assert np.all(a["k"] == np.round(a["k"])) and a["k"].min() >= 0 and a["k"].max() <= 100
    with pytest.raises(ValueError):
        model.sample(-1)
    with pytest.raises(ValueError):
        model.sample(5, output="excel")


def test_bayes_net_sampling_matches_its_conditionals() -> None:
    # Ancestral sampling draws from P(a) P(b | a): chi-square on 200,000 draws, p > 1e-4.
    pa = np.array([0.2, 0.8])
    pb = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    net = BayesNet((2, 3), (Family(0, (), pa), Family(1, (0,), pb)))
    codes = net.sample(200_000, np.random.default_rng(0))
    obs = marginal(codes, (2, 3), (0, 1)).ravel()
    exp = (pa[:, None] * pb).ravel() * 200_000
    assert stats.chisquare(obs, exp).pvalue > 1e-4


def test_simplex_projection_is_the_least_squares_point() -> None:
    gen = np.random.default_rng(0)
    for _ in range(20):
        y = gen.normal(0, 5, 12)
        p = project_simplex(y, 10.0)
        assert p.min() >= 0 and p.sum() == pytest.approx(10.0)
        # Any other point of the simplex is no closer to y.
        for _ in range(20):
            q = gen.dirichlet(np.ones(12)) * 10
            assert np.sum((y - p) ** 2) <= np.sum((y - q) ** 2) + 1e-9


def test_aim_models_every_column_when_a_round_picks_a_bare_one_way_marginal() -> None:
    # Regression: with max_cells forbidding pairs, AIM's d − 1 rounds each chose a one-way
    # marginal and placed only d − 1 columns; the last was sampled as its first cell always.
    gen = np.random.default_rng(0)
    n = 5000
    data = {"a": gen.integers(0, 4, n), "b": gen.integers(0, 4, n), "c": np.full(n, 3)}
    dom = Domain({k: Categorical([0, 1, 2, 3]) for k in "abc"})
    model = Synthesizer(dom, rho=1.0, max_cells=4, estimator="closed").fit(data, rng=0)
    assert sorted(f.child for f in model.network.families) == [0, 1, 2]
    syn = model.sample(2000, rng=1, output="dict")
    # The noisy one-way of "c" (σ ≈ 3.2 on 5,000 records) puts nearly all mass on 3; a
    # constant first cell would give 0.
    assert np.mean(syn["c"] == 3) > 0.9
