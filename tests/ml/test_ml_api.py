"""Conventions and bad input: charging, cloning, pipelines, errors before anything is charged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline

from dpkit.accounting import Accountant, ApproxDP, PureDP, epsilon_of
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError
from dpkit.ml import PCA, GaussianNB, KMeans, LinearRegression, LogisticRegression, StandardScaler

G = np.random.default_rng(0)
X = G.normal(0, 0.3, (200, 3))
Y_REG = X @ [1.0, -1.0, 0.5] + G.normal(0, 0.1, 200)
Y_CLS = (X[:, 0] > 0).astype(int)


def _all(**extra: Any) -> list[tuple[Any, Any]]:
    """(estimator, y) for every estimator, fully specified."""
    return [
        (LinearRegression(epsilon=1.0, delta=1e-6, data_norm=2.0, bounds_y=(-3, 3), **extra),
         Y_REG),
        (LogisticRegression(epsilon=1.0, data_norm=2.0, classes=[0, 1], **extra), Y_CLS),
        (LogisticRegression(epsilon=1.0, delta=1e-6, data_norm=2.0, classes=[0, 1],
                            method="dpsgd", epochs=2, n_samples=200, **extra), Y_CLS),
        (GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=[0, 1], **extra), Y_CLS),
        (StandardScaler(epsilon=1.0, bounds=(-1, 1), **extra), None),
        (PCA(epsilon=1.0, delta=1e-6, data_norm=2.0, **extra), None),
        (KMeans(n_clusters=2, epsilon=1.0, bounds=(-1, 1), **extra), None),
    ]  # fmt: skip


def _fit(est: Any, y: Any, X_: Any = X) -> Any:
    return est.fit(X_, y) if y is not None else est.fit(X_)


@pytest.mark.parametrize("est, y", _all(rng=1), ids=lambda v: type(v).__name__)
def test_fit_charges_its_event_once(est: Any, y: Any) -> None:
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-5))
    est.set_params(accountant=acct)
    _fit(est, y)
    assert len(acct.ledger) == 1
    assert acct.ledger[0].event == est.event_
    # the charge is at most the ε the estimator was given (δ where it has one)
    delta = getattr(est, "delta", None) or 0.0
    assert epsilon_of(est.event_, delta=delta) <= 1.0 + 1e-9


@pytest.mark.parametrize("est, y", _all(rng=1), ids=lambda v: type(v).__name__)
def test_overspending_is_refused_before_release(est: Any, y: Any) -> None:
    acct = Accountant(ApproxDP(epsilon=0.5, delta=1e-5))
    est.set_params(accountant=acct)
    with pytest.raises(BudgetExceededError):
        _fit(est, y)
    assert not acct.ledger
    assert not hasattr(est, "event_")


def test_cross_val_score_charges_every_fold_to_the_same_accountant() -> None:
    acct = Accountant(PureDP(epsilon=10.0))
    pipe = make_pipeline(
        StandardScaler(epsilon=0.5, bounds=(-1, 1), accountant=acct, rng=0),
        GaussianNB(epsilon=0.5, bounds=(-3, 3), classes=[0, 1], accountant=acct, rng=1),
    )
    g = np.random.default_rng(9)
    Xb = g.normal(0, 0.3, (6000, 3))
    yb = (Xb[:, 0] > 0).astype(int)
    scores = cross_val_score(pipe, Xb, yb, cv=3)
    assert scores.shape == (3,)
    assert len(acct.ledger) == 6  # 3 folds × 2 private steps
    assert acct.spent.epsilon == pytest.approx(3.0)
    assert np.mean(scores) > 0.75  # n = 4000 per fold, ε = 0.5 each: far above chance (0.5)


def test_clone_keeps_accountant_and_generator() -> None:
    acct = Accountant(PureDP(epsilon=1.0))
    gen = np.random.default_rng(3)
    est = GaussianNB(epsilon=0.5, bounds=(-1, 1), classes=[0, 1], accountant=acct, rng=gen)
    twin = clone(est)
    assert twin.accountant is acct and twin.rng is gen
    assert twin.get_params()["epsilon"] == 0.5


@pytest.mark.parametrize("param", ["epsilon", "data_norm", "bounds_y", "delta"])
def test_missing_parameter_is_an_error_and_charges_nothing(param: str) -> None:
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-5))
    est = LinearRegression(epsilon=1.0, delta=1e-6, data_norm=2.0, bounds_y=(-3, 3),
                           accountant=acct)  # fmt: skip
    est.set_params(**{param: None})
    with pytest.raises(PrivacyParameterError, match="required"):
        est.fit(X, Y_REG)
    assert not acct.ledger


@pytest.mark.parametrize(
    "est",
    [
        LogisticRegression(epsilon=1.0, data_norm=1.0),
        GaussianNB(epsilon=1.0, classes=[0, 1]),
        KMeans(epsilon=1.0),
        PCA(epsilon=1.0, delta=1e-6),
        StandardScaler(epsilon=1.0),
    ],
    ids=lambda v: type(v).__name__,
)
def test_missing_bounds_or_classes_never_read_from_data(est: Any) -> None:
    with pytest.raises(PrivacyParameterError, match="required"):
        _fit(est, Y_CLS if hasattr(est, "classes") else None)


@pytest.mark.parametrize("eps", [0.0, -1.0, float("inf"), float("nan"), "1"])
def test_bad_epsilon(eps: Any) -> None:
    with pytest.raises(PrivacyParameterError):
        GaussianNB(epsilon=eps, bounds=(-1, 1), classes=[0, 1]).fit(X, Y_CLS)


def test_bad_delta_and_reversed_bounds() -> None:
    with pytest.raises(PrivacyParameterError):
        PCA(epsilon=1.0, delta=1.0, data_norm=1.0).fit(X)
    with pytest.raises(PrivacyParameterError):
        LinearRegression(epsilon=1.0, delta=1e-6, data_norm=1.0, bounds_y=(3, -3)).fit(X, Y_REG)
    with pytest.raises(PrivacyParameterError):
        KMeans(epsilon=1.0, bounds=(1, -1)).fit(X)


@pytest.mark.parametrize("est, y", _all(), ids=lambda v: type(v).__name__)
def test_nan_and_shapes_are_refused_before_charging(est: Any, y: Any) -> None:
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-5))
    est.set_params(accountant=acct)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(DataError):
        _fit(est, y, bad)
    with pytest.raises(DataError):
        _fit(est, y, X[:, 0])  # 1-d X
    if y is not None:
        with pytest.raises(DataError):
            est.fit(X, y[:-1])  # lengths differ
    assert not acct.ledger


@pytest.mark.parametrize("cls_est", [0, 1], ids=["LogisticRegression", "GaussianNB"])
def test_labels_outside_declared_classes_are_dropped(cls_est: int) -> None:
    # Refusing them would make the fit's success depend on one record's label (before any
    # charge); the record is dropped instead, and the fit is charged as usual.
    acct = Accountant(PureDP(epsilon=5.0))
    est: Any = [
        LogisticRegression(epsilon=1.0, data_norm=1.0, classes=[0, 1], accountant=acct),
        GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=[0, 1], accountant=acct),
    ][cls_est]
    y = Y_CLS.copy()
    y[7] = 2
    est.fit(X, y)
    assert len(acct.ledger) == 1
    np.testing.assert_array_equal(est.classes_, [0, 1])


def test_empty_dataset_is_answered_with_noise() -> None:
    empty = np.zeros((0, 3))
    m = StandardScaler(epsilon=1.0, bounds=(-1, 1), rng=0).fit(empty)
    assert np.all(np.isfinite(m.mean_))
    lr = LinearRegression(epsilon=1.0, delta=1e-6, data_norm=1.0, bounds_y=(-1, 1), rng=0)
    assert np.all(np.isfinite(lr.fit(empty, np.zeros(0)).coef_))


def test_secure_by_default_fits_differ() -> None:
    est = GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=[0, 1])
    a = est.fit(X, Y_CLS).theta_.copy()
    b = est.fit(X, Y_CLS).theta_.copy()
    assert not np.array_equal(a, b)


def test_seeded_fits_are_reproducible() -> None:
    est = LinearRegression(epsilon=1.0, delta=1e-6, data_norm=2.0, bounds_y=(-3, 3), rng=5)
    assert np.array_equal(est.fit(X, Y_REG).coef_, clone(est).fit(X, Y_REG).coef_)


def test_objective_perturbation_noise_effect_matches_its_formula() -> None:
    # ‖w_private − w_exact‖ ≤ ‖b‖/Λ; its mean over fits is about d·R/(ε_b·Λ) = coef_noise_
    from dpkit.ml._logistic import _newton

    Xs = clone_data = np.hstack([X, np.full((200, 1), 2.0)])
    s = np.where(Y_CLS == 1, 1.0, -1.0)
    dists = []
    for seed in range(40):
        m = LogisticRegression(epsilon=1.0, data_norm=2.0, classes=[0, 1], rng=seed).fit(X, Y_CLS)
        lam = 0.25 * 8.0 / np.expm1(0.5)
        exact = _newton(clone_data, s, max(1.0, lam), np.zeros(4))
        w = np.append(m.coef_[0], m.intercept_[0] / 2.0)
        dists.append(np.linalg.norm(w - exact))
    assert Xs.shape == (200, 4)
    # strong convexity bounds each distance by ‖b‖/Λ, whose mean is coef_noise_
    assert np.mean(dists) <= m.coef_noise_
    assert np.mean(dists) > 0.05 * m.coef_noise_  # the noise does act


def test_dpsgd_plan_meets_its_target_with_dpkits_accountant() -> None:
    from dpkit.accounting import dpsgd_epsilon
    from dpkit.ml import dpsgd_plan

    plan = dpsgd_plan(
        epsilon=1.0, delta=1e-5, clip_norm=2.0, dimension=4, sample_rate=0.05, steps=200
    )
    # the run charged is σ/Δ = z: exactly what the DP-SGD accountant certifies at (1, 1e-5)
    assert epsilon_of(plan.event, delta=1e-5, method="rdp") <= 1.0 + 1e-9
    assert dpsgd_epsilon(plan.noise_multiplier, 0.05, 200, 1e-5, method="rdp") <= 1.0 + 1e-9
    assert plan.sigma >= plan.noise_multiplier * plan.clip_norm


def test_dpsgd_mechanism_does_not_depend_on_the_private_n() -> None:
    # Regression: q = batch/n and steps = epochs·n/batch were read from the data, so the
    # mechanism charged (and run) differed between add/remove neighbours. Now they come from
    # the declared public n_samples, and the fit refuses to run without it (charging nothing).
    def est(**kw: Any) -> LogisticRegression:
        return LogisticRegression(
            epsilon=1.0, delta=1e-6, data_norm=2.0, classes=[0, 1], method="dpsgd", epochs=1,
            batch_size=20, rng=0, **kw,
        )  # fmt: skip

    small = est(n_samples=200).fit(X[:100], Y_CLS[:100])
    large = est(n_samples=200).fit(X[:101], Y_CLS[:101])
    assert small.event_ == large.event_
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-5))
    with pytest.raises(PrivacyParameterError, match="n_samples"):
        est(accountant=acct).fit(X, Y_CLS)
    with pytest.raises(PrivacyParameterError):  # was a bare ValueError, after charging
        est(n_samples=200, learning_rate="fast", accountant=acct).fit(X, Y_CLS)
    assert not acct.ledger


def test_bad_hyper_parameters_are_refused_before_charging() -> None:
    # Regression: GaussianNB read var_smoothing after charging (a bare ValueError for "abc"),
    # and LinearRegression's rho="abc" was a bare ValueError.
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-5))
    for bad in ("abc", -1.0, float("nan")):
        nb = GaussianNB(epsilon=1.0, bounds=(-1, 1), classes=[0, 1], var_smoothing=bad,
                        accountant=acct)  # fmt: skip
        with pytest.raises(PrivacyParameterError):
            nb.fit(X, Y_CLS)
        lr = LinearRegression(epsilon=1.0, delta=1e-6, data_norm=2.0, bounds_y=(-3, 3), rho=bad,
                              accountant=acct)  # fmt: skip
        with pytest.raises(PrivacyParameterError):
            lr.fit(X, Y_REG)
    assert not acct.ledger
