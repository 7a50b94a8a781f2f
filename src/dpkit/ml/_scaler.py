"""Private standardisation: noisy means and standard deviations from declared bounds."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import OneToOneFeatureMixin, TransformerMixin  # type: ignore[import-untyped]
from sklearn.utils.validation import check_is_fitted  # type: ignore[import-untyped]

from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.errors import PrivacyParameterError
from dpkit.ml._base import (
    FloatArray,
    PrivateEstimator,
    charge_fit,
    check_box,
    check_privacy,
    compose_events,
)
from dpkit.ml._moments import group_moments_plan
from dpkit.random import RNGLike

__all__ = ["StandardScaler"]


class StandardScaler(OneToOneFeatureMixin, TransformerMixin, PrivateEstimator):  # type: ignore[misc]
    """Standardise features by a private mean and standard deviation.

    One noisy count, the noisy sums and the noisy sums of squares of the records clipped to
    ``bounds`` (Laplace, McSherry's (2016) "mean" and "variance" from noisy sums) give each
    feature's mean and variance; ``transform`` is post-processing.

    Privacy guarantee: ε-DP under add/remove of one record (ε/3 for the count, the sums and the
    sums of squares).

    Parameters
    ----------
    epsilon : float
        Required.
    bounds : (low, high)
        Required per-feature bounds (scalars or arrays); values outside are clipped when fitting.
    with_mean, with_std : bool
        As in scikit-learn.
    missing : {"raise", "drop"}
        A training record with a missing value (NaN): ``"raise"`` (default) refuses the fit before
        anything is charged, a refusal that reveals that one exists; ``"drop"`` removes the record
        first (a per-record filter, stable under add/remove neighbours). ±inf is not missing: it is
        clipped to the bounds, like any far value.
    accountant, rng :
        As everywhere in dpkit.

    Notes
    -----
    Every attribute of a fitted model is a DP output or a public parameter.

    Attributes
    ----------
    mean_, var_, scale_ :
        Private estimates (variance kept in [0, ((high − low)/2)²], scale ≥ a tiny floor).
    n_samples_seen_ : float
        The *noisy* count of records (at least 1), not the exact number: under add/remove
        neighbours the number of records is private.
    event_ : dpkit.accounting.Event
        What the fit cost.
    noise_ : dict
        Laplace scales of the count, the sums and the sums of squares.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.ml import StandardScaler
    >>> X = np.random.default_rng(0).normal(5, 2, (10_000, 2))
    >>> s = StandardScaler(epsilon=1.0, bounds=(-5, 15), rng=0).fit(X)
    >>> np.round(s.mean_, 1), np.round(s.scale_, 1)
    (array([5., 5.]), array([2. , 1.9]))
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        bounds: Any = None,
        with_mean: bool = True,
        with_std: bool = True,
        missing: Missing = MISSING_DEFAULT,
        accountant: Any = None,
        rng: RNGLike = None,
    ) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.with_mean = with_mean
        self.with_std = with_std
        self.missing = missing
        self.accountant = accountant
        self.rng = rng

    def accuracy(self, alpha: float = 0.05, *, n_features: int) -> dict[str, float]:
        """Before fitting, from public parameters only: the half-width of the ``1 − alpha``
        interval of the Laplace noise on the released count, on every feature's sum of the
        records centred in the box, and on every sum of their squares (``n_features``
        features). ``mean_`` and ``scale_`` are post-processing of these (ratios to the noisy
        count, whose error depends on the private n).

        >>> from dpkit.ml import StandardScaler
        >>> StandardScaler(epsilon=1.0, bounds=(0, 1)).accuracy(n_features=2)["count"]
        9.0
        """
        eps, _ = check_privacy(self.epsilon, None, needs_delta=False)
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1:
            raise PrivacyParameterError("n_features must be a positive int (public).")
        low, high = check_box(self.bounds, "bounds", n_features)
        plan = group_moments_plan(epsilon=eps, low=low, high=high, groups=1, squares=True)
        assert plan.squares is not None
        return {"count": plan.counts.accuracy(alpha), "sums": plan.sums.accuracy(alpha),
                "squares": plan.squares.accuracy(alpha)}  # fmt: skip

    def fit(self, X: object, y: object = None) -> StandardScaler:
        """Fit privately; charges the accountant once. Returns ``self``."""
        eps, _ = check_privacy(self.epsilon, None, needs_delta=False)
        Xc = self._fit_features(X)
        low, high = check_box(self.bounds, "bounds", Xc.shape[1])
        plan = group_moments_plan(epsilon=eps, low=low, high=high, groups=1, squares=True)
        event = compose_events(plan.events)
        gen = self._generator()
        event = charge_fit(self, event, 0.0, "StandardScaler.fit")
        counts, sums, squares = plan.release(Xc, np.zeros(Xc.shape[0], dtype=np.intp), 1, gen)
        assert squares is not None
        n = max(float(counts[0]), 1.0)
        half = (high - low) / 2
        centred = np.clip(sums[0] / n, -half, half)
        self.mean_ = centred + (low + high) / 2
        self.var_ = np.clip(squares[0] / n - centred**2, 0.0, half**2)
        self.scale_ = np.maximum(np.sqrt(self.var_), 1e-12 * np.max(half))
        self.n_samples_seen_ = n
        self.event_ = event
        self.noise_ = {
            "count": plan.counts.scale,
            "sums": plan.sums.scale,
            "squares": plan.squares.scale if plan.squares is not None else 0.0,
        }
        return self

    def transform(self, X: object) -> FloatArray:
        """Standardise with the private mean and scale (post-processing)."""
        check_is_fitted(self)
        out = self._check_features(X, reset=False).copy()
        if self.with_mean:
            out -= self.mean_
        if self.with_std:
            out /= self.scale_
        return out

    def inverse_transform(self, X: object) -> FloatArray:
        """Undo :meth:`transform`."""
        check_is_fitted(self)
        out = self._check_features(X, reset=False).copy()
        if self.with_std:
            out *= self.scale_
        if self.with_mean:
            out += self.mean_
        return out
