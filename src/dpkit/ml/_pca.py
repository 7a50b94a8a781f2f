"""Private PCA by Analyze Gauss: the eigenvectors of a noisy second-moment matrix."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import TransformerMixin  # type: ignore[import-untyped]
from sklearn.utils.validation import check_is_fitted  # type: ignore[import-untyped]

from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.mechanisms import Gaussian
from dpkit.ml._base import (
    FloatArray,
    PrivateEstimator,
    charge_fit,
    check_int,
    check_norm,
    check_privacy,
    clip_rows,
    compose_events,
)
from dpkit.random import RNGLike

__all__ = ["PCA"]


def _mechanisms(eps: float, dlt: float, norm: float, d: int, centered: bool) -> list[Gaussian]:
    """Analyze Gauss's mechanisms: the upper triangle of XᵀX, then (centred) the sum and the
    count, from public parameters only."""
    share = 0.8 if centered else 1.0
    m_gram = Gaussian(
        epsilon=eps * share, delta=dlt * share, sensitivity=norm**2, shape=(d * (d + 1) // 2,)
    )
    if not centered:
        return [m_gram]
    m_sum = Gaussian(epsilon=eps * 0.15, delta=dlt * 0.15, sensitivity=norm, shape=(d,))
    m_n = Gaussian(epsilon=eps * 0.05, delta=dlt * 0.05, sensitivity=1.0)
    return [m_gram, m_sum, m_n]


class PCA(TransformerMixin, PrivateEstimator):  # type: ignore[misc]
    """Principal component analysis with (ε, δ)-differential privacy (Analyze Gauss).

    Dwork, Talwar, Thakurta & Zhang (2014), "Analyze Gauss": release ``XᵀX`` plus a symmetric
    matrix of Gaussian noise, then take its top eigenvectors (post-processing). To centre the
    data, the sum of the records and their number are released with Gaussian noise too.

    Privacy guarantee: (ε, δ)-DP under add/remove of one record, with rows clipped to ℓ2 norm
    ``data_norm``: the upper triangle of ``XᵀX`` has ℓ2 sensitivity ``data_norm²`` (half of
    the budget), the sum ``data_norm`` and the count 1 (a quarter each), float-safe Gaussian
    mechanisms charged as one composed event.

    Parameters
    ----------
    n_components : int, optional
        Number of components kept (default: all).
    epsilon, delta : float
        Required.
    data_norm : float
        Required bound on each record's ℓ2 norm.
    centered : bool
        Centre on the private mean (default) or use the uncentred second moment.
    missing : {"raise", "drop"}
        A training record with a missing value (NaN): ``"raise"`` (default) refuses the fit before
        anything is charged, a refusal that reveals that one exists; ``"drop"`` removes the record
        first (a per-record filter, stable under add/remove neighbours). ±inf is not missing: it is
        clipped with the row to the norm ``data_norm``, like any far value.
    accountant, rng :
        As everywhere in dpkit.

    Notes
    -----
    Every attribute of a fitted model is a DP output or a public parameter.

    Attributes
    ----------
    components_, explained_variance_, explained_variance_ratio_, mean_ :
        As in scikit-learn, from the noisy statistics (private).
    n_components_ : int
        ``n_components`` (public), or the number of features.
    event_ : dpkit.accounting.Event
        What the fit cost.
    noise_ : dict
        σ of each noisy entry of XᵀX, of the sum and of the count.
    gram_noise_norm_ : float
        ``2σ√d``: the typical spectral norm of the symmetric noise matrix (Wigner), by which
        eigenvalues of XᵀX move at most (Weyl) — the noise's effect on ``explained_variance_``
        is about this divided by n.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.ml import PCA
    >>> g = np.random.default_rng(0)
    >>> X = g.normal(0, 1, (20_000, 3)) * [1.0, 0.2, 0.1]
    >>> p = PCA(n_components=1, epsilon=1.0, delta=1e-6, data_norm=4.0, rng=0).fit(X)
    >>> round(abs(float(p.components_[0, 0])), 2)
    1.0
    """

    def __init__(
        self,
        n_components: int | None = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        data_norm: float | None = None,
        centered: bool = True,
        missing: Missing = MISSING_DEFAULT,
        accountant: Any = None,
        rng: RNGLike = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.centered = centered
        self.missing = missing
        self.accountant = accountant
        self.rng = rng

    def accuracy(self, alpha: float = 0.05, *, n_features: int) -> dict[str, float]:
        """Before fitting, from public parameters only: the half-width of the ``1 − alpha``
        interval of the noise on each released statistic for data with ``n_features`` features
        (every entry of ``XᵀX`` of the rows clipped to ``data_norm``; centred: every entry of
        their sum, and their count). The components are eigenvectors of the noisy matrix; how
        far they turn depends on the data's eigengaps (private), so no closed form is given.

        >>> from dpkit.ml import PCA
        >>> acc = PCA(epsilon=1.0, delta=1e-6, data_norm=1.0).accuracy(n_features=3)
        >>> sorted(acc)
        ['count', 'gram', 'sum']
        """
        eps, dlt = check_privacy(self.epsilon, self.delta, needs_delta=True)
        norm = check_norm(self.data_norm, "data_norm")
        d = check_int(n_features, "n_features")
        names = ("gram", "sum", "count")
        mechs = _mechanisms(eps, dlt, norm, d, self.centered)
        return {k: m.accuracy(alpha) for k, m in zip(names, mechs, strict=False)}

    def fit(self, X: object, y: object = None) -> PCA:
        """Fit privately; charges the accountant once. Returns ``self``."""
        eps, dlt = check_privacy(self.epsilon, self.delta, needs_delta=True)
        norm = check_norm(self.data_norm, "data_norm")
        Xc = self._fit_features(X)
        d = Xc.shape[1]
        k = d if self.n_components is None else check_int(self.n_components, "n_components")
        if k > d:
            from dpkit.errors import DataError

            raise DataError(f"n_components={k} exceeds the number of features {d}.")
        Z = clip_rows(Xc, norm)
        mechs = _mechanisms(eps, dlt, norm, d, self.centered)
        m_gram = mechs[0]
        if self.centered:
            m_sum, m_n = mechs[1], mechs[2]
        event = compose_events([m.event for m in mechs])
        gen = self._generator()
        event = charge_fit(self, event, dlt, "PCA.fit (Analyze Gauss)")
        iu = np.triu_indices(d)
        upper = np.asarray(m_gram.release((Z.T @ Z)[iu], rng=gen))
        gram = np.zeros((d, d))
        gram[iu] = upper
        gram = gram + np.triu(gram, 1).T
        if self.centered:
            total = np.asarray(m_sum.release(Z.sum(axis=0), rng=gen))
            n = max(float(m_n.release(float(Z.shape[0]), rng=gen)), 1.0)
            mean = total / n
            cov = gram / n - np.outer(mean, mean)
        else:
            n = 1.0
            mean = np.zeros(d)
            cov = gram
        values, vectors = np.linalg.eigh(cov)
        order = np.argsort(values)[::-1][:k]
        comps = vectors[:, order].T
        # the sign convention of scikit-learn: the largest |entry| of each component is positive
        signs = np.sign(comps[np.arange(k), np.argmax(np.abs(comps), axis=1)])
        self.components_ = comps * np.where(signs == 0, 1.0, signs)[:, None]
        self.explained_variance_ = np.maximum(values[order], 0.0)
        total_var = float(np.sum(np.maximum(values, 0.0)))
        self.explained_variance_ratio_ = (
            self.explained_variance_ / total_var if total_var > 0 else np.zeros(k)
        )
        self.mean_ = mean
        self.n_components_ = k
        self.event_ = event
        self.noise_ = {
            "gram": m_gram.sigma,
            "sum": m_sum.sigma if self.centered else 0.0,
            "count": m_n.sigma if self.centered else 0.0,
        }
        self.gram_noise_norm_ = 2 * m_gram.sigma * math.sqrt(d)
        return self

    def transform(self, X: object) -> FloatArray:
        """Project on the private components (post-processing)."""
        check_is_fitted(self)
        Xc = self._check_features(X, reset=False)
        out: FloatArray = (Xc - self.mean_) @ self.components_.T
        return out

    def inverse_transform(self, X: object) -> FloatArray:
        """Map projections back to the feature space."""
        check_is_fitted(self)
        out: FloatArray = np.asarray(X, dtype=np.float64) @ self.components_ + self.mean_
        return out
