"""Private domain discovery: bin edges and category lists estimated under DP, and paid for.

Smartnoise-sdk#473 is what happens otherwise: bin edges read from the data leak the extremes.
Here a numeric column still needs public outer bounds [lo, hi] (nothing can be said privately
about an unbounded range without them), but its inner edges are private quantiles
(:func:`dpkit.stats.quantile`, the exponential mechanism over sorted intervals, Smith 2011); and a
categorical column's categories are found by *partition selection*: a category is kept when
its count plus discrete Laplace noise clears a threshold set so that a category held by a single
record survives with probability at most δ (Korolova, Kenthapadi, Mishra & Ntoulas 2009;
Wilson et al. 2020, §3). Each record contributes to one category, so the noisy counts are
ε-DP and the release of the key set is (ε, δ)-DP under add/remove neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit._checks import check_delta, check_epsilon
from dpkit.accounting import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    Neighbouring,
    SelfComposedEvent,
)
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.noise import discrete_laplace
from dpkit.random import RNGLike, as_generator
from dpkit.release._domain import Categorical, Column, Domain, Numeric, table_columns
from dpkit.stats import quantile
from dpkit.stats._events import exponential_event
from dpkit.stats._quantile import quantile_grid

__all__ = ["discover_domain", "partition_threshold"]


def partition_threshold(epsilon: float, delta: float) -> int:
    """Smallest integer τ with P(1 + Z ≥ τ) ≤ δ for Z discrete Laplace of scale 1/ε.

    P(Z ≥ k) = e^{−kε}/(1 + e^{−ε}) for k ≥ 1, so τ = 1 + ⌈(ln(1/δ) − ln(1 + e^{−ε}))/ε⌉.

    Examples
    --------
    >>> partition_threshold(1.0, 1e-6)
    15
    """
    k = math.ceil((math.log(1 / delta) - math.log1p(math.exp(-epsilon))) / epsilon)
    return 1 + max(k, 1)


def discover_domain(
    data: object,
    *,
    numeric: Mapping[str, tuple[float, float]] | None = None,
    categorical: Sequence[str] = (),
    epsilon: float,
    delta: float,
    bins: int = 8,
    known: Mapping[str, Column] | None = None,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
    other: Any = "other",
) -> Domain:
    """Estimate a :class:`Domain` privately: quantile bins and partition-selected categories.

    Parameters
    ----------
    data : DataFrame, mapping or structured array
        The private table.
    numeric : mapping of column to (lo, hi)
        Numeric columns with their public outer bounds; inner bin edges are private quantiles.
    categorical : sequence of str
        Categorical columns whose categories are unknown.
    epsilon, delta : float
        Total privacy of the discovery, split evenly over the columns; each numeric column
        costs ε_c (pure), each categorical column (ε_c, δ_c) with δ_c = δ / (number of
        categorical columns).
    bins : int
        Bins per numeric column (``bins − 1`` private quantiles).
    known : mapping of column to Numeric/Categorical, optional
        Columns already public; included as given, free.
    accountant, rng :
        As everywhere; the whole discovery is charged once, before any noise.
    neighbouring :
        Add/remove only: partition selection relies on one record touching one category.
    other : object
        A catch-all category appended to every discovered list; values whose category was not
        selected are encoded as it (see :class:`Categorical`).

    Returns
    -------
    Domain
        Columns in the order: known, numeric, categorical. Categories are sorted by their text,
        so their order says nothing about their counts. Duplicate private quantiles are merged.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.release import discover_domain
    >>> gen = np.random.default_rng(0)
    >>> data = {"x": gen.normal(50, 10, 5000), "c": gen.choice(["a", "b", "rare"], 5000,
    ...         p=[0.6, 0.3999, 0.0001])}
    >>> dom = discover_domain(data, numeric={"x": (0, 100)}, categorical=["c"],
    ...                       epsilon=1.0, delta=1e-6, bins=4, rng=1)
    >>> dom.columns["c"].categories
    ('a', 'b', 'other')
    >>> dom.columns["x"].bins
    4
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta, allow_zero=False)
    if neighbouring is not Neighbouring.ADD_REMOVE:
        raise PrivacyParameterError(
            "discover_domain supports add/remove neighbours only (partition selection's "
            "threshold assumes one record touches one category)."
        )
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise DataError(f"bins must be an integer of at least 2, got {bins!r}.")
    num = dict(numeric or {})
    cats = list(categorical)
    fixed = dict(known or {})
    names = list(fixed) + list(num) + cats
    if len(set(names)) != len(names):
        raise DataError("a column is listed twice among known, numeric and categorical.")
    if not num and not cats:
        raise DataError("nothing to discover: give numeric= or categorical= columns.")
    cols = table_columns(data, names, allow_extra=True)  # other columns are simply not read
    eps_c = eps / (len(num) + len(cats))
    delta_c = dlt / len(cats) if cats else 0.0
    bounds: dict[str, tuple[float, float]] = {}
    for k, b in num.items():
        if not isinstance(b, tuple | list) or len(b) != 2:
            raise DataError(f"numeric={{{k!r}: ...}} must be a pair (lo, hi).")
        ref = Numeric(b[0], b[1], bins=1)
        bounds[k] = (ref.lo, ref.hi)
        x = np.asarray(cols[k], dtype=object)
        if any(v is None for v in x.tolist()):
            raise DataError(f"column {k!r} has None values; clean them first.")
        try:
            xf = x.astype(np.float64)
        except (TypeError, ValueError):
            # numpy's message would quote the offending (private) value
            raise DataError(f"column {k!r} must be numeric.") from None
        ref.encode(xf, k)  # refuses NaN and infinities before the charge
    for k in cats:
        vals = np.asarray(cols[k], dtype=object).tolist()
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals):
            raise DataError(f"column {k!r} has None or NaN values; clean them first.")
        if not all(_hashable(v) for v in vals):
            raise DataError(f"column {k!r} has values that cannot be categories (lists, ...).")
    if cats:
        Categorical((other,), other=other)  # a bad catch-all is refused now, not after the charge
    # Exactly what dpkit.stats.quantile draws: bins − 1 selections at ε_c/(bins − 1) each.
    one_q = exponential_event(epsilon=eps_c / (bins - 1) * (1.0 - 2.0**-40))
    events: list[Event] = [SelfComposedEvent(one_q, count=bins - 1) for _ in num]  # type: ignore[arg-type]
    events += [ApproxDPEvent(epsilon=eps_c, delta=delta_c) for _ in cats]
    charge(accountant, ComposedEvent(events=tuple(events)), "domain discovery", delta=dlt, rng=rng)
    gen = as_generator(rng)
    out: dict[str, Column] = dict(fixed)
    for k in num:
        lo, hi = bounds[k]
        qs = [i / bins for i in range(1, bins)]
        x = np.asarray(cols[k], dtype=np.float64)
        if x.size:
            inner = np.asarray(quantile(x, qs, bounds=(lo, hi), epsilon=eps_c, rng=gen).value)
        else:
            inner = _uniform_on_grid(lo, hi, len(qs), gen)
        edges = np.unique(np.concatenate([[lo], np.clip(inner, lo, hi), [hi]]))
        out[k] = Numeric(lo, hi, edges=tuple(float(e) for e in edges))
    for k in cats:
        out[k] = Categorical(_select_partitions(cols[k], eps_c, delta_c, gen, other), other=other)
    return Domain(out)


def _uniform_on_grid(lo: float, hi: float, m: int, gen: np.random.Generator) -> np.ndarray:
    """What the exponential mechanism of :func:`dpkit.stats.quantile` outputs on no records:
    every point of its grid scores the same, so each quantile is uniform on the grid."""
    g = quantile_grid(lo, hi)
    a, b = math.ceil(math.ldexp(lo, -g)), math.floor(math.ldexp(hi, -g))
    return np.sort(np.ldexp(gen.integers(a, b + 1, size=m).astype(np.float64), g))


def _hashable(v: object) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _select_partitions(
    values: Any, epsilon: float, delta: float, gen: np.random.Generator, other: Any
) -> tuple[Any, ...]:
    # Counted by text in plain Python, so no value (a tuple, a mixed object column) can make
    # numpy fail here, after the charge.
    counts: dict[str, int] = {}
    originals: dict[str, Any] = {}
    for v in np.asarray(values, dtype=object).tolist():
        t = str(v)
        counts[t] = counts.get(t, 0) + 1
        originals.setdefault(t, v)
    keys = sorted(counts)
    # The scale is the exact rational 1/ε', ε' a hair below ε: the float 1.0/ε can round
    # down (ε = 3, 0.7, ...), which would make the noise ε-plus-a-bit DP. τ follows ε'.
    eps_noise = epsilon * (1.0 - 2.0**-40)
    scale = 1 / Fraction(eps_noise)
    tau = partition_threshold(eps_noise, delta)
    noise = np.asarray(discrete_laplace(scale, size=len(keys), rng=gen))
    kept: dict[Any, None] = {}
    for t, z in zip(keys, noise.tolist(), strict=True):
        # Values that print differently but compare equal (1 and True, 1 and 1.0 in an object
        # column) become one category: Categorical would refuse the duplicate after the charge.
        if counts[t] + int(z) >= tau and originals[t] != other:
            kept.setdefault(originals[t], None)
    # The catch-all is always there, so that no outcome (not even "nothing cleared") needs a
    # refusal after the charge, and unselected values have somewhere to go.
    return (*sorted(kept, key=str), other)
