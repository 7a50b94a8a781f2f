"""Client randomizers map a value outside their declared domain into it, never refuse it.

A frequency oracle's domain is the codes ``0..k−1``; a value that is not one (k, −1, 10^9, a
fraction, ±inf) is reported as the last code, ``k − 1``: with the same seed its report is
exactly the report of ``k − 1``, so the ε-LDP bound over every pair of inputs holds. A numeric
randomizer's domain is ``[−1, 1]``: a value beyond it (±inf included) is clamped. Only a missing
value (NaN, None) follows ``missing=``: refused before any charge by default, or left out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpkit.accounting import Accountant, PureDP
from dpkit.errors import DataError
from dpkit.local import (
    GRR,
    OLH,
    OUE,
    SUE,
    DuchiMean,
    HadamardResponse,
    HybridMean,
    PiecewiseMean,
    SubsetSelection,
    VectorMean,
)
from dpkit.mechanisms import RandomizedResponse
from dpkit.random import seeded

K = 5
CATS = [i % K for i in range(30)]
UNIT = [((i % 9) - 4) / 4 for i in range(30)]
ORACLES = [GRR, OLH, OUE, SUE, HadamardResponse, SubsetSelection]
NUMERIC = [DuchiMean, HybridMean, PiecewiseMean]


def _acct() -> Accountant:
    return Accountant(PureDP(epsilon=100.0))


def _refuses_drop(call: Any) -> None:
    """``missing="drop"`` is refused before anything is charged: one report per user holds
    under replacement of a value, and a user dropped for a missing value would be told apart."""
    acct = _acct()
    with pytest.raises(DataError, match="without a report"):
        call(missing="drop", accountant=acct)
    assert not acct.ledger


def _values(r: Any) -> np.ndarray:
    return np.asarray(getattr(r, "values", r))


@pytest.mark.parametrize("cls", ORACLES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("outside", [K, -1, 10**9, 10**30, 2.5, np.inf, -np.inf])
def test_an_oracle_reports_a_value_outside_the_domain_as_the_last_code(
    cls: type, outside: Any
) -> None:
    m = cls(epsilon=1.0, k=K)
    acct = _acct()
    got = m.randomize([*CATS, outside], rng=seeded(4), accountant=acct)
    want = m.randomize([*CATS, K - 1], rng=seeded(4))
    np.testing.assert_array_equal(_values(got), _values(want))
    assert len(acct.ledger) == 1
    one = m.randomize_one(outside if not isinstance(outside, float) else K + 3, rng=seeded(2))
    assert one == m.randomize_one(K - 1, rng=seeded(2))


@pytest.mark.parametrize("cls", ORACLES, ids=lambda c: c.__name__)
def test_an_oracle_applies_the_missing_policy(cls: type) -> None:
    m = cls(epsilon=1.0, k=K)
    for bad in ([*CATS, np.nan], [*CATS, None]):
        acct = _acct()
        with pytest.raises(DataError, match="missing value"):
            m.randomize(bad, rng=seeded(4), accountant=acct)
        assert not acct.ledger
        _refuses_drop(lambda bad=bad, **kw: m.randomize(bad, rng=seeded(4), **kw))
    with pytest.raises(DataError, match="missing must be"):
        m.randomize(CATS, missing="fill")


@pytest.mark.parametrize("cls", NUMERIC, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("far", "bound"), [(5.0, 1.0), (1e308, 1.0), (-np.inf, -1.0),
                                            (np.inf, 1.0), (-3.0, -1.0)])  # fmt: skip
def test_a_numeric_randomizer_clamps_to_its_interval(cls: type, far: float, bound: float) -> None:
    m = cls(epsilon=1.0)
    acct = _acct()
    got = m.randomize([*UNIT, far], rng=seeded(4), accountant=acct)
    np.testing.assert_array_equal(got, m.randomize([*UNIT, bound], rng=seeded(4)))
    assert len(acct.ledger) == 1


@pytest.mark.parametrize("cls", NUMERIC, ids=lambda c: c.__name__)
def test_a_numeric_randomizer_applies_the_missing_policy(cls: type) -> None:
    m = cls(epsilon=1.0)
    for bad in ([*UNIT, np.nan], [*UNIT, None], [*UNIT, "n/a"]):
        acct = _acct()
        with pytest.raises(DataError, match="missing value") as info:
            m.randomize(bad, rng=seeded(4), accountant=acct)
        assert "n/a" not in str(info.value)
        assert not acct.ledger
        _refuses_drop(lambda bad=bad, **kw: m.randomize(bad, rng=seeded(4), **kw))


def test_vector_mean_clamps_each_coordinate_and_applies_the_policy() -> None:
    m = VectorMean(epsilon=1.0, d=2)
    rows = [[u, -u] for u in UNIT]
    got = m.randomize([*rows, [np.inf, -7.0]], rng=seeded(4))
    want = m.randomize([*rows, [1.0, -1.0]], rng=seeded(4))
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(got.indices, want.indices)
    acct = _acct()
    with pytest.raises(DataError, match="missing value"):
        m.randomize([*rows, [np.nan, 0.0]], rng=seeded(4), accountant=acct)
    assert not acct.ledger
    _refuses_drop(lambda **kw: m.randomize([*rows, [np.nan, 0.0]], rng=seeded(4), **kw))


@pytest.mark.parametrize("outside", [2, -1, 10**9, 0.5, np.inf])
def test_randomized_response_reports_an_answer_outside_as_the_last_category(outside: Any) -> None:
    rr = RandomizedResponse(epsilon=1.0, categories=3)
    base = [0, 1, 2, 0, 1] if outside != 2 else [0, 1, 0, 1]
    acct = _acct()
    got = rr.randomize([*base, 3 if outside == 2 else outside], rng=seeded(4), accountant=acct)
    np.testing.assert_array_equal(got, rr.randomize([*base, 2], rng=seeded(4)))
    assert len(acct.ledger) == 1
    with pytest.raises(DataError, match="missing value"):
        rr.randomize([*base, np.nan], rng=seeded(4))
    _refuses_drop(lambda **kw: rr.randomize([*base, np.nan], rng=seeded(4), **kw))


def test_prefix_extension_cuts_a_long_string_to_its_declared_length() -> None:
    # PEM's domain is strings of at most `length` bytes: a longer one is cut to that length,
    # so a batch holding it is answered, and exactly as if the user had sent the cut string
    from dpkit.local import PrefixExtension

    pem = PrefixExtension(epsilon=2.0, length=3, top=2, step=4)
    words = ["cat", "dog", "emu"] * 20
    long = pem.randomize([*words, "elephant"], rng=7)
    cut = pem.randomize([*words, "ele"], rng=7)
    assert pem.encode("elephant") == pem.encode("ele")
    assert np.array_equal(np.asarray(long.values), np.asarray(cut.values))
    assert "€" not in pem.decode(pem.encode("ab€"))  # a character cut in two is not invented


@pytest.mark.parametrize("cls", [*ORACLES, *NUMERIC, RandomizedResponse], ids=lambda c: c.__name__)
def test_drop_is_refused_as_a_parameter_whatever_the_values(cls: type) -> None:
    # Neighbours under replacement: one user's value 0 replaced by a missing one. Under "drop"
    # the second batch had one report fewer, which told the two apart with certainty (ε = ∞).
    # The refusal is a parameter check: it happens on the clean batch too, so whether the call
    # succeeds depends on no value.
    if cls is RandomizedResponse:
        m: Any = RandomizedResponse(epsilon=1.0, categories=K)
    elif cls in NUMERIC:
        m = cls(epsilon=1.0)
    else:
        m = cls(epsilon=1.0, k=K)
    clean = [0, 1, 0, 1]
    for batch in (clean, [np.nan, 1, 0, 1]):
        _refuses_drop(lambda batch=batch, **kw: m.randomize(batch, rng=seeded(4), **kw))
