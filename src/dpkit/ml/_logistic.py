"""Private logistic regression: objective perturbation (ε-DP) or DP-SGD ((ε, δ)-DP)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special
from sklearn.base import ClassifierMixin  # type: ignore[import-untyped]
from sklearn.utils.validation import check_is_fitted  # type: ignore[import-untyped]

from dpkit._checks import check_positive
from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Event, PureDPEvent
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms._tails import check_alpha
from dpkit.ml._base import (
    FloatArray,
    PrivateEstimator,
    charge_fit,
    check_classes,
    check_int,
    check_norm,
    check_privacy,
    check_xy,
    clip_rows,
    compose_events,
    encode_labels,
)
from dpkit.ml._dpsgd import dpsgd_plan, run_dpsgd
from dpkit.noise import gaussian, laplace
from dpkit.random import RNGLike

__all__ = ["LogisticRegression", "objective_perturbation_noise"]

_CURVATURE = 0.25  # sup of the logistic loss's second derivative


def objective_perturbation_noise(
    *, epsilon: float, radius: float, ridge: float
) -> tuple[float, float]:
    """Total ridge Λ and the ε left for the noise vector, for one objective-perturbed problem.

    Chaudhuri, Monteleoni & Sarwate (2011, Algorithm 2 and Theorem 9), written for the
    *summed* loss ``Σ ℓ(w; xᵢ, yᵢ) + (Λ/2)‖w‖² + bᵀw`` under add/remove of one record: the
    minimiser is a bijection of b with Jacobian ``∇²Σℓ + ΛI``; adding a record moves b by its
    gradient (norm ≤ R for the logistic loss with ‖x‖ ≤ R) and multiplies the Jacobian's
    determinant by at most ``1 + c R²/Λ`` (c = 1/4). With density ∝ exp(−ε_b‖b‖/R) the output
    is ε-DP for ``ε = ε_b + log(1 + cR²/Λ)``; Λ is raised (if needed) so that the Jacobian term
    takes at most ε/2.

    >>> lam, eps_b = objective_perturbation_noise(epsilon=1.0, radius=1.0, ridge=1.0)
    >>> round(lam, 3), round(eps_b, 3)
    (1.0, 0.777)
    """
    need = _CURVATURE * radius**2 / math.expm1(epsilon / 2)
    lam = max(ridge, need)
    eps_b = epsilon - math.log1p(_CURVATURE * radius**2 / lam)
    return lam, eps_b


def _l2_laplace(d: int, scale: float, gen: np.random.Generator) -> FloatArray:
    """A vector with density ∝ exp(−‖b‖/scale): norm Gamma(d, scale), uniform direction.

    The norm is the sum of d exponentials |L| (L from dpkit's exact Laplace on its fine grid)
    and the direction a normalised exact discrete Gaussian vector on a fine grid.
    """
    radius = float(np.sum(np.abs(np.asarray(laplace(np.zeros(d), scale, rng=gen)))))
    direction = np.asarray(gaussian(np.zeros(d), 1.0, rng=gen))
    while not np.any(direction):  # probability ~2^-24d
        direction = np.asarray(gaussian(np.zeros(d), 1.0, rng=gen))
    out: FloatArray = radius * direction / np.linalg.norm(direction)
    return out


def _newton(Z: FloatArray, s: FloatArray, lam: float, b: FloatArray) -> FloatArray:
    """Minimise Σ log(1 + exp(−sᵢ wᵀzᵢ)) + (λ/2)‖w‖² + bᵀw (strongly convex) to high accuracy."""
    w = np.zeros(Z.shape[1])
    for _ in range(100):
        m = s * (Z @ w)
        p = 0.5 * (1.0 - np.tanh(m / 2))  # σ(−m), stable
        grad = -(Z.T @ (s * p)) + lam * w + b
        hess = (Z.T * (p * (1 - p))) @ Z + lam * np.eye(Z.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.linalg.norm(step)) <= 1e-12 * (1.0 + float(np.linalg.norm(w))):
            break
    return w


class LogisticRegression(ClassifierMixin, PrivateEstimator):  # type: ignore[misc]
    """Logistic regression with differential privacy (binary, or one-vs-rest for K classes).

    ``method="objective"`` (default): objective perturbation (Chaudhuri, Monteleoni & Sarwate
    2011; Kifer, Smith & Thakurta 2012) — a random linear term is added to the regularised
    objective, which is then minimised exactly (Newton's method). ε-DP.
    ``method="dpsgd"``: noisy gradient descent, DP-SGD (Abadi et al. 2016) with Poisson
    subsampling, per-record clipping and exact Gaussian noise; (ε, δ)-DP. Its sampling rate
    ``batch_size / n_samples`` and number of steps ``epochs · n_samples / batch_size`` come from
    ``n_samples``, a *public* dataset size the user declares (required for DP-SGD): under
    add/remove neighbours the number of records is private, and reading it would make the
    mechanism (its q, its number of steps, its step size) depend on the data.

    The lecture notes "Differential Privacy" (on machine learning): "learning with differential
    privacy is, in practice, a form of regularization".

    Privacy guarantee: ε-DP (objective) or (ε, δ)-DP (dpsgd) under add/remove of one record.
    Features are clipped to ℓ2 norm ``data_norm``; records whose label is not among ``classes``
    are dropped. With K > 2
    classes the K one-vs-rest problems each use ε/K (one record is in all of them).

    Parameters
    ----------
    epsilon : float
        Required.
    delta : float
        Required for ``method="dpsgd"``.
    data_norm : float
        Required bound on each record's feature norm.
    classes : sequence
        Required list of every label (all numbers or all strings): a public parameter, never
        read from the data. A record whose label is not among them is dropped (as if absent;
        the sensitivity covers it), never refused, so no error can reveal a record's label.
    C : float
        Inverse regularisation as in scikit-learn: objective ``½‖w‖² + C Σ loss``; objective
        perturbation raises the ridge further when ε requires it.
    method : {"objective", "dpsgd"}
    fit_intercept : bool
        Learn an intercept (through a constant feature equal to ``data_norm``).
    n_samples : int
        DP-SGD only, required: a public (declared, not measured) size of the training set,
        e.g. the planned or approximate size; it sets q = batch_size / n_samples, the number
        of steps and the gradient scaling. It need not equal the true n — privacy holds
        whatever n is; accuracy is best when it is close.
    epochs, batch_size, learning_rate, clip_norm : DP-SGD settings
        ``steps = epochs · n_samples / batch_size``; ``clip_norm`` defaults to the augmented
        data norm.
    accounting : {"rdp", "pld", "auto"}
        How DP-SGD's noise is calibrated (see :func:`dpkit.ml.dpsgd_plan`).
    missing : {"raise", "drop"}
        A training record with a missing value (NaN, or a label None or NaN): ``"raise"`` (default)
        refuses the fit before anything is charged, a refusal that reveals that one exists;
        ``"drop"`` removes the record first (a per-record filter, stable under add/remove
        neighbours). ±inf is not missing: it is clipped with the row to the norm ``data_norm``, like
        any far value.
    accountant, rng :
        As everywhere in dpkit.

    Notes
    -----
    Every attribute of a fitted model is a DP output or a public parameter; :meth:`predict`
    and :meth:`predict_proba` on the training records are per-record answers, not private.

    Attributes
    ----------
    coef_, intercept_ :
        The private model, as in scikit-learn.
    classes_ :
        The declared ``classes``, sorted (public).
    event_ : dpkit.accounting.Event
        What the fit cost.
    coef_noise_ : float
        Objective perturbation: the expected distance ``d / (ε_b Λ) · R`` between the private
        and the non-private minimiser of the same (regularised) objective, per class — the
        noise's effect on the parameters (strong convexity: ‖Δw‖ ≤ ‖b‖/Λ). DP-SGD: the noise σ
        on each step's gradient sum.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.ml import LogisticRegression
    >>> g = np.random.default_rng(1)
    >>> X = g.normal(0, 1, (4000, 3)) / 3
    >>> y = (X @ [3.0, -3.0, 0.0] + g.logistic(0, 0.3, 4000) > 0).astype(int)
    >>> clf = LogisticRegression(epsilon=1.0, data_norm=1.0, classes=[0, 1], rng=0).fit(X, y)
    >>> clf.score(X, y) > 0.8
    True
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        data_norm: float | None = None,
        classes: Any = None,
        C: float = 1.0,
        method: str = "objective",
        fit_intercept: bool = True,
        epochs: int = 20,
        batch_size: int = 64,
        learning_rate: float = 1.0,
        clip_norm: float | None = None,
        accounting: str = "rdp",
        n_samples: int | None = None,
        missing: Missing = MISSING_DEFAULT,
        accountant: Any = None,
        rng: RNGLike = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.classes = classes
        self.C = C
        self.method = method
        self.fit_intercept = fit_intercept
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.clip_norm = clip_norm
        self.accounting = accounting
        self.n_samples = n_samples
        self.missing = missing
        self.accountant = accountant
        self.rng = rng

    def accuracy(self, alpha: float = 0.05, *, n_features: int) -> dict[str, float]:
        """Before fitting, from public parameters only (``method="objective"``): ``coef_shift``,
        a bound on the distance between the private and the non-private minimiser of the same
        regularised objective, for each class's problem, that holds with probability at least
        ``1 − alpha``.

        The objective is ``Λ``-strongly convex (``Λ`` from ``C`` and the privacy calibration,
        data-independent), so the linear term ``bᵀw`` moves its minimiser by at most
        ``‖b‖/Λ``; ``‖b‖`` is Gamma(d, R/ε_b) (d coefficients, the intercept's included), and
        its ``1 − alpha`` quantile gives the bound. DP-SGD has none: its noise passes through
        every step of a run whose path depends on the data.

        >>> from dpkit.ml import LogisticRegression
        >>> m = LogisticRegression(epsilon=1.0, data_norm=1.0, classes=[0, 1])
        >>> round(m.accuracy(n_features=3)["coef_shift"], 3)
        18.444
        """
        if self.method != "objective":
            raise PrivacyParameterError(
                "accuracy before fitting is given for method='objective' only: DP-SGD's noise "
                "goes through a data-dependent optimisation path."
            )
        eps, _ = check_privacy(self.epsilon, self.delta, needs_delta=False)
        norm = check_norm(self.data_norm, "data_norm")
        classes = check_classes(self.classes)
        ridge = 1.0 / check_norm(self.C, "C")
        d = check_int(n_features, "n_features") + (1 if self.fit_intercept else 0)
        radius = math.nextafter(norm * (math.sqrt(2.0) if self.fit_intercept else 1.0), math.inf)
        k = 1 if classes.size == 2 else classes.size
        lam, eps_b = objective_perturbation_noise(epsilon=eps / k, radius=radius, ridge=ridge)
        a = check_alpha(alpha)
        return {"coef_shift": float(special.gammaincinv(d, 1.0 - a)) * radius / eps_b / lam}

    def fit(self, X: object, y: object) -> LogisticRegression:
        """Fit privately; charges the accountant once. Returns ``self``."""
        if self.method not in ("objective", "dpsgd"):
            raise PrivacyParameterError("method must be 'objective' or 'dpsgd'.")
        dpsgd = self.method == "dpsgd"
        eps, dlt = check_privacy(self.epsilon, self.delta, needs_delta=dpsgd)
        norm = check_norm(self.data_norm, "data_norm")
        classes = check_classes(self.classes)
        ridge = 1.0 / check_norm(self.C, "C")
        if dpsgd:
            if self.n_samples is None:
                raise PrivacyParameterError(
                    "n_samples is required for method='dpsgd': DP-SGD's sampling rate "
                    "batch_size/n_samples and its number of steps must not depend on the "
                    "private number of records; declare a public (approximate) size."
                )
            n = check_int(self.n_samples, "n_samples")
            batch = check_int(self.batch_size, "batch_size")
            epochs = check_int(self.epochs, "epochs")
            rate = check_positive(self.learning_rate, "learning_rate")
        Xc, yc = check_xy(self, X, y, self._check_missing())
        # a record whose label is not a declared class is dropped, never refused
        keep, labels = encode_labels(yc, classes)
        Z = clip_rows(Xc[keep], norm)
        if self.fit_intercept:
            Z = np.hstack([Z, np.full((Z.shape[0], 1), norm)])
        radius = math.nextafter(norm * (math.sqrt(2.0) if self.fit_intercept else 1.0), math.inf)
        k = 1 if classes.size == 2 else classes.size
        d = Z.shape[1]
        gen = self._generator()
        targets = [labels == 1] if k == 1 else [labels == j for j in range(k)]

        weights: list[FloatArray] = []
        if not dpsgd:
            lam, eps_b = objective_perturbation_noise(epsilon=eps / k, radius=radius, ridge=ridge)
            event: Event = compose_events([PureDPEvent(epsilon=eps / k)] * k)
            event = charge_fit(self, event, 0.0, "LogisticRegression.fit (objective perturbation)")
            for t in targets:
                b = _l2_laplace(d, radius / eps_b, gen)
                weights.append(_newton(Z, np.where(t, 1.0, -1.0), lam, b))
            self.coef_noise_ = d * radius / (eps_b * lam)
        else:
            clip = radius if self.clip_norm is None else check_norm(self.clip_norm, "clip_norm")
            q = min(1.0, batch / n)
            steps = max(1, round(epochs / q))
            plan = dpsgd_plan(
                epsilon=eps / k,
                delta=dlt / k,
                clip_norm=clip,
                dimension=d,
                sample_rate=q,
                steps=steps,
                accounting=self.accounting,
            )
            event = compose_events([plan.event] * k)
            event = charge_fit(self, event, dlt, "LogisticRegression.fit (DP-SGD)")
            for t in targets:
                w = run_dpsgd(
                    Z, t.astype(np.float64), loss="logistic", plan=plan,
                    learning_rate=rate, l2=ridge / n, n_scale=float(n), gen=gen,
                )  # fmt: skip
                weights.append(w)
            self.coef_noise_ = plan.sigma

        W = np.vstack(weights)
        if self.fit_intercept:
            self.coef_, self.intercept_ = W[:, :-1], W[:, -1] * norm
        else:
            self.coef_, self.intercept_ = W, np.zeros(k)
        self.classes_ = classes
        self.event_ = event
        return self

    def decision_function(self, X: object) -> FloatArray:
        """Signed scores (one column per class, or one for a binary problem)."""
        check_is_fitted(self)
        Xc = self._check_features(X, reset=False)
        scores: FloatArray = Xc @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict_proba(self, X: object) -> FloatArray:
        """Class probabilities (one-vs-rest scores normalised for K > 2)."""
        s = self.decision_function(X)
        if s.ndim == 1:
            p1 = 0.5 * (1 + np.tanh(s / 2))
            out: FloatArray = np.column_stack([1 - p1, p1])
            return out
        p = 0.5 * (1 + np.tanh(s / 2))
        total = p.sum(axis=1, keepdims=True)
        out = np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / p.shape[1])
        return out

    def predict(self, X: object) -> Any:
        """Most likely class."""
        s = self.decision_function(X)
        idx = (s > 0).astype(np.intp) if s.ndim == 1 else np.argmax(s, axis=1)
        return self.classes_[idx]
