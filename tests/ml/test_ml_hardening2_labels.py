"""Labels outside the declared classes are dropped, never refused (no free membership oracle).

A classifier's label set is a public parameter (``classes=``). A record whose label is not among
the declared classes has no place in the model's domain: it is dropped before anything is
computed, exactly as if it were absent, so under add/remove neighbours the sensitivity already
covers it. Refusing the fit instead (as the estimators did) made *whether ``fit`` succeeds* depend
on one record's label, before any charge: a membership test at ε = 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import PrivacyParameterError
from dpkit.ml import GaussianNB, LogisticRegression

G = np.random.default_rng(20)
X = G.uniform(-0.5, 0.5, (120, 3))
Y = (X[:, 0] > 0).astype(np.int64)


def _classifiers() -> list[Any]:
    return [
        LogisticRegression(epsilon=1.0, data_norm=1.0, classes=[0, 1], rng=3),
        LogisticRegression(epsilon=1.0, delta=1e-6, data_norm=1.0, classes=[0, 1],
                           method="dpsgd", epochs=1, batch_size=20, n_samples=120, rng=3),
        GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=[0, 1], rng=3),
    ]  # fmt: skip


def _fitted_state(est: Any) -> list[np.ndarray]:
    names = ("coef_", "intercept_", "theta_", "var_", "class_count_", "class_prior_")
    return [np.asarray(getattr(est, a)) for a in names if hasattr(est, a)]


# Each extra record's label has no place among the declared classes [0, 1]: another integer,
# a fraction (which made the estimators see a "continuous" target and refuse), a negative one.
OUTSIDE = [2, 0.5, -1, 7.0]


@pytest.mark.parametrize("est", _classifiers(), ids=lambda e: f"{type(e).__name__}-{e.method}"
                         if hasattr(e, "method") else type(e).__name__)  # fmt: skip
@pytest.mark.parametrize("label", OUTSIDE)
def test_a_record_outside_the_classes_is_dropped_not_refused(est: Any, label: float) -> None:
    # Neighbours: D, and D plus one record whose label is outside the classes. Both fits must
    # succeed, both must charge, and since that record is dropped before anything is computed,
    # the same seed gives the very same model: the record has no effect at all.
    x_extra = np.array([[0.4, -0.4, 0.1]])
    y_plus = np.append(Y.astype(np.float64), label)
    acct = Accountant(ApproxDP(epsilon=100.0, delta=1e-3))
    base = est.set_params(accountant=acct).fit(X, Y.astype(np.float64))
    state = _fitted_state(base)
    plus = est.fit(np.vstack([X, x_extra]), y_plus)
    for a, b in zip(state, _fitted_state(plus), strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(acct.ledger) == 2  # both fits were charged
    np.testing.assert_array_equal(plus.classes_, [0, 1])


@pytest.mark.parametrize("est", _classifiers(), ids=["objective", "dpsgd", "GaussianNB"])
def test_a_label_of_another_type_is_dropped_alone(est: Any) -> None:
    # A string label among integer labels, in a list: NumPy reads [0, 1, ..., "z"] as the
    # strings "0", "1", ..., "z", so one record made every other label undeclared (a fit on
    # no record at all: far more than one record's influence). Each label must be read as it
    # is: the record with "z" is dropped alone, and the fit equals the fit without it.
    base = _fitted_state(est.fit(X, Y.tolist()))
    plus = est.fit(np.vstack([X, [[0.3, 0.3, 0.3]]]), [*Y.tolist(), "z"])
    for a, b in zip(base, _fitted_state(plus), strict=True):
        np.testing.assert_array_equal(a, b)


def test_classes_that_cannot_be_ordered_are_a_parameter_error() -> None:
    # The error depends on the parameter only (raised even with no data at all).
    with pytest.raises(PrivacyParameterError, match="classes"):
        GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=[0, "a"]).fit(X, Y)
    with pytest.raises(PrivacyParameterError, match="classes"):
        GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=[[0, 1], [1, 2]]).fit(X, Y)


def _every_estimator() -> list[tuple[Any, str]]:
    from dpkit.ml import PCA, KMeans, LinearRegression, StandardScaler

    return [
        (LinearRegression(epsilon=1.0, delta=1e-6, data_norm=1.0, bounds_y=(-1, 1), rng=3),
         "regression"),
        *[(est, "classes") for est in _classifiers()],
        (StandardScaler(epsilon=1.0, bounds=(-1, 1), rng=3), "none"),
        (PCA(epsilon=1.0, delta=1e-6, data_norm=1.0, rng=3), "none"),
        (KMeans(n_clusters=2, epsilon=1.0, bounds=(-1, 1), rng=3), "none"),
    ]  # fmt: skip


# One extra record built to hit each data check a fit could make on a value: features far
# outside any bound or norm, a target far outside bounds_y, a label outside the classes.
EXTREMES = [
    ([1e300, -1e300, 5.0], 0.0),
    ([0.0, 0.0, 0.0], 1e300),
    ([0.0, 0.0, 0.0], -3.0),
    ([-7.0, 7.0, 0.0], 2.5),
]


@pytest.mark.parametrize("est, kind", _every_estimator(),
                         ids=lambda v: v if isinstance(v, str) else type(v).__name__)  # fmt: skip
@pytest.mark.parametrize("extra", EXTREMES, ids=["features", "target", "negative", "both"])
def test_a_fit_succeeds_on_both_neighbours_whatever_the_extra_record(
    est: Any, kind: str, extra: tuple[list[float], float]
) -> None:
    # Whether fit succeeds (and which error it raises) must not depend on a record's value:
    # D and D plus one extreme record both fit and both charge.
    acct = Accountant(ApproxDP(epsilon=100.0, delta=1e-3))
    est.set_params(accountant=acct)
    x_extra, y_extra = extra
    X1 = np.vstack([X, [x_extra]])
    y0 = Y.astype(np.float64) if kind != "regression" else X @ [0.3, -0.2, 0.1]
    y1 = np.append(y0, y_extra)
    for Xd, yd in ((X, y0), (X1, y1)):
        est.fit(Xd) if kind == "none" else est.fit(Xd, yd)
    assert len(acct.ledger) == 2


def test_a_huge_row_is_scaled_to_the_norm_not_to_zero() -> None:
    # A finite row whose squared norm overflows was scaled to 0 (its norm was inf); clipping
    # must bring it to the sphere of radius data_norm, like any other row outside it.
    from dpkit.ml._base import clip_rows

    rows = np.array([[1e300, -1e300, 5.0], [3.0, 4.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.0, 0.0]])
    out = clip_rows(rows, 1.0)
    lengths = np.linalg.norm(out, axis=1)
    np.testing.assert_allclose(lengths[:2], 1.0, rtol=1e-9)
    assert np.all(lengths <= 1.0)
    np.testing.assert_allclose(out[0], [2**-0.5, -(2**-0.5), 0.0], atol=1e-12)
    np.testing.assert_allclose(out[2:], rows[2:], rtol=1e-11)


def test_string_classes_from_a_list_or_an_array() -> None:
    # Declared string classes work from a list and from a NumPy array of strings alike, and an
    # undeclared string label is dropped alone.
    names = np.where(Y == 1, "dog", "cat")
    est = GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=["dog", "cat"], rng=3)
    from_array = _fitted_state(est.fit(X, names))
    from_list = _fitted_state(est.fit(X, names.tolist()))
    plus = _fitted_state(est.fit(np.vstack([X, [[0.1, 0.1, 0.1]]]), [*names.tolist(), "bird"]))
    for a, b, c in zip(from_array, from_list, plus, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(est.classes_, ["cat", "dog"])
