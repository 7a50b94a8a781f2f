"""One missing-value policy for every statistic: ``missing="raise"`` (default) or ``"drop"``.

A NaN or None is refused before any charge under "raise", removed under "drop"; ±inf is not
missing but a value beyond a bound, clamped like 1e308 (a refusal on it would depend on one
record's value).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dpkit.stats as st
from dpkit import Accountant, Neighbouring, PureDP
from dpkit.errors import DataError
from dpkit.random import seeded

B = (0.0, 10.0)
Stat = Callable[..., Any]

STATS: dict[str, Stat] = {
    "count": lambda x, **k: st.count(x, epsilon=1.0, **k),
    "sum": lambda x, **k: st.sum(x, bounds=B, epsilon=1.0, **k),
    "mean": lambda x, **k: st.mean(x, bounds=B, epsilon=1.0, **k),
    "var": lambda x, **k: st.var(x, bounds=B, epsilon=1.0, **k),
    "std": lambda x, **k: st.std(x, bounds=B, epsilon=1.0, **k),
    "median": lambda x, **k: st.median(x, bounds=B, epsilon=1.0, **k),
    "quantile": lambda x, **k: st.quantile(x, [0.25, 0.75], bounds=B, epsilon=1.0, **k),
    "histogram": lambda x, **k: st.histogram(x, bins=[0, 5, 10], epsilon=1.0, **k),
    "bounds": lambda x, **k: st.bounds(x, epsilon=1.0, **k),
    "cov": lambda x, **k: st.cov(x, x, bounds=(B, B), epsilon=1.0, **k),
    "corr": lambda x, **k: st.corr(x, x, bounds=(B, B), epsilon=1.0, **k),
}

BASE = [float(v % 10) for v in range(300)]


@pytest.mark.parametrize("name", sorted(STATS))
@pytest.mark.parametrize("bad", [float("nan"), None], ids=["nan", "none"])
def test_raise_refuses_before_any_charge(name: str, bad: object) -> None:
    acct = Accountant(PureDP(epsilon=10.0))
    with pytest.raises(DataError, match="missing value") as info:
        STATS[name]([*BASE, bad], accountant=acct, rng=seeded(0))
    assert acct.spent.epsilon == 0
    assert "nan" not in str(info.value).lower().replace("nan or none", "")


@pytest.mark.parametrize("name", sorted(STATS))
def test_drop_equals_the_data_without_the_record(name: str) -> None:
    with_gap = STATS[name]([*BASE, float("nan"), None], missing="drop", rng=seeded(3))
    without = STATS[name](BASE, missing="drop", rng=seeded(3))
    np.testing.assert_array_equal(with_gap.value, without.value)


@pytest.mark.parametrize("name", sorted(STATS))
def test_infinity_is_clamped_not_refused(name: str) -> None:
    acct = Accountant(PureDP(epsilon=10.0))
    STATS[name]([*BASE, float("inf"), -float("inf")], accountant=acct, rng=seeded(0))
    assert acct.spent.epsilon > 0


def test_infinity_sums_like_the_bound() -> None:
    a = st.sum([*BASE, float("inf")], bounds=B, epsilon=1.0, rng=seeded(1)).value
    b = st.sum([*BASE, 10.0], bounds=B, epsilon=1.0, rng=seeded(1)).value
    assert a == b


def test_a_string_in_an_untyped_list_is_missing() -> None:
    with pytest.raises(DataError, match="missing value"):
        st.mean([*BASE, "1.5"], bounds=B, epsilon=1.0)
    a = st.mean([*BASE, "x"], bounds=B, epsilon=1.0, missing="drop", rng=seeded(2)).value
    assert a == st.mean(BASE, bounds=B, epsilon=1.0, rng=seeded(2)).value


def test_a_declared_string_column_is_a_schema_error() -> None:
    with pytest.raises(DataError, match="numeric"):
        st.mean(np.array(["1", "2"]), bounds=B, epsilon=1.0, missing="drop")


@pytest.mark.parametrize("missing", ["ignore", None, "RAISE", 1])
def test_unknown_policy_is_refused(missing: object) -> None:
    with pytest.raises(DataError, match="missing must be"):
        st.mean(BASE, bounds=B, epsilon=1.0, missing=missing)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["count", "sum", "mean", "median", "histogram", "cov"])
def test_drop_is_refused_where_the_size_is_public(name: str) -> None:
    # replace-one treats the number of records as public; dropping would make it private
    with pytest.raises(DataError, match="replace-one"):
        STATS[name](BASE, missing="drop", neighbouring=Neighbouring.REPLACE)


def test_mean_drops_rows_with_a_missing_value_in_either_column_of_a_pair() -> None:
    x = np.array([*BASE, np.nan, 1.0])
    y = np.array([*BASE, 1.0, np.nan])
    a = st.corr(x, y, bounds=(B, B), epsilon=1.0, missing="drop", rng=seeded(4)).value
    b = st.corr(BASE, BASE, bounds=(B, B), epsilon=1.0, rng=seeded(4)).value
    assert a == b


def test_an_int_beyond_the_doubles_in_a_list_is_clamped() -> None:
    a = st.sum([*BASE, 10**400, None], bounds=B, epsilon=1.0, missing="drop", rng=seeded(5))
    b = st.sum([*BASE, 10.0], bounds=B, epsilon=1.0, rng=seeded(5))
    assert a.value == b.value
