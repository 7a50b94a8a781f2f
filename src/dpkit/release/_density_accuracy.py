"""How accurate a histogram density's cells will be, before anything is spent."""

from __future__ import annotations

from dpkit.accounting import Neighbouring
from dpkit.mechanisms._tails import (
    check_alpha,
    discrete_gaussian_quantile,
    discrete_laplace_quantile,
)
from dpkit.release._density_noise import split_count
from dpkit.release._histogram_density import cell_noise
from dpkit.stats._common import check_privacy
from dpkit.stats._data import check_n
from dpkit.stats._events import is_replace

__all__ = ["histogram_density_accuracy"]


def histogram_density_accuracy(
    *,
    epsilon: float,
    delta: float = 0.0,
    n: int | None = None,
    bins: object = None,
    count_fraction: float = 0.1,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    alpha: float = 0.05,
) -> float:
    """Half-width of the ``1 − alpha`` interval of every cell's noisy count (``raw``) of a
    :func:`~dpkit.release.histogram_density` release, from public parameters only.

    The same budget split (the noisy count's share when ``n`` is private and ``bins`` not
    given) and the same exact noise as the release: each released ``raw`` count is within this
    of the cell's exact count with probability at least ``1 − alpha``. The density's
    probabilities are post-processing of those counts (thresholded, projected, normalised);
    their error also depends on the data and is not given here. Charges nothing.

    Examples
    --------
    >>> from dpkit.release import histogram_density_accuracy
    >>> histogram_density_accuracy(epsilon=0.5, bins=20)
    6.0
    >>> histogram_density_accuracy(epsilon=0.5)  # 10% of epsilon buys the count that picks bins
    7.0
    """
    a = check_alpha(alpha)
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    public_n = check_n(n)
    _, eps_h = split_count(epsilon=eps, public_n=public_n, replace=replace,
                           needs_n=bins is None, fraction=count_fraction)  # fmt: skip
    scale, _ = cell_noise(eps_h, dlt, replace)
    if dlt == 0.0:
        return float(discrete_laplace_quantile(float(scale), a))
    return float(discrete_gaussian_quantile(float(scale), a))
