"""Private covariance and Pearson correlation of two bounded variables (McSherry 2016,
"correlation").

Both variables are clamped to their bounds and mapped to ``u, v ∈ [-1, 1]``; Pearson's r is
unchanged by this affine map. The statistic is then a function of a few exact sums (the count,
``Σu``, ``Σv``, ``Σu²``, ``Σv²``, ``Σuv``), each noised.

Two methods for the correlation:

* ``method="six_sums"``: McSherry's (2016) routine verbatim — six noisy sums with ε/6 each.
* ``method="moments"`` (**default**): the same sufficient statistics, but (i) squares are centred
  (``u² − 1/2`` moves by 1/2 per record instead of 1), (ii) the count is free when n is known or
  under replace-one neighbours, and (iii) the budget is split to minimise the error of r at a
  reference point (means at 1/√3 of the half-range from the centre, variances 1/6; the
  root-mean-square gradient over r ∈ {0, ±1/2, ±0.9})
  rather than evenly; with δ > 0 the sums are released jointly by one Gaussian mechanism on the
  whitened vector. It is the default because its error is lower across the range of r:
  measured at n = 1000, ε = 1 over 200 runs, mean squared error 8.8e-5 vs 2.9e-4 (r ≈ 0),
  1.2e-3 vs 1.9e-3 (r ≈ 0.7) and 1.4e-4 vs 1.8e-4 (McSherry's (2016) chocolate example, r ≈ −0.98).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpkit._missing import Missing, check_missing, drop_pairs
from dpkit.errors import DataError
from dpkit.random import RNGLike
from dpkit.stats._common import (
    SupportsCharge,
    check_privacy,
    gradient_weights,
    int_range,
    normalise,
    range_part,
    release_parts,
    scaled_total,
    warn_large_delta,
)
from dpkit.stats._data import FloatArray, as_vector, check_bounds, check_n, refuse_empty_public
from dpkit.stats._events import Neighbouring, is_replace, relation
from dpkit.stats._noisy import Part, Plan, plan
from dpkit.stats._release import Release

__all__ = ["corr", "cov", "cov_parts", "cov_plan"]

_REF_MEAN = 1.0 / math.sqrt(3.0)
_REF_SECOND = 0.5  # E[u²] at the reference point (variance 1/6)
_REF_CROSS = 1.0 / 3.0 + 0.5 / 6.0  # E[uv] with r = 1/2


def _pair(
    x: object, y: object, bounds: object, missing: object, replace: bool
) -> tuple[FloatArray, FloatArray, tuple[float, float], tuple[float, float]]:
    policy = check_missing(missing, public_size=replace)
    xa, ya = as_vector(x, "x"), as_vector(y, "y")
    if xa.shape != ya.shape:
        raise DataError(f"x and y must have the same length, got {xa.size} and {ya.size}.")
    xa, ya = drop_pairs(xa, ya, policy)  # a record is missing when either value is
    try:
        pair: tuple[object, ...] = tuple(bounds)  # type: ignore[call-overload, arg-type, unused-ignore]
        if len(pair) != 2:
            raise ValueError
    except (TypeError, ValueError):
        raise DataError(
            "bounds must be a pair of pairs ((x_lower, x_upper), (y_lower, y_upper)); "
            f"got {bounds!r}."
        ) from None
    return xa, ya, check_bounds(pair[0], "bounds of x"), check_bounds(pair[1], "bounds of y")


def _sums(
    x: FloatArray,
    y: FloatArray,
    bx: tuple[float, float],
    by: tuple[float, float],
    replace: bool,
    centred: bool,
) -> tuple[dict[str, Part], dict[str, int]]:
    """Parts and exact totals of Σu, Σv, Σu², Σv², Σuv (weights filled in by the caller)."""
    u, ulo, uhi = normalise(x, bx)
    v, vlo, vhi = normalise(y, by)
    mu, mv = max(abs(ulo), abs(uhi)), max(abs(vlo), abs(vhi))
    shift = 0.5 if centred else 0.0
    parts = {
        "su": range_part("Σu", *int_range(ulo, uhi), replace, 1.0),
        "sv": range_part("Σv", *int_range(vlo, vhi), replace, 1.0),
        "suu": range_part("Σu²", *int_range(-shift, mu * mu - shift), replace, 1.0),
        "svv": range_part("Σv²", *int_range(-shift, mv * mv - shift), replace, 1.0),
        "suv": range_part("Σuv", *int_range(-(mu * mv), mu * mv), replace, 1.0),
    }
    totals = {
        "su": scaled_total(u),
        "sv": scaled_total(v),
        "suu": scaled_total(u * u - shift),
        "svv": scaled_total(v * v - shift),
        "suv": scaled_total(u * v),
    }
    return parts, totals


def _with_weight(p: Part, w: float) -> Part:
    return Part(p.name, p.exponent, p.sensitivity, w)


def _cov_estimate(hxy: float, ddof: int) -> Callable[..., Any]:
    def f(cnt: Any, su: Any, sv: Any, suv: Any) -> Any:
        size = np.maximum(cnt, 1.0)
        c = suv / size - (su / size) * (sv / size)
        return hxy * c * size / np.maximum(size - ddof, 1.0)

    return f


def cov_plan(
    parts: dict[str, Part],
    epsilon: float,
    delta: float,
    hxy: float,
    ddof: int,
    *,
    known: bool,
    replace: bool,
) -> Plan:
    """The covariance's calibrated noise on ``Σu, Σv, Σuv`` (and the count unless n is public),
    from public parameters only (the parts of :func:`cov_parts`, the product of the bounds'
    half-ranges ``hxy``, ``ddof``); its event declares the relation ``replace`` (the parts'
    sensitivities were computed for it)."""
    w = gradient_weights(_cov_estimate(hxy, ddof), [1.0, _REF_MEAN, _REF_MEAN, _REF_CROSS])
    use = [
        _with_weight(parts["su"], w[1]),
        _with_weight(parts["sv"], w[2]),
        _with_weight(parts["suv"], w[3]),
    ]
    if not known:
        use.append(Part("count", 0, 1, w[0]))
    return plan(use, epsilon=epsilon, delta=delta, neighbouring=relation(replace))


def cov_parts(bx: tuple[float, float], by: tuple[float, float], replace: bool) -> dict[str, Part]:
    """The parts of :func:`cov` for checked bounds, before any data."""
    empty = np.empty(0)
    return _sums(empty, empty, bx, by, replace, centred=True)[0]


def cov(
    x: object,
    y: object,
    *,
    bounds: tuple[tuple[float, float], tuple[float, float]],
    epsilon: float,
    delta: float = 0.0,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
    ddof: int = 0,
) -> Release:
    """Private covariance of two variables clamped to their bounds.

    Noised sums ``Σu``, ``Σv``, ``Σuv`` (and the count when n is unknown), budget split to
    minimise error at the reference point of the module notes; the estimate is
    ``h_x h_y (Σuv/n − Σu Σv/n²)``, **unbiased** for the covariance of the clamped data when n is
    known (independent noises: ``E[(Σu + Z)(Σv + Z')] = Σu Σv``). ε-DP, or (ε, δ)-DP with δ > 0.

    ``missing="raise"`` (default) refuses a NaN or None before any charge (the refusal reveals
    that one exists); ``missing="drop"`` removes such pairs first (add/remove neighbours).

    Examples
    --------
    >>> import numpy as np, dpkit.stats as st
    >>> g = np.random.default_rng(0)
    >>> x = g.uniform(-1, 1, 20_000); y = x + g.uniform(-1, 1, 20_000)
    >>> c = st.cov(x, y, bounds=((-1, 1), (-2, 2)), epsilon=1.0, rng=1)
    >>> bool(abs(c.value - np.cov(x, y, ddof=0)[0, 1]) < 0.02)
    True
    """
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    xa, ya, bx, by = _pair(x, y, bounds, missing, replace and n is None)
    if replace and n is None:
        refuse_empty_public(int(xa.size), "cov")
    n_pub = check_n(n) or (int(xa.size) if replace else None)
    warn_large_delta(dlt, n_pub)
    parts, totals = _sums(xa, ya, bx, by, replace, centred=True)
    hxy = (bx[1] - bx[0]) / 2 * (by[1] - by[0]) / 2
    f = _cov_estimate(hxy, ddof)
    pl = cov_plan(parts, eps, dlt, hxy, ddof, known=n_pub is not None, replace=replace)
    tot = [totals["su"], totals["sv"], totals["suv"]]
    if n_pub is None:
        tot.append(int(xa.size))
        estimator: Callable[..., Any] = lambda su, sv, suv, cnt: f(cnt, su, sv, suv)  # noqa: E731
    else:
        size = float(n_pub)
        estimator = lambda su, sv, suv: f(size, su, sv, suv)  # noqa: E731
    rel = release_parts(
        pl,
        tot,
        estimator,
        delta=dlt,
        accountant=accountant,
        rng=rng,
        statistic="cov",
        sampling_sd=lambda _v, size: 2.0 * hxy / math.sqrt(size),
        public_n=n_pub,
    )
    return rel


def _pearson(cnt: Any, su: Any, sv: Any, suu: Any, svv: Any, suv: Any, shift: float) -> Any:
    size = np.maximum(cnt, 1.0)
    mu, mv = su / size, sv / size
    cuv = suv / size - mu * mv
    vu = np.maximum(suu / size + shift - mu * mu, 1e-12)
    vv = np.maximum(svv / size + shift - mv * mv, 1e-12)
    return np.clip(cuv / np.sqrt(vu * vv), -1.0, 1.0)


def corr(
    x: object,
    y: object,
    *,
    bounds: tuple[tuple[float, float], tuple[float, float]],
    epsilon: float,
    delta: float = 0.0,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    missing: Missing = "raise",
    method: str = "moments",
) -> Release:
    """Private Pearson correlation of two variables clamped to their bounds.

    ``r = (E[uv] − E[u]E[v]) / ((E[u²] − E[u]²)(E[v²] − E[v]²))^{1/2}`` from noisy sums (McSherry
    2016, the ``ppmcc`` routine), clipped to [-1, 1]. ``method="six_sums"`` is the seed's routine
    (ε/6 for each of six sums); ``method="moments"`` (default) centres the squares and splits
    the budget to minimise the error of r (module notes). ε-DP, or (ε, δ)-DP with δ > 0.

    ``missing="raise"`` (default) refuses a NaN or None before any charge (the refusal reveals
    that one exists); ``missing="drop"`` removes such pairs first (add/remove neighbours).

    Returns
    -------
    Release
        ``ci(alpha)`` covers the noise (a conservative box over the noisy sums). There is no
        sampling-error model: the normal-theory ``(1 − r²)/√n`` under-covers badly for bounded,
        non-normal data (a third of 95% intervals missed in a test with a few corner points), so
        ``include_sampling=True`` raises rather than claim a coverage it does not have.

    Examples
    --------
    >>> import numpy as np, dpkit.stats as st
    >>> g = np.random.default_rng(0)
    >>> x = g.uniform(-1, 1, 20_000); y = x + g.uniform(-1, 1, 20_000)
    >>> r = st.corr(x, y, bounds=((-1, 1), (-2, 2)), epsilon=1.0, rng=1)
    >>> bool(abs(r.value - np.corrcoef(x, y)[0, 1]) < 0.02)
    True
    """
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    if method not in ("moments", "six_sums"):
        raise DataError(f"method must be 'moments' or 'six_sums', got {method!r}.")
    xa, ya, bx, by = _pair(x, y, bounds, missing, replace and n is None)
    if replace and n is None:
        refuse_empty_public(int(xa.size), "corr")
    n_pub = check_n(n) or (int(xa.size) if replace else None)
    warn_large_delta(dlt, n_pub)
    centred = method == "moments"
    shift = 0.5 if centred else 0.0
    parts, totals = _sums(xa, ya, bx, by, replace, centred=centred)
    names = ["su", "sv", "suu", "svv", "suv"]

    def f(cnt: Any, su: Any, sv: Any, suu: Any, svv: Any, suv: Any) -> Any:
        return _pearson(cnt, su, sv, suu, svv, suv, shift)

    if centred:
        # root-mean-square gradient over references with r ∈ {0, ±1/2, ±0.9}
        sq = np.zeros(6)
        for r in (-0.9, -0.5, 0.0, 0.5, 0.9):
            cross = _REF_MEAN**2 + r * (_REF_SECOND - _REF_MEAN**2)
            ref = [1.0, _REF_MEAN, _REF_MEAN, _REF_SECOND - shift, _REF_SECOND - shift, cross]
            sq += np.square(gradient_weights(f, ref))
        w = [float(v) for v in np.sqrt(sq / 5)]
    else:  # equal budgets: weight · sensitivity equal for every part
        w = [1.0] + [1.0 / parts[k].real_sensitivity for k in names]
    use = [_with_weight(parts[k], w[i + 1]) for i, k in enumerate(names)]
    tot = [totals[k] for k in names]
    if n_pub is None:
        use.append(Part("count", 0, 1, w[0]))
        tot.append(int(xa.size))
        estimator: Callable[..., Any] = lambda su, sv, suu, svv, suv, cnt: f(  # noqa: E731
            cnt, su, sv, suu, svv, suv
        )
    else:
        size = float(n_pub)
        estimator = lambda su, sv, suu, svv, suv: f(size, su, sv, suu, svv, suv)  # noqa: E731

    rel = release_parts(
        plan(use, epsilon=eps, delta=dlt, neighbouring=relation(replace)),
        tot,
        estimator,
        delta=dlt,
        accountant=accountant,
        rng=rng,
        statistic="corr",
        limits=(-1.0, 1.0),
        public_n=n_pub,
    )
    return rel
