"""The smallest privacy budget that meets an accuracy target, found before anything is spent.

Every release in dpkit knows, from its public parameters alone, the half-width of its noise
interval (``accuracy(alpha)``: :mod:`dpkit.mechanisms`, :func:`dpkit.stats.accuracy`, a frame
query's ``explain(...).accuracy()``). That half-width only shrinks as ε (or ρ) grows, so the
smallest budget that meets a target is found by bisection on the very function the release uses:
the planned budget meets the target exactly as the release will compute it, and any budget a
relative 1e-7 below it does not. Planning reads no data and charges nothing.

>>> from dpkit import plan
>>> eps = plan.epsilon_for("mean", bounds=(0, 100), n=1000, half_width=0.5)
>>> round(eps, 4)
0.2996
>>> import dpkit.stats as st
>>> st.accuracy("mean", bounds=(0, 100), n=1000, epsilon=eps) <= 0.5
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from dpkit._checks import check_delta
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace
from dpkit.mechanisms._tails import check_alpha
from dpkit.stats import accuracy
from dpkit.stats._accuracy import STATISTICS
from dpkit.stats._events import Neighbouring

__all__ = ["MECHANISMS", "epsilon_for", "epsilon_for_mechanism", "epsilon_for_query", "rho_for",
           "rho_for_query", "smallest"]  # fmt: skip

MECHANISMS = ("discrete_gaussian", "gaussian", "geometric", "laplace")

_LOWEST = 2.0**-40  # below this ε no dpkit noise can be sampled exactly
_HIGHEST = 2.0**20
_TOLERANCE = 1e-7


def _target(half_width: float | None, relative: float | None, scale: float | None) -> float:
    """The half-width asked for: given, or ``relative · |scale|`` at a stated public scale."""
    if (half_width is None) == (relative is None):
        raise PrivacyParameterError(
            "give either half_width= or relative= (with scale=, a public value of the statistic)."
        )
    if half_width is not None:
        h = float(half_width)
    else:
        if scale is None:
            raise PrivacyParameterError(
                "relative= needs scale=: a public value of the statistic (never the data's)."
            )
        h = float(relative) * abs(float(scale))  # type: ignore[arg-type]
    if not (math.isfinite(h) and h > 0):
        raise PrivacyParameterError("the target half-width must be a finite positive number.")
    return h


def smallest(
    accuracy_at: Callable[[float], float], *, half_width: float, name: str = "epsilon"
) -> float:
    """The smallest budget ``p`` with ``accuracy_at(p) ≤ half_width`` (to a relative 1e-7).

    ``accuracy_at`` must shrink (weakly) as ``p`` grows, as every dpkit noise half-width does; a
    budget it refuses (too small to sample, :class:`~dpkit.errors.PrivacyParameterError`)
    counts as not meeting the target.

    >>> from dpkit.mechanisms import Laplace
    >>> eps = smallest(lambda e: Laplace(epsilon=e).accuracy(0.05), half_width=3.0)
    >>> Laplace(epsilon=eps).accuracy(0.05) <= 3.0 < Laplace(epsilon=eps * 0.999).accuracy(0.05)
    True
    """
    target = _target(half_width, None, None)

    def meets(p: float) -> bool:
        try:
            return accuracy_at(p) <= target
        except PrivacyParameterError:
            return False

    # At p = 1 every dpkit noise can be sampled: an error there is about the other parameters
    # (missing bounds, an unknown statistic) and is raised as it is, not taken for "too small".
    # Noise half-widths fall about as 1/ε, so the first guess is close and the bracket narrow
    # (each evaluation may calibrate a Gaussian: few of them).
    guess = min(max(accuracy_at(1.0) / target, _LOWEST), _HIGHEST)
    lo, hi, step = guess, guess, 1.05
    if meets(hi):
        while True:
            lo = max(hi / step, _LOWEST)
            if lo <= _LOWEST and meets(lo):
                return lo
            if not meets(lo):
                break
            hi, step = lo, step * step
    else:
        while True:
            lo, hi = hi, hi * step
            if hi > _HIGHEST:
                raise PrivacyParameterError(
                    f"no {name} up to {_HIGHEST:g} reaches this half-width: the target is below "
                    "what the output grid (or the bounds) allows; ask for a wider one."
                )
            if meets(hi):
                break
            step = step * step
    while hi > lo * (1.0 + _TOLERANCE):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi


def epsilon_for(
    statistic: str,
    *,
    half_width: float | None = None,
    relative: float | None = None,
    scale: float | None = None,
    alpha: float = 0.05,
    delta: float = 0.0,
    bounds: tuple[float, float] | None = None,
    n: int | None = None,
    expected_n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> float:
    """The smallest ε with which :mod:`dpkit.stats`' ``statistic`` meets the target.

    Parameters are those of :func:`dpkit.stats.accuracy`, plus the target: ``half_width`` (in
    the statistic's units) or ``relative`` error at a stated public ``scale`` (e.g. 1% of an
    expected count of 5000). With ``delta > 0`` the noise is Gaussian and δ is kept fixed.

    >>> round(epsilon_for("count", relative=0.01, scale=5000), 4)
    0.06
    """
    a = check_alpha(alpha)
    target = _target(half_width, relative, scale)
    d = check_delta(delta)

    def at(eps: float) -> float:
        return accuracy(statistic, epsilon=eps, delta=d, bounds=bounds, n=n,
                        expected_n=expected_n, neighbouring=neighbouring, alpha=a)  # fmt: skip

    return smallest(at, half_width=target)


def _mechanism(kind: str, sensitivity: float, **budget: float) -> Any:
    if kind not in MECHANISMS:
        raise PrivacyParameterError(f"mechanism must be one of {MECHANISMS}.")
    cls = {"laplace": Laplace, "gaussian": Gaussian, "geometric": Geometric,
           "discrete_gaussian": DiscreteGaussian}[kind]  # fmt: skip
    return cls(sensitivity=sensitivity, **budget)


def epsilon_for_mechanism(
    mechanism: str,
    *,
    sensitivity: float = 1.0,
    half_width: float | None = None,
    relative: float | None = None,
    scale: float | None = None,
    alpha: float = 0.05,
    delta: float = 0.0,
) -> float:
    """The smallest ε (at the given δ for the Gaussian ones) with which a :mod:`dpkit.mechanisms`
    additive mechanism's noise meets the target.

    >>> round(epsilon_for_mechanism("laplace", sensitivity=1.0, half_width=3.0), 4)
    0.9986
    """
    a = check_alpha(alpha)
    target = _target(half_width, relative, scale)
    gaussian = mechanism in ("gaussian", "discrete_gaussian")
    if gaussian and delta <= 0:
        raise PrivacyParameterError(f"{mechanism} needs delta > 0 (or plan rho with rho_for).")
    extra = {"delta": delta} if gaussian else {}
    return smallest(
        lambda e: float(_mechanism(mechanism, sensitivity, epsilon=e, **extra).accuracy(a)),
        half_width=target,
    )


def rho_for(
    what: str = "gaussian",
    *,
    sensitivity: float = 1.0,
    half_width: float | None = None,
    relative: float | None = None,
    scale: float | None = None,
    alpha: float = 0.05,
    bounds: tuple[float, float] | None = None,
    n: int | None = None,
    expected_n: int | None = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> float:
    """The smallest zero-concentrated budget ρ with which a Gaussian mechanism's noise (``what``
    ``"gaussian"`` or ``"discrete_gaussian"``, with ``sensitivity``) or a statistic's (``what``
    one of :data:`dpkit.stats._accuracy.STATISTICS`, with ``bounds``, ``n``…) meets the target.
    Releases take it as ``rho=`` and a :class:`~dpkit.accounting.ZCDP` accountant pays it in ρ.

    >>> rho = rho_for("gaussian", sensitivity=1.0, half_width=4.0)
    >>> round(rho, 4)
    0.12
    >>> round(rho_for("count", half_width=4.0), 4)   # the discrete Gaussian count
    0.0934
    """
    a = check_alpha(alpha)
    target = _target(half_width, relative, scale)
    if what in STATISTICS:

        def at(r: float) -> float:
            return accuracy(what, rho=r, bounds=bounds, n=n, expected_n=expected_n,
                            neighbouring=neighbouring, alpha=a)  # fmt: skip

        return smallest(at, half_width=target, name="rho")
    if what not in ("gaussian", "discrete_gaussian"):
        raise PrivacyParameterError(
            "rho is planned for 'gaussian', 'discrete_gaussian' or a statistic "
            f"({', '.join(STATISTICS)})."
        )
    return smallest(
        lambda r: float(_mechanism(what, sensitivity, rho=r).accuracy(a)),
        half_width=target,
        name="rho",
    )


def epsilon_for_query(
    query: Any,
    *,
    half_width: float | Mapping[str, float],
    alpha: float = 0.05,
    delta: float = 0.0,
    expected_n: float | None = None,
    keep: tuple[int, float] | None = None,
    **options: Any,
) -> float:
    """The smallest ε with which every targeted cell of a grouped frame query meets its target.

    The query's budget is split over its aggregates (and key selection) exactly as its release
    splits it; ``half_width`` is one target for every cell :meth:`Explanation.accuracy
    <dpkit.frame.Explanation.accuracy>` reports, or a mapping from output column to target.
    ``keep=(c, p)`` also asks, under private key selection, that a key held by ``c`` units be
    released with probability at least ``p``. ``options`` are passed to ``query.explain``
    (``noise``, ``selection``, ``selection_share``). δ is kept fixed.
    """
    d = check_delta(delta)
    return _for_query(query, lambda e: {"epsilon": e, "delta": d, **options}, half_width,
                      alpha, expected_n, "epsilon", keep)  # fmt: skip


def rho_for_query(
    query: Any,
    *,
    half_width: float | Mapping[str, float],
    alpha: float = 0.05,
    expected_n: float | None = None,
) -> float:
    """The smallest zCDP budget ρ with which every targeted cell of a grouped frame query over
    public keys meets its target (``query.release(rho=...)``, Gaussian noise); as
    :func:`epsilon_for_query` otherwise."""
    return _for_query(query, lambda r: {"rho": r}, half_width, alpha, expected_n, "rho")


def _for_query(
    query: Any,
    budget: Callable[[float], dict[str, Any]],
    half_width: float | Mapping[str, float],
    alpha: float,
    expected_n: float | None,
    name: str,
    keep: tuple[int, float] | None = None,
) -> float:
    a = check_alpha(alpha)
    if keep is not None and not (0.0 < float(keep[1]) < 1.0 and int(keep[0]) >= 1):
        raise PrivacyParameterError("keep must be (units >= 1, probability in (0, 1)).")
    targets = half_width if isinstance(half_width, Mapping) else None
    if targets is not None:
        # each column's target is checked as the single one is: a negative one would be "met"
        # by every cell (cell / target ≤ 1) and return the smallest ε; NaN never, searching to
        # the largest; 0 divides by zero
        if not targets:
            raise PrivacyParameterError("give at least one target half-width.")
        targets = {k: _target(v, None, None) for k, v in targets.items()}
    flat = None if targets is not None else _target(float(half_width), None, None)  # type: ignore[arg-type]

    def worst(p: float) -> float:
        explained = query.explain(**budget(p))
        cells = explained.accuracy(a, expected_n=expected_n)
        kept = 0.0
        if keep is not None:  # ≤ 1 exactly when the key is kept often enough
            chance = explained.keep_probability(int(keep[0]))
            kept = float(keep[1]) / max(chance, 1e-300)
        return max(_cells(cells), kept * (1.0 if flat is None else flat))

    def _cells(cells: dict[str, float]) -> float:
        if targets is None:
            if not cells:
                raise DPKitError("this query has no cell whose accuracy is known before release.")
            return float(max(cells.values()))
        missing = [k for k in targets if k not in cells]
        if missing:
            raise DPKitError(
                f"{len(missing)} targeted column(s) have no accuracy before release; this "
                f"query's are {len(cells)}: see explain(...).accuracy()."
            )
        # scaled so that meeting 1 means every cell meets its own target
        return float(max(cells[k] / float(targets[k]) for k in targets))

    if targets is None:
        assert flat is not None
        return smallest(worst, half_width=flat, name=name)
    return smallest(worst, half_width=1.0, name=name)
