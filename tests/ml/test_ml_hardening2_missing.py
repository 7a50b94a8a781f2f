"""The missing-value policy (``missing=``) in :mod:`dpkit.ml`, and ±inf clipped, never refused.

±inf in a training record is a value beyond the declared bounds (or norm), like 1e300: it is
clipped, so a fit on data holding one is exactly the fit on data holding its clipped copy (same
seed, same model). Refusing it made whether ``fit`` succeeds depend on one record's value. NaN
has no place in any domain: the default ``missing="raise"`` refuses it before anything is
charged, and ``missing="drop"`` removes its record, so the model equals the one fitted without
it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import DataError
from dpkit.ml import PCA, GaussianNB, KMeans, LinearRegression, LogisticRegression, StandardScaler

G = np.random.default_rng(21)
X = G.uniform(0.0, 10.0, (80, 2))
Y01 = (X[:, 0] > 5).astype(np.int64)
YR = X[:, 0] + 0.5 * X[:, 1]

# name -> (make(accountant, **kw), y or None, the row that an inf row [inf, 1] is clipped to)
NORM_ROW = [1e300, 0.0]  # clip_rows: an infinite entry dominates, the finite ones vanish
BOX_ROW = [10.0, 1.0]  # np.clip to the bounds (0, 10)
ESTIMATORS: dict[str, tuple[Callable[..., Any], Any, list[float]]] = {
    "KMeans": (
        lambda a, **k: KMeans(2, epsilon=1.0, bounds=(0, 10), accountant=a, rng=3, **k),
        None,
        BOX_ROW,
    ),
    "StandardScaler": (
        lambda a, **k: StandardScaler(epsilon=1.0, bounds=(0, 10), accountant=a, rng=3, **k),
        None,
        BOX_ROW,
    ),
    "PCA": (
        lambda a, **k: PCA(1, epsilon=1.0, delta=1e-6, data_norm=15.0, accountant=a, rng=3, **k),
        None,
        NORM_ROW,
    ),
    "GaussianNB": (
        lambda a, **k: GaussianNB(
            epsilon=1.0, bounds=(0, 10), classes=[0, 1], accountant=a, rng=3, **k
        ),
        Y01,
        BOX_ROW,
    ),
    "LogisticRegression": (
        lambda a, **k: LogisticRegression(
            epsilon=1.0, data_norm=15.0, classes=[0, 1], accountant=a, rng=3, **k
        ),
        Y01,
        NORM_ROW,
    ),
    "LinearRegression": (
        lambda a, **k: LinearRegression(
            epsilon=1.0, delta=1e-6, data_norm=15.0, bounds_y=(0, 15), accountant=a, rng=3, **k
        ),
        YR,
        NORM_ROW,
    ),
}


def _acct() -> Accountant:
    return Accountant(ApproxDP(epsilon=100.0, delta=1e-3))


def _state(est: Any) -> list[np.ndarray]:
    names = ("coef_", "intercept_", "theta_", "var_", "class_count_", "mean_", "scale_",
             "components_", "explained_variance_", "cluster_centers_")  # fmt: skip
    return [np.asarray(getattr(est, a)) for a in names if hasattr(est, a)]


def _fit(name: str, row: list[float], label: Any = None, **kw: Any) -> tuple[Any, Accountant]:
    make, y, _ = ESTIMATORS[name]
    acct = _acct()
    est = make(acct, **kw)
    Xp = np.vstack([X, [row]]) if row else X
    if y is None:
        return est.fit(Xp), acct
    yp = np.append(y.astype(object), y[0] if label is None else label) if row else y
    if y.dtype.kind == "f" and (label is None or isinstance(label, float)):
        yp = np.asarray(yp, dtype=np.float64)
    elif y.dtype.kind == "i" and label is None:
        yp = np.asarray(yp, dtype=np.int64)
    return est.fit(Xp, yp), acct


def _equal(a: Any, b: Any) -> None:
    for u, v in zip(_state(a), _state(b), strict=True):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_inf_is_clipped_like_a_far_value(name: str, sign: float) -> None:
    clipped = ESTIMATORS[name][2]
    far = [sign * clipped[0], clipped[1]] if clipped is NORM_ROW else clipped
    if sign < 0 and clipped is BOX_ROW:
        far = [0.0, 1.0]
    got, acct = _fit(name, [sign * np.inf, 1.0])
    want, _ = _fit(name, far)
    _equal(got, want)
    assert len(acct.ledger) == 1


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_nan_is_refused_by_default_before_the_charge(name: str) -> None:
    make, y, _ = ESTIMATORS[name]
    acct = _acct()
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(DataError, match="missing value"):
        make(acct).fit(bad) if y is None else make(acct).fit(bad, y)
    assert not acct.ledger


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_nan_rows_are_dropped_on_request(name: str) -> None:
    got, acct = _fit(name, [np.nan, 1.0], missing="drop")
    want, _ = _fit(name, [])
    _equal(got, want)
    assert len(acct.ledger) == 1


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_the_policy_is_a_checked_constructor_parameter(name: str) -> None:
    make, y, _ = ESTIMATORS[name]
    acct = _acct()
    est = make(acct, missing="fill")
    assert est.get_params()["missing"] == "fill"
    with pytest.raises(DataError, match="missing must be"):
        est.fit(X) if y is None else est.fit(X, y)
    assert not acct.ledger


@pytest.mark.parametrize("label", [np.nan, None, "n/a"])
def test_a_regression_target_that_is_not_a_number_is_missing(label: Any) -> None:
    acct = _acct()
    yp = np.append(YR.astype(object), label)
    if isinstance(label, float):
        yp = yp.astype(np.float64)
    Xp = np.vstack([X, [[1.0, 1.0]]])
    est = ESTIMATORS["LinearRegression"][0]
    with pytest.raises(DataError, match="missing value") as info:
        est(acct).fit(Xp, yp)
    assert "n/a" not in str(info.value)
    assert not acct.ledger
    _equal(est(acct, missing="drop").fit(Xp, yp), _fit("LinearRegression", [])[0])


def test_an_infinite_regression_target_is_clipped_to_bounds_y() -> None:
    got, _ = _fit("LinearRegression", [1.0, 1.0], label=np.inf)
    want, _ = _fit("LinearRegression", [1.0, 1.0], label=15.0)
    _equal(got, want)


@pytest.mark.parametrize("name", ["GaussianNB", "LogisticRegression"])
@pytest.mark.parametrize("label", [np.nan, None])
def test_a_missing_label_follows_the_policy(name: str, label: Any) -> None:
    make, y, _ = ESTIMATORS[name]
    acct = _acct()
    yp = np.append(y.astype(object), label)
    Xp = np.vstack([X, [[1.0, 1.0]]])
    with pytest.raises(DataError, match="missing value"):
        make(acct).fit(Xp, yp)
    assert not acct.ledger
    _equal(make(acct, missing="drop").fit(Xp, yp), _fit(name, [])[0])
