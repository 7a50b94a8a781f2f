"""Private Gaussian naive Bayes: noisy class counts, means and variances."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import logsumexp
from sklearn.base import ClassifierMixin  # type: ignore[import-untyped]
from sklearn.utils.validation import check_is_fitted  # type: ignore[import-untyped]

from dpkit.errors import PrivacyParameterError
from dpkit.ml._base import (
    FloatArray,
    PrivateEstimator,
    charge_fit,
    check_box,
    check_classes,
    check_privacy,
    check_xy,
    compose_events,
    encode_labels,
)
from dpkit.ml._moments import group_moments_plan
from dpkit.random import RNGLike

__all__ = ["GaussianNB"]


def _check_smoothing(value: object) -> float:
    """``var_smoothing``: a finite number ≥ 0 (checked before anything is charged)."""
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise PrivacyParameterError("var_smoothing must be a number >= 0.") from None
    if not math.isfinite(out) or out < 0:
        raise PrivacyParameterError("var_smoothing must be a finite number >= 0.")
    return out


class GaussianNB(ClassifierMixin, PrivateEstimator):  # type: ignore[misc]
    """Gaussian naive Bayes with ε-differential privacy.

    The model is a function of per-class counts, feature sums and sums of squares; each is
    released once with Laplace noise (seed 003, "the Laplace mechanism"; Vaidya, Shafiq, Basu &
    Hong 2013), on records clipped to the declared ``bounds``; priors, means and variances are
    post-processing. Each variance is kept between the noise level of its own estimate
    (capped at a quarter of the squared half-range) and the squared half-range.

    Privacy guarantee: ε-DP under add/remove of one record (ε/3 each for the class counts,
    the sums and the sums of squares; see :class:`dpkit.ml._moments.GroupMoments`).

    Parameters
    ----------
    epsilon : float
        Required.
    bounds : (low, high)
        Required per-feature bounds (scalars or arrays); values outside are clipped.
    classes : sequence
        Required list of every label.
    var_smoothing : float
        Smallest variance, relative to the largest declared range squared.
    accountant, rng :
        As everywhere in dpkit.

    Attributes
    ----------
    theta_, var_, class_prior_, class_count_, classes_ :
        As in scikit-learn (noisy counts are clamped at 0 for the prior, at 1 for division).
    event_ : dpkit.accounting.Event
        What the fit cost.
    noise_ : dict
        Laplace scales of the counts, sums and sums of squares.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.ml import GaussianNB
    >>> g = np.random.default_rng(0)
    >>> y = g.integers(0, 2, 5000)
    >>> X = g.normal(0, 1, (5000, 4)) + 2 * y[:, None]
    >>> nb = GaussianNB(epsilon=1.0, bounds=(-4, 6), classes=[0, 1], rng=0).fit(X, y)
    >>> nb.score(X, y) > 0.95
    True
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        bounds: Any = None,
        classes: Any = None,
        var_smoothing: float = 1e-9,
        accountant: Any = None,
        rng: RNGLike = None,
    ) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.var_smoothing = var_smoothing
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: object, y: object) -> GaussianNB:
        """Fit privately; charges the accountant once. Returns ``self``."""
        eps, _ = check_privacy(self.epsilon, None, needs_delta=False)
        classes = check_classes(self.classes)
        smoothing = _check_smoothing(self.var_smoothing)
        Xc, yc = check_xy(self, X, y)
        low, high = check_box(self.bounds, "bounds", Xc.shape[1])
        groups = encode_labels(yc, classes)
        k = classes.size
        plan = group_moments_plan(epsilon=eps, low=low, high=high, groups=k, squares=True)
        event = compose_events(plan.events)
        gen = self._generator()
        charge_fit(self, event, 0.0, "GaussianNB.fit")
        counts, sums, squares = plan.release(Xc, groups, k, gen)
        assert squares is not None
        n = np.maximum(counts, 1.0)[:, None]
        half = (high - low) / 2
        centred_mean = np.clip(sums / n, -half, half)
        var = squares / n - centred_mean**2
        # A variance is not resolved below the noise of Q/n (√2·b/n for Laplace of scale b on
        # the sum of squares): floor it there, or a noisy near-zero variance would dominate;
        # but never above (h/2)², so that at small ε the features keep some weight.
        noise_floor = np.sqrt(2.0) * plan.squares.scale / n if plan.squares else 0.0
        noise_floor = np.minimum(noise_floor, 0.25 * half**2)
        floor = np.maximum(noise_floor, smoothing * float(np.max(half) ** 2))
        self.theta_ = centred_mean + (low + high) / 2
        self.var_ = np.clip(var, np.maximum(floor, 1e-300), np.maximum(half**2, floor))
        self.class_count_ = np.maximum(counts, 0.0)
        # the Laplace scale of the counts as a pseudo-count: no class gets prior 0 from noise
        # alone, and the prior tends to uniform when the counts are mostly noise
        smoothed = self.class_count_ + plan.counts.scale
        self.class_prior_ = smoothed / float(smoothed.sum())
        self.classes_ = classes
        self.event_ = event
        self.noise_ = {
            "counts": plan.counts.scale,
            "sums": plan.sums.scale,
            "squares": plan.squares.scale if plan.squares is not None else 0.0,
        }
        return self

    def _joint_log_likelihood(self, X: object) -> FloatArray:
        check_is_fitted(self)
        Xc = self._check_features(X, reset=False)
        with np.errstate(divide="ignore"):
            log_prior = np.log(self.class_prior_)
        ll = -0.5 * np.sum(np.log(2 * np.pi * self.var_), axis=1)
        diff = Xc[:, None, :] - self.theta_[None, :, :]
        ll = ll[None, :] - 0.5 * np.sum(diff**2 / self.var_[None, :, :], axis=2)
        out: FloatArray = ll + log_prior[None, :]
        return out

    def predict_log_proba(self, X: object) -> FloatArray:
        """Log posterior class probabilities."""
        jll = self._joint_log_likelihood(X)
        out: FloatArray = jll - logsumexp(jll, axis=1, keepdims=True)
        return out

    def predict_proba(self, X: object) -> FloatArray:
        """Posterior class probabilities."""
        out: FloatArray = np.exp(self.predict_log_proba(X))
        return out

    def predict(self, X: object) -> Any:
        """Most probable class."""
        jll = self._joint_log_likelihood(X)
        return self.classes_[np.argmax(jll, axis=1)]
