"""Private k-means: Lloyd's iterations on noisy cluster counts and sums (DPLloyd)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import ClusterMixin, TransformerMixin  # type: ignore[import-untyped]
from sklearn.utils.validation import check_is_fitted  # type: ignore[import-untyped]

from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.ml._base import (
    FloatArray,
    PrivateEstimator,
    charge_fit,
    check_box,
    check_int,
    check_privacy,
    compose_events,
)
from dpkit.ml._moments import group_moments_plan
from dpkit.random import RNGLike

__all__ = ["KMeans"]


def _nearest(X: FloatArray, centers: FloatArray) -> npt.NDArray[np.intp]:
    d2 = (
        np.sum(X * X, axis=1)[:, None] - 2 * X @ centers.T + np.sum(centers * centers, axis=1)[None]
    )
    out: npt.NDArray[np.intp] = np.argmin(d2, axis=1)
    return out


def _initial_centers(
    k: int, mid: FloatArray, half: FloatArray, gen: np.random.Generator
) -> FloatArray:
    """Well-spread starting centres that depend on no record: of 64 draws of k points uniform
    in the central half of the box, the one whose closest pair (in box units) is farthest."""
    best, best_gap = mid[None, :].repeat(k, 0), -1.0
    for _ in range(64):
        unit = gen.random((k, mid.size)) - 0.5
        gap = min(
            (float(np.linalg.norm(unit[i] - unit[j])) for i in range(k) for j in range(i)),
            default=0.0,
        )
        if gap > best_gap:
            best, best_gap = mid + unit * half, gap
    return best


class KMeans(ClusterMixin, TransformerMixin, PrivateEstimator):  # type: ignore[misc]
    """k-means clustering with ε-differential privacy (DPLloyd).

    Blum, Dwork, McSherry & Nissim (2005, "SuLQ") and Su et al. (2016, "Differentially private
    k-means clustering"): run a fixed number of Lloyd iterations, each from the noisy size and
    the noisy coordinate sums of every cluster (Laplace, Dwork & Roth 2014), on records clipped to
    ``bounds``. Initial centres are well spread in the central half of the box and depend on no
    record; a cluster whose noisy count is too small for its noisy mean to be informative keeps
    its centre.

    Privacy guarantee: ε-DP under add/remove of one record: ``max_iter`` iterations of
    ε/max_iter each, split between counts and sums (one record is in one cluster).

    Parameters
    ----------
    n_clusters : int
        Number of clusters.
    epsilon : float
        Required.
    bounds : (low, high)
        Required per-feature bounds.
    max_iter : int
        Number of iterations (all are run and paid for: stopping early would depend on data).
        Each costs ε/max_iter, so few iterations are best at small ε (default 2; diffprivlib,
        after Su et al. 2016, also uses 2 to 7).
    missing : {"raise", "drop"}
        A training record with a missing value (NaN): ``"raise"`` (default) refuses the fit before
        anything is charged, a refusal that reveals that one exists; ``"drop"`` removes the record
        first (a per-record filter, stable under add/remove neighbours). ±inf is not missing: it is
        clipped to the bounds, like any far value.
    accountant, rng :
        As everywhere in dpkit.

    Notes
    -----
    Every attribute of a fitted model is a DP output or a public parameter. There is no
    ``labels_``: the cluster of each training record is not a DP output (it holds the number of
    records and each cluster's exact size). Ask for clusters with :meth:`predict` or
    :meth:`fit_predict`; on the training data those answers are *not* private.

    Attributes
    ----------
    cluster_centers_ : numpy.ndarray
        The private centres.
    n_iter_ : int
        ``max_iter`` (every iteration is run: a public number).
    event_ : dpkit.accounting.Event
        What the fit cost.
    noise_ : dict
        Laplace scales of the counts and sums in each iteration.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.ml import KMeans
    >>> g = np.random.default_rng(0)
    >>> X = np.vstack([g.normal(-2, 0.3, (3000, 2)), g.normal(2, 0.3, (3000, 2))])
    >>> km = KMeans(n_clusters=2, epsilon=1.0, bounds=(-4, 4), rng=1).fit(X)
    >>> np.round(np.sort(km.cluster_centers_[:, 0]))
    array([-2.,  2.])
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        epsilon: float | None = None,
        bounds: Any = None,
        max_iter: int = 2,
        missing: Missing = MISSING_DEFAULT,
        accountant: Any = None,
        rng: RNGLike = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.missing = missing
        self.accountant = accountant
        self.rng = rng

    def accuracy(self, alpha: float = 0.05, *, n_features: int) -> dict[str, float]:
        """Before fitting, from public parameters only: the half-width of the ``1 − alpha``
        interval of the Laplace noise, in every iteration, on each cluster's count and on each
        coordinate of its sum of the records centred in the box (ε split evenly over
        ``max_iter`` iterations, then between counts and sums). Each centre is the noisy sum
        over the noisy count; its error depends on the cluster's private size, and the
        assignment of records to centres on the data, so no bound on the centres is given.

        >>> from dpkit.ml import KMeans
        >>> KMeans(3, epsilon=1.0, bounds=(0, 1), max_iter=5).accuracy(n_features=2)["counts"]
        30.0
        """
        eps, _ = check_privacy(self.epsilon, None, needs_delta=False)
        k = check_int(self.n_clusters, "n_clusters")
        iters = check_int(self.max_iter, "max_iter")
        d = check_int(n_features, "n_features")
        low, high = check_box(self.bounds, "bounds", d)
        plan = group_moments_plan(epsilon=eps / iters, low=low, high=high, groups=k, squares=False)
        return {"counts": plan.counts.accuracy(alpha), "sums": plan.sums.accuracy(alpha)}

    def fit(self, X: object, y: object = None) -> KMeans:
        """Fit privately; charges the accountant once. Returns ``self``."""
        eps, _ = check_privacy(self.epsilon, None, needs_delta=False)
        k = check_int(self.n_clusters, "n_clusters")
        iters = check_int(self.max_iter, "max_iter")
        Xc = self._fit_features(X)
        low, high = check_box(self.bounds, "bounds", Xc.shape[1])
        plan = group_moments_plan(epsilon=eps / iters, low=low, high=high, groups=k, squares=False)
        event = compose_events(plan.events * iters)
        gen = self._generator()
        event = charge_fit(self, event, 0.0, "KMeans.fit")
        mid, half = (low + high) / 2, (high - low) / 2
        centers = _initial_centers(k, mid, half, gen)
        clipped = np.clip(Xc, low, high)
        for _ in range(iters):
            groups = _nearest(clipped, centers)
            counts, sums, _sq = plan.release(clipped, groups, k, gen)
            # A cluster whose noisy mean would be mostly noise keeps its centre: the expected
            # |noise| of each mean coordinate, scale/count, must stay within a quarter of the
            # box's half-width (a rule on released values only: post-processing).
            ok = counts * np.min(half) / 4 >= plan.sums.scale
            new = mid + sums / np.maximum(counts, 1.0)[:, None]
            centers = np.where(ok[:, None], np.clip(new, low, high), centers)
        self.cluster_centers_ = centers
        # no labels_: one exact cluster per training record is not a DP output
        self.n_iter_ = iters
        self.event_ = event
        self.noise_ = {"counts": plan.counts.scale, "sums": plan.sums.scale}
        return self

    def fit_predict(self, X: object, y: object = None) -> npt.NDArray[np.intp]:
        """Fit privately, then the nearest private centre of each record of ``X``.

        The fitted model is private; the returned per-record clusters of the training data are
        *not* (they reveal n and each cluster's size): use them only where the records'
        owner may see them. Nothing of them is kept on the model.
        """
        return self.fit(X, y).predict(X)

    def predict(self, X: object) -> npt.NDArray[np.intp]:
        """Index of the nearest private centre (post-processing of the model; applied to
        training records the answer is theirs, not a private release)."""
        check_is_fitted(self)
        return _nearest(self._check_features(X, reset=False), self.cluster_centers_)

    def transform(self, X: object) -> FloatArray:
        """Distances to each private centre."""
        check_is_fitted(self)
        Xc = self._check_features(X, reset=False)
        out: FloatArray = np.linalg.norm(Xc[:, None, :] - self.cluster_centers_[None], axis=2)
        return out

    def score(self, X: object, y: object = None) -> float:
        """Opposite of the sum of squared distances to the nearest centre (as scikit-learn);
        on the training records it is an answer about them, not a private release."""
        d = self.transform(X)
        return -float(np.sum(np.min(d, axis=1) ** 2))
