"""The planner: the planned budget meets the target, and 0.1% less does not (round trips)."""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.frame as dpf
import dpkit.stats as st
from dpkit import plan
from dpkit.accounting import Neighbouring
from dpkit.cli import main
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace

BELOW = 1 - 1e-3


@pytest.mark.parametrize(
    ("statistic", "kw", "target"),
    [
        ("count", {}, 10.0),
        ("count", {"delta": 1e-7}, 25.0),
        ("sum", {"bounds": (-5.0, 20.0)}, 100.0),
        ("mean", {"bounds": (0.0, 100.0), "n": 500}, 1.0),
        ("mean", {"bounds": (0.0, 100.0), "expected_n": 2000}, 0.5),
        ("mean", {"bounds": (0.0, 1.0), "n": 50, "neighbouring": Neighbouring.REPLACE}, 0.05),
        ("histogram", {}, 7.0),  # (Gaussian histograms calibrate for ~1 s per step)
    ],
)
def test_statistic_round_trip(statistic, kw, target):
    eps = plan.epsilon_for(statistic, half_width=target, alpha=0.1, **kw)
    assert st.accuracy(statistic, epsilon=eps, alpha=0.1, **kw) <= target
    assert st.accuracy(statistic, epsilon=eps * BELOW, alpha=0.1, **kw) > target


def test_relative_target_at_a_public_scale():
    eps = plan.epsilon_for("count", relative=0.02, scale=1000.0)
    assert st.accuracy("count", epsilon=eps) <= 20.0 < st.accuracy("count", epsilon=eps * BELOW)


@pytest.mark.parametrize(
    ("name", "cls", "kw"),
    [
        ("laplace", Laplace, {}),
        ("geometric", Geometric, {}),
        ("gaussian", Gaussian, {"delta": 1e-6}),
        # (DiscreteGaussian at (ε, δ) bisects its own σ at each step: ~8 s; its ρ form below)
    ],
)
def test_mechanism_round_trip(name, cls, kw):
    eps = plan.epsilon_for_mechanism(name, sensitivity=2.0, half_width=12.0, **kw)
    assert cls(epsilon=eps, sensitivity=2.0, **kw).accuracy() <= 12.0
    assert cls(epsilon=eps * BELOW, sensitivity=2.0, **kw).accuracy() > 12.0


@pytest.mark.parametrize(
    ("name", "cls"), [("gaussian", Gaussian), ("discrete_gaussian", DiscreteGaussian)]
)
def test_rho_round_trip(name, cls):
    rho = plan.rho_for(name, sensitivity=1.0, half_width=5.0, alpha=0.01)
    assert cls(rho=rho).accuracy(0.01) <= 5.0 < cls(rho=rho * BELOW).accuracy(0.01)


def test_frame_query_round_trip_with_the_budget_split():
    df = pl.DataFrame({"user": [1, 2, 3], "key": ["a", "b", "a"], "x": [1.0, 2.0, 3.0]})
    g = (
        dpf.Query(df, privacy_unit="user")
        .group_by("key", public_keys=["a", "b"], max_groups=1, max_rows=2)
        .agg(dpf.count(alias="n"), dpf.sum("x", bounds=(0, 10), alias="s"))
    )
    targets = {"n": 20.0, "s": 150.0}
    eps = plan.epsilon_for_query(g, half_width=targets)
    ok = g.explain(epsilon=eps).accuracy()
    short = g.explain(epsilon=eps * BELOW).accuracy()
    assert all(ok[k] <= t for k, t in targets.items())
    assert any(short[k] > t for k, t in targets.items())
    one = plan.epsilon_for_query(g, half_width=20.0, delta=1e-6)
    assert max(g.explain(epsilon=one, delta=1e-6).accuracy().values()) <= 20.0
    with pytest.raises(Exception, match="no accuracy before release"):
        plan.epsilon_for_query(g, half_width={"nope": 1.0})


def test_bad_targets_are_refused():
    with pytest.raises(PrivacyParameterError):
        plan.epsilon_for("count", half_width=-1.0)
    with pytest.raises(PrivacyParameterError):
        plan.epsilon_for("count", relative=0.1)
    with pytest.raises(PrivacyParameterError):
        plan.epsilon_for("count", half_width=1.0, relative=0.1, scale=10)
    with pytest.raises(PrivacyParameterError, match="expected_n"):
        plan.epsilon_for("mean", bounds=(0, 1), half_width=0.1)
    with pytest.raises(PrivacyParameterError, match="reaches"):
        plan.epsilon_for("sum", bounds=(0, 1), half_width=1e-300)
    with pytest.raises(PrivacyParameterError):
        plan.epsilon_for_mechanism("gaussian", half_width=1.0)


def test_cli_plan(capsys):
    assert main(["plan", "count", "--half-width", "30"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("count: epsilon=") and "95% noise interval of +/- 30" in out
    assert main(["plan", "gaussian", "--rho", "--half-width", "4"]) == 0
    assert "rho=0.1201" in capsys.readouterr().out
    assert main(["plan", "mean", "--bounds", "0", "1", "--half-width", "0.1"]) == 2
    assert "expected_n" in capsys.readouterr().err


def test_frame_query_plan_can_ask_for_keys_to_be_kept():
    df = pl.DataFrame({"user": [1, 2, 3], "key": ["a", "b", "a"]})
    q = dpf.Query(df, privacy_unit="user")
    g = q.group_by("key", max_groups=1, max_rows=1).agg(dpf.count(alias="n"))
    loose = plan.epsilon_for_query(g, half_width=100.0, delta=1e-6)
    eps = plan.epsilon_for_query(g, half_width=100.0, delta=1e-6, keep=(20, 0.9))
    assert eps > loose  # keeping a 20-unit key 90% of the time costs more than the count alone
    assert g.explain(epsilon=eps, delta=1e-6).keep_probability(20) >= 0.9
    assert g.explain(epsilon=eps * BELOW, delta=1e-6).keep_probability(20) < 0.9
    with pytest.raises(PrivacyParameterError):
        plan.epsilon_for_query(g, half_width=100.0, delta=1e-6, keep=(20, 1.5))
