"""Automatic protocol choice on a grid of (ε, k), and bad input refused with clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.errors import DataError, PrivacyParameterError
from dpkit.local import (
    GRR,
    OLH,
    OUE,
    PROTOCOLS,
    SUE,
    HadamardResponse,
    Reports,
    SubsetSelection,
    candidates,
    choose_protocol,
)

GRID = [(eps, k) for eps in (0.25, 0.5, 1.0, 2.0, 3.0, 5.0) for k in (2, 3, 8, 20, 64, 300, 2000)]


@pytest.mark.parametrize(("eps", "k"), GRID)
def test_choice_has_lowest_variance(eps, k):
    chosen = choose_protocol(epsilon=eps, k=k)
    variances = [float(o.variance(1)) for o in candidates(epsilon=eps, k=k)]
    assert float(chosen.variance(1)) <= min(variances) * (1 + 1e-6)


@pytest.mark.parametrize(("eps", "k"), GRID)
def test_choice_follows_wang_rule_among_grr_oue_olh(eps, k):
    # Wang et al. 2017 §5: GRR iff k < 3e^ε + 2; otherwise OUE or OLH (equal variance up to
    # OLH's integer g); grid points within 2% of the boundary are skipped as ties
    boundary = 3 * math.exp(eps) + 2
    if abs(k - boundary) < 0.02 * boundary:
        pytest.skip("on the boundary")
    chosen = choose_protocol(epsilon=eps, k=k, protocols=(GRR, OUE, OLH))
    if k < boundary:
        assert chosen.name == "GRR"
    else:
        assert chosen.name in ("OUE", "OLH")


def test_choice_respects_message_budget():
    assert choose_protocol(epsilon=1.0, k=1024, max_bits=100).name == "OLH"
    assert choose_protocol(epsilon=1.0, k=1024, max_bits=16).name == "HR"
    assert choose_protocol(epsilon=1.0, k=1024, tolerance=0.3).name == "HR"
    with pytest.raises(PrivacyParameterError, match="max_bits"):
        choose_protocol(epsilon=1.0, k=1024, max_bits=2)
    with pytest.raises(PrivacyParameterError):
        choose_protocol(epsilon=1.0, k=10, tolerance=-1)
    with pytest.raises(PrivacyParameterError):
        choose_protocol(epsilon=1.0, k=10, protocols=())


@pytest.mark.parametrize("cls", PROTOCOLS)
@pytest.mark.parametrize("eps", [0.0, -1.0, math.inf, math.nan, None, "1"])
def test_bad_epsilon(cls, eps):
    with pytest.raises(PrivacyParameterError):
        cls(epsilon=eps, k=10)


@pytest.mark.parametrize("cls", PROTOCOLS)
@pytest.mark.parametrize("k", [1, 0, 2.5, True, None, 2**31])
def test_bad_domain_size(cls, k):
    with pytest.raises(PrivacyParameterError):
        cls(epsilon=1.0, k=k)


@pytest.mark.parametrize("cls", PROTOCOLS)
@pytest.mark.parametrize("values", [[np.nan], None, ["a"], [[0, 1]], [True, False]])
def test_values_with_no_place_in_the_domain(cls, values):
    # missing values (NaN, a non-number) under missing="raise", and wrong shapes or types
    with pytest.raises(DataError):
        cls(epsilon=1.0, k=10).randomize(values, rng=0)


@pytest.mark.parametrize("cls", PROTOCOLS)
@pytest.mark.parametrize("values", [[0, 10], [-1], [1.5]])
def test_values_outside_domain_are_reported_as_the_last_code(cls, values):
    # never refused (a refusal would reveal the value): reported as the declared code k - 1
    o = cls(epsilon=1.0, k=10)
    got = o.randomize(values, rng=0)
    want = o.randomize([9 if not (0 <= v < 10 and v == int(v)) else v for v in values], rng=0)
    np.testing.assert_array_equal(got.values, want.values)


@pytest.mark.parametrize("cls", PROTOCOLS)
def test_reports_from_another_protocol_or_parameter_set(cls):
    o = cls(epsilon=1.0, k=10)
    r = o.randomize([1, 2, 3], rng=0)
    for other in (cls(epsilon=2.0, k=10), cls(epsilon=1.0, k=11)):
        with pytest.raises(DataError, match="aggregate each protocol"):
            other.estimate(r)
    for other_cls in PROTOCOLS:
        if other_cls is not cls:
            with pytest.raises(DataError):
                other_cls(epsilon=1.0, k=10).estimate(r)


@pytest.mark.parametrize("cls", PROTOCOLS)
def test_empty_report_set(cls):
    o = cls(epsilon=1.0, k=10)
    empty = o.randomize(np.zeros(0, dtype=int), rng=0)
    assert len(empty) == 0
    with pytest.raises(DataError, match="no reports"):
        o.estimate(empty)
    with pytest.raises(DataError, match="no reports"):
        o.aggregator().estimate()


BAD_REPORTS = {
    GRR: [[[0, 1]], [10], [-1]],
    OUE: [[[0, 1]], [[256, 0]], [[0, 0, 0]], [[0, 1]] * 2],
    SUE: [[[0, 1, 2]], [[0, 0x7F]]],
    OLH: [[[1, 2]], [[0, 1, 0]], [[1, 2, 99]], [[2**31 - 1, 0, 0]]],
    HadamardResponse: [[16], [[1, 2]], [-3]],
    SubsetSelection: [],  # built from d in the test
}


@pytest.mark.parametrize("cls", PROTOCOLS)
def test_malformed_reports(cls):
    o = cls(epsilon=1.0, k=10)
    bads = BAD_REPORTS[cls]
    if cls is SubsetSelection:
        d = o.d
        ok = list(range(d))
        bads = [[[*ok, 9]], [[*ok[:-1], ok[0]]], [ok[::-1]], [[*ok[:-1], 10]], [ok[:-1]]]
        assert d >= 2
    for bad in bads:
        with pytest.raises(DataError):
            o.estimate(bad)
    with pytest.raises(DataError):
        o.estimate(None)
    with pytest.raises(DataError):
        o.estimate(np.array([0.5, 1.5]))
    with pytest.raises(DataError):
        o.estimate(Reports("something else", np.zeros(3, dtype=np.int64)))


def test_reports_serialise():
    hr = HadamardResponse(epsilon=1.0, k=10)
    r = hr.randomize([1, 2, 3, 4], rng=0)
    back = Reports.from_dict(r.to_dict())
    assert hr.estimate(back).n == 4
    for bad in (
        {"protocol": 3, "values": []},
        {"values": []},
        [1, 2],
        {"protocol": "x", "values": [[1], [1, 2]]},
    ):
        with pytest.raises(DataError):
            Reports.from_dict(bad)  # type: ignore[arg-type]


def test_failed_batch_changes_nothing():
    sue = SUE(epsilon=1.0, k=5)
    agg = sue.aggregator()
    agg.add(sue.randomize([0, 1], rng=0))
    with pytest.raises(DataError):
        agg.add(OUE(epsilon=1.0, k=5).randomize([0], rng=0))
    assert agg.n == 2


def test_accountant_charged_before_release_and_not_on_bad_input():
    from dpkit.accounting import Accountant, PureDP
    from dpkit.errors import BudgetExceededError

    acct = Accountant(PureDP(epsilon=1.5))
    oue = OUE(epsilon=1.0, k=4)
    oue.randomize([0, 1], rng=0, accountant=acct)
    with pytest.raises(DataError):
        oue.randomize([np.nan], rng=0, accountant=acct)
    with pytest.raises(BudgetExceededError):
        oue.randomize([0], rng=0, accountant=acct)
    assert float(acct.spent.epsilon) == pytest.approx(1.0)
