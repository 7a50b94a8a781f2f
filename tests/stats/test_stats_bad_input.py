"""Bad input: a clear dpkit error, nothing released, nothing charged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dpkit.stats as st
from dpkit.accounting import Neighbouring
from dpkit.errors import DataError, DPKitError, PrivacyParameterError

REPLACE = Neighbouring.REPLACE

GOOD = np.linspace(0.0, 1.0, 50)
B = (0.0, 1.0)

CALLS: dict[str, Callable[..., Any]] = {
    "sum": lambda x, **k: st.sum(x, bounds=k.pop("bounds", B), **k),
    "mean": lambda x, **k: st.mean(x, bounds=k.pop("bounds", B), **k),
    "var": lambda x, **k: st.var(x, bounds=k.pop("bounds", B), **k),
    "std": lambda x, **k: st.std(x, bounds=k.pop("bounds", B), **k),
    "median": lambda x, **k: st.median(x, bounds=k.pop("bounds", B), **k),
    "quantile": lambda x, **k: st.quantile(x, [0.2, 0.8], bounds=k.pop("bounds", B), **k),
    "corr": lambda x, **k: st.corr(x, x, bounds=(k.pop("bounds", B), B), **k),
    "cov": lambda x, **k: st.cov(x, x, bounds=(k.pop("bounds", B), B), **k),
}

BAD_DATA = {
    "nan": np.array([0.1, np.nan, 0.3]),
    # ±inf is not here: it is a value beyond a bound, clamped (test_stats_hardening2_missing)
    "none": [0.1, None, 0.3],
    "2d": np.ones((3, 2)),
    "strings": ["a", "b"],
    "missing": None,
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("bad", sorted(BAD_DATA))
def test_bad_data(name: str, bad: str, recorder: Any) -> None:
    with pytest.raises(DataError):
        CALLS[name](BAD_DATA[bad], epsilon=1.0, accountant=recorder, rng=0)
    assert recorder.ledger == []


@pytest.mark.parametrize("name", sorted(set(CALLS) - {"sum"}))  # a sum of nothing is 0
def test_empty_data_is_refused_only_when_n_is_public(name: str, recorder: Any) -> None:
    # Under add/remove an empty dataset is a valid input (answered with noise, see
    # test_stats_hardening.py); under replace-one the size is public and these statistics are
    # undefined on no records, so the refusal reveals nothing.
    with pytest.raises(DataError, match="empty"):
        CALLS[name](np.array([]), epsilon=1.0, accountant=recorder, rng=0, neighbouring=REPLACE)
    assert recorder.ledger == []


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("bounds", [None, (1.0, 0.0), (0.0, 0.0), (0.0, np.inf), (np.nan, 1.0), 3])
def test_bad_bounds(name: str, bounds: object, recorder: Any) -> None:
    with pytest.raises(DataError, match="bounds"):
        CALLS[name](GOOD, bounds=bounds, epsilon=1.0, accountant=recorder, rng=0)
    assert recorder.ledger == []


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("eps", [0.0, -1.0, float("inf"), float("nan"), None])
def test_bad_epsilon(name: str, eps: object, recorder: Any) -> None:
    with pytest.raises(PrivacyParameterError):
        CALLS[name](GOOD, epsilon=eps, accountant=recorder, rng=0)
    assert recorder.ledger == []


def test_bad_delta_count_histogram_bounds(recorder: Any) -> None:
    for delta in (-0.1, 1.0, float("nan")):
        with pytest.raises(PrivacyParameterError):
            st.mean(GOOD, bounds=B, epsilon=1.0, delta=delta, accountant=recorder)
        with pytest.raises(PrivacyParameterError):
            st.count(GOOD, epsilon=1.0, delta=delta, accountant=recorder)
    with pytest.raises(DataError):
        st.histogram(GOOD, bins=[0, 1, 0.5], epsilon=1.0, accountant=recorder)
    with pytest.raises(DataError):
        st.histogram(np.ones((4, 2)), bins=[[0, 1]], epsilon=1.0, accountant=recorder)
    with pytest.raises(DataError):
        st.bounds([np.nan], epsilon=1.0, accountant=recorder)
    with pytest.raises(DataError):
        st.quantile(GOOD, 1.5, bounds=B, epsilon=1.0, accountant=recorder)
    with pytest.raises(DataError):
        st.corr(GOOD, GOOD[:-1], bounds=(B, B), epsilon=1.0, accountant=recorder)
    assert recorder.ledger == []


def test_budget_exceeded_releases_nothing() -> None:
    from dpkit.accounting import Accountant, PureDP
    from dpkit.errors import BudgetExceededError

    acct = Accountant(PureDP(epsilon=1.0))
    st.mean(GOOD, bounds=B, epsilon=0.8, accountant=acct, rng=0)
    with pytest.raises(BudgetExceededError):
        st.median(GOOD, bounds=B, epsilon=0.5, accountant=acct, rng=0)
    assert isinstance(BudgetExceededError("x"), DPKitError)


def test_delta_not_far_below_one_over_n_is_warned_only_when_n_is_public() -> None:
    """Name & Shame (lecture notes "Approximate Differential Privacy"): δ ≥ 1/n allows publishing a
    whole record. dpkit warns when n is
    public; with a private n it must not look (the warning would reveal the count)."""
    import warnings

    from dpkit.errors import PrivacyWarning

    x = np.linspace(0, 1, 100)
    with pytest.warns(PrivacyWarning, match="Name & Shame"):
        st.mean(x, bounds=(0, 1), epsilon=1.0, delta=0.02, n=100, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st.mean(x, bounds=(0, 1), epsilon=1.0, delta=0.02, rng=0)  # n private: no warning
        st.mean(x, bounds=(0, 1), epsilon=1.0, delta=1e-6, n=100, rng=0)
