"""Private linear regression by AdaSSP: noisy sufficient statistics with an adaptive ridge."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import RegressorMixin  # type: ignore[import-untyped]
from sklearn.utils.validation import check_is_fitted  # type: ignore[import-untyped]

from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import Gaussian
from dpkit.ml._base import (
    FloatArray,
    PrivateEstimator,
    charge_fit,
    check_interval,
    check_norm,
    check_privacy,
    check_xy,
    clip_rows,
    compose_events,
)
from dpkit.random import RNGLike

__all__ = ["LinearRegression"]


def _symmetric(upper: FloatArray, d: int) -> FloatArray:
    out = np.zeros((d, d))
    out[np.triu_indices(d)] = upper
    return out + np.triu(out, 1).T


def _mechanisms(
    eps: float, dlt: float, norm: float, bounds_y: tuple[float, float], d: int, intercept: bool
) -> tuple[Gaussian, Gaussian, Gaussian]:
    """AdaSSP's three Gaussian mechanisms (λ_min, the upper triangle of XᵀX, Xᵀy) for ``d``
    columns (the intercept's included), from public parameters only."""
    bound = norm * math.sqrt(2.0) if intercept else norm
    bound = math.nextafter(bound, math.inf)
    half = (bounds_y[1] - bounds_y[0]) / 2
    # Each part at (ε/3, δ/3), ℓ2 sensitivities under add/remove of one record.
    part_eps, part_delta = eps / 3, dlt / 3
    m_eig = Gaussian(epsilon=part_eps, delta=part_delta, sensitivity=bound**2)
    m_xx = Gaussian(
        epsilon=part_eps, delta=part_delta, sensitivity=bound**2, shape=(d * (d + 1) // 2,)
    )
    m_xy = Gaussian(epsilon=part_eps, delta=part_delta, sensitivity=bound * half, shape=(d,))
    return m_eig, m_xx, m_xy


class LinearRegression(RegressorMixin, PrivateEstimator):  # type: ignore[misc]
    """Ordinary least squares with (ε, δ)-differential privacy by AdaSSP (Wang 2018).

    AdaSSP ("adaptive sufficient statistics perturbation", Wang 2018, Algorithm 2) releases the
    Gram matrix ``XᵀX`` and ``Xᵀy`` with Gaussian noise, and a noisy lower bound on the smallest
    eigenvalue of ``XᵀX``; it then solves the ridge system ``(XᵀX̃ + λI) θ = Xᵀỹ`` with the
    smallest λ that keeps the noisy Gram matrix well conditioned with probability 1 − ``rho``.
    It is close to optimal at small ε, where output or objective perturbation lose badly. The
    lecture notes "Differential Privacy" (on machine learning): learning with privacy is a form of
    regularisation — here the ridge is chosen by the privacy noise itself.

    Privacy guarantee: (ε, δ)-DP under add/remove-one-record neighbours. Each record's features
    are clipped to ℓ2 norm ``data_norm`` and its label to ``bounds_y``; the three releases
    (λ_min with ℓ2 sensitivity B², the upper triangle of XᵀX with B², Xᵀy with B·B_y, where
    B is the norm bound of the augmented record) each use the float-safe Gaussian mechanism of
    :class:`dpkit.mechanisms.Gaussian` at (ε/3, δ/3), and are charged as one composed event.
    Nothing is read from the data to set a bound.

    Parameters
    ----------
    epsilon, delta : float
        Privacy parameters, required; δ well below 1/n.
    data_norm : float
        Required bound on each record's ℓ2 feature norm; longer rows are scaled down to it.
    bounds_y : (float, float)
        Required range of the target; values outside are clipped to it.
    fit_intercept : bool
        Learn an intercept (through a constant feature equal to ``data_norm``).
    rho : float
        Failure probability of the eigenvalue bound (Wang's ϱ), default 0.05.
    missing : {"raise", "drop"}
        A training record with a missing value (NaN, or a target that is not a number): ``"raise"``
        (default) refuses the fit before anything is charged, a refusal that reveals that one
        exists; ``"drop"`` removes the record first (a per-record filter, stable under add/remove
        neighbours). ±inf is not missing: it is clipped with the row to ``data_norm`` (a target to
        ``bounds_y``), like any far value.
    accountant : dpkit.accounting.Accountant, optional
        Charged once per fit, before anything is released.
    rng : None, int or numpy.random.Generator
        ``None`` (default) is secure; an int seed is reproducible and not secure.

    Notes
    -----
    Every attribute of a fitted model is a DP output or a public parameter; :meth:`predict` on
    the training records gives per-record answers, which are not private.

    Attributes
    ----------
    coef_, intercept_ : numpy.ndarray, float
        The private model.
    event_ : dpkit.accounting.Event
        What the fit cost.
    ridge_ : float
        The λ that AdaSSP added (computed from the noisy λ_min: a DP output).
    noise_ : dict
        Standard deviations of the noise on λ_min, on each entry of XᵀX and of Xᵀy.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.ml import LinearRegression
    >>> g = np.random.default_rng(0)
    >>> X = g.uniform(-1, 1, (5000, 2)) / 2
    >>> y = X @ [2.0, -1.0] + 0.5 + g.normal(0, 0.1, 5000)
    >>> m = LinearRegression(epsilon=1.0, delta=1e-6, data_norm=1.0, bounds_y=(-2, 3), rng=0)
    >>> np.round(m.fit(X, y).coef_, 1)
    array([ 2., -1.])
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        data_norm: float | None = None,
        bounds_y: tuple[float, float] | None = None,
        fit_intercept: bool = True,
        rho: float = 0.05,
        missing: Missing = MISSING_DEFAULT,
        accountant: Any = None,
        rng: RNGLike = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.bounds_y = bounds_y
        self.fit_intercept = fit_intercept
        self.rho = rho
        self.missing = missing
        self.accountant = accountant
        self.rng = rng

    def accuracy(self, alpha: float = 0.05, *, n_features: int) -> dict[str, float]:
        """Before fitting, from public parameters only: the half-width of the ``1 − alpha``
        interval of the noise on each released statistic for data with ``n_features`` features:
        the smallest eigenvalue of ``XᵀX``, every entry of ``XᵀX`` and every entry of ``Xᵀy``
        (rows clipped to ``data_norm``, targets centred in ``bounds_y``; the intercept's column
        included). The coefficients are post-processing of these through a ridge chosen from
        the noisy eigenvalue, so their error depends on the data's Gram matrix (private) and
        has no closed form here.

        >>> from dpkit.ml import LinearRegression
        >>> lr = LinearRegression(epsilon=1.0, delta=1e-6, data_norm=1.0, bounds_y=(0, 1))
        >>> round(lr.accuracy(n_features=2)["gram"], 2)
        52.5
        """
        eps, dlt = check_privacy(self.epsilon, self.delta, needs_delta=True)
        norm = check_norm(self.data_norm, "data_norm")
        bounds_y = check_interval(self.bounds_y, "bounds_y")
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1:
            raise PrivacyParameterError("n_features must be a positive int (public).")
        d = n_features + (1 if self.fit_intercept else 0)
        m_eig, m_xx, m_xy = _mechanisms(eps, dlt, norm, bounds_y, d, self.fit_intercept)
        return {"eigenvalue": m_eig.accuracy(alpha), "gram": m_xx.accuracy(alpha),
                "xy": m_xy.accuracy(alpha)}  # fmt: skip

    def fit(self, X: object, y: object) -> LinearRegression:
        """Fit privately; charges the accountant once. Returns ``self``."""
        eps, dlt = check_privacy(self.epsilon, self.delta, needs_delta=True)
        norm = check_norm(self.data_norm, "data_norm")
        lo, hi = check_interval(self.bounds_y, "bounds_y")
        try:
            rho = float(self.rho)
        except (TypeError, ValueError):
            rho = math.nan
        if not 0 < rho < 1:
            raise PrivacyParameterError("rho must be in (0, 1), e.g. 0.05.")
        Xc, yc = check_xy(self, X, y, self._check_missing(), y_numeric=True)
        # a target outside bounds_y (±inf included) is clipped to it below, never refused;
        # one that is not a number is missing (check_xy applied the policy)
        yf = yc
        Z = clip_rows(Xc, norm)
        if self.fit_intercept:
            Z = np.hstack([Z, np.full((Z.shape[0], 1), norm)])
        d = Z.shape[1]
        mid = (lo + hi) / 2
        t = np.clip(yf, lo, hi) - mid
        m_eig, m_xx, m_xy = _mechanisms(eps, dlt, norm, (lo, hi), d, self.fit_intercept)
        event = compose_events([m_eig.event, m_xx.event, m_xy.event])
        gen = self._generator()
        event = charge_fit(self, event, dlt, "LinearRegression.fit (AdaSSP)")

        gram = Z.T @ Z
        eig_min = float(np.linalg.eigvalsh(gram)[0]) if Z.shape[0] else 0.0
        noisy_min = float(m_eig.release(max(eig_min, 0.0), rng=gen))
        low_min = max(noisy_min - m_eig.ci(rho), 0.0)  # below λ_min w.p. ≥ 1 − rho
        upper = np.asarray(m_xx.release(gram[np.triu_indices(d)], rng=gen))
        noisy_gram = _symmetric(upper, d)
        noisy_xy = np.asarray(m_xy.release(Z.T @ t, rng=gen))
        # Wang (2018): ‖E‖ ≲ σ √(d log(2d²/ϱ)) for the symmetric Gaussian noise matrix E.
        ridge = max(0.0, m_xx.sigma * math.sqrt(d * math.log(2 * d * d / rho)) - low_min)
        theta = np.linalg.solve(noisy_gram + ridge * np.eye(d), noisy_xy)

        if self.fit_intercept:
            self.coef_ = theta[:-1]
            self.intercept_ = float(theta[-1] * norm + mid)
        else:
            self.coef_ = theta
            self.intercept_ = mid
        self.event_ = event
        self.ridge_ = ridge
        self.noise_ = {"eigenvalue": m_eig.sigma, "gram": m_xx.sigma, "xy": m_xy.sigma}
        return self

    def predict(self, X: object) -> FloatArray:
        """Predictions of the private model (post-processing: no further privacy cost)."""
        check_is_fitted(self)
        Xc = self._check_features(X, reset=False)
        out: FloatArray = Xc @ self.coef_ + self.intercept_
        return out
