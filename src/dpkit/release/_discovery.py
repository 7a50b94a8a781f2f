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
from dpkit._missing import MISSING_DEFAULT, Missing, check_missing, missing_error
from dpkit.accounting import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    Neighbouring,
    SelfComposedEvent,
)
from dpkit.accounting._relation import holding_under
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.noise import discrete_laplace
from dpkit.random import RNGLike, as_generator
from dpkit.release._domain import Categorical, Column, Domain, Numeric, as_floats, table_columns
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
    missing: Missing = MISSING_DEFAULT,
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
    missing : {"raise", "drop"}
        A record with a missing value (NaN or None, or a non-number in a numeric column) in a
        column read: ``"raise"`` (default) refuses before anything is charged, a refusal that
        reveals that the table holds one; ``"drop"`` removes the record first (a per-record
        filter, stable under add/remove neighbours).

    Returns
    -------
    Domain
        Columns in the order: known, numeric, categorical. Categories are sorted by type,
        then value, so their order says nothing about their counts. Duplicate private
        quantiles are merged.

    Notes
    -----
    Categories are counted by type and value together: ``1`` and ``"1"`` are two categories,
    and each released category is rebuilt from its type and text alone (a bool, int, float or
    str; the text, ``str(v)``, of a value of any other type, so convert such columns to str
    first), never taken from the record that happened to come first. Values of other types,
    including unhashable ones such as lists, are counted by their text and never refused.
    Values that compare equal (``True``, ``1`` and ``1.0``) are merged into one category after
    selection. Numeric values beyond the bounds (±inf included) are clamped. Only missing
    values (None, NaN, a non-number in a numeric column) follow ``missing=``.

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
    policy = check_missing(missing)
    cols = table_columns(data, names, allow_extra=True)  # other columns are simply not read
    eps_c = eps / (len(num) + len(cats))
    delta_c = dlt / len(cats) if cats else 0.0
    bounds: dict[str, tuple[float, float]] = {}
    for k, b in num.items():
        if not isinstance(b, tuple | list) or len(b) != 2:
            raise DataError(f"numeric={{{k!r}: ...}} must be a pair (lo, hi).")
        ref = Numeric(b[0], b[1], bins=1)
        bounds[k] = (ref.lo, ref.hi)
    # Every column read is checked for missing values (NaN, None, a non-number in a numeric
    # column) before anything is charged; a record holding one is refused or dropped whole.
    floats = {k: as_floats(cols[k], k) for k in num}
    values = {k: np.asarray(cols[k], dtype=object).tolist() for k in cats}
    size = len(cols[(list(num) + cats)[0]])
    if any(len(cols[k]) != size for k in [*num, *cats]):
        raise DataError("every column must have the same number of records.")
    bad = np.zeros(size, dtype=np.bool_)
    for k in num:
        bad |= np.isnan(floats[k])
    for k in cats:
        bad |= np.fromiter((_is_missing(v) for v in values[k]), dtype=np.bool_, count=size)
    if bad.any():
        if policy == "raise":
            raise missing_error("the table")
        keep = ~bad
        floats = {k: x[keep] for k, x in floats.items()}
        values = {
            k: [v for v, ok in zip(vs, keep.tolist(), strict=True) if ok]
            for k, vs in values.items()
        }
    counts: dict[str, dict[Key, int]] = {}
    for k in cats:
        counts[k] = _count_keys(values[k])  # before the charge: nothing here can fail after it
    if cats:
        Categorical((other,), other=other)  # a bad catch-all is refused now, not after the charge
    # Exactly what dpkit.stats.quantile draws: bins − 1 selections at ε_c/(bins − 1) each.
    one_q = exponential_event(epsilon=eps_c / (bins - 1) * (1.0 - 2.0**-40))
    events: list[Event] = [SelfComposedEvent(one_q, count=bins - 1) for _ in num]  # type: ignore[arg-type]
    events += [ApproxDPEvent(epsilon=eps_c, delta=delta_c) for _ in cats]
    # partition selection's threshold holds under add/remove only (refused otherwise above)
    event = holding_under(ComposedEvent(events=tuple(events)), Neighbouring.ADD_REMOVE)
    charge(accountant, event, "domain discovery", delta=dlt, rng=rng)
    gen = as_generator(rng)
    out: dict[str, Column] = dict(fixed)
    for k in num:
        lo, hi = bounds[k]
        qs = [i / bins for i in range(1, bins)]
        x = np.clip(floats[k], lo, hi)  # ±inf is a value beyond a bound: clamped
        if x.size:
            inner = np.asarray(quantile(x, qs, bounds=(lo, hi), epsilon=eps_c, rng=gen).value)
        else:
            inner = _uniform_on_grid(lo, hi, len(qs), gen)
        edges = np.unique(np.concatenate([[lo], np.clip(inner, lo, hi), [hi]]))
        out[k] = Numeric(lo, hi, edges=tuple(float(e) for e in edges))
    for k in cats:
        out[k] = Categorical(_select_partitions(counts[k], eps_c, delta_c, gen, other), other=other)
    return Domain(out)


def _is_missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _uniform_on_grid(lo: float, hi: float, m: int, gen: np.random.Generator) -> np.ndarray:
    """What the exponential mechanism of :func:`dpkit.stats.quantile` outputs on no records:
    every point of its grid scores the same, so each quantile is uniform on the grid."""
    g = quantile_grid(lo, hi)
    a, b = math.ceil(math.ldexp(lo, -g)), math.floor(math.ldexp(hi, -g))
    return np.sort(np.ldexp(gen.integers(a, b + 1, size=m).astype(np.float64), g))


Key = tuple[str, str]
"""A category's identity: (kind, text). The released category is rebuilt from it alone."""


def _category_key(v: object) -> Key | None:
    """(kind, text) of one value, or None for a value that cannot even be printed.

    Values are grouped by their type and text together, so ``1`` and ``"1"`` are two
    categories, and the released category is a function of the key alone (never the value of
    whichever record came first, which would reveal the order of the records).
    """
    if isinstance(v, np.generic):
        v = v.item()
    kind = type(v)
    try:
        if kind is bool or kind is str:
            return (kind.__name__, str(v))
        if kind is int:
            # hexadecimal: decimal text of a huge int is refused by Python (int_max_str_digits)
            return ("int", hex(v))  # type: ignore[arg-type]
        if kind is float:
            return ("float", float(v).hex())  # type: ignore[arg-type]
        return ("text", str(v))
    except Exception:  # a value whose __str__ fails: no category can hold it
        return None


def _category_value(key: Key) -> Any:
    """The category released for a key: a bool, int, float or str, rebuilt from the text."""
    kind, text = key
    if kind == "bool":
        return text == "True"
    if kind == "int":
        return int(text, 16)
    if kind == "float":
        return float.fromhex(text)
    return text  # str, and the text of any other type


def _order(key: Key) -> tuple[str, Any, str]:
    """Sort order of the categories: by kind, then by value (numbers) or text (the rest); it
    depends only on the keys, so the order says nothing about counts or record order."""
    kind, text = key
    # the text breaks ties (-0.0 and 0.0): a tie left to a stable sort would keep record order
    return (kind, _category_value(key), text) if kind in ("int", "float") else (kind, 0, text)


def _count_keys(values: list[Any]) -> dict[Key, int]:
    """Records per category key, in plain Python (no value can make numpy fail here)."""
    counts: dict[Key, int] = {}
    for v in values:
        key = _category_key(v)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    return counts


def _select_partitions(
    counts: dict[Key, int], epsilon: float, delta: float, gen: np.random.Generator, other: Any
) -> tuple[Any, ...]:
    keys = sorted(counts, key=_order)
    # The scale is the exact rational 1/ε', ε' a hair below ε: the float 1.0/ε can round
    # down (ε = 3, 0.7, ...), which would make the noise ε-plus-a-bit DP. τ follows ε'.
    eps_noise = epsilon * (1.0 - 2.0**-40)
    scale = 1 / Fraction(eps_noise)
    tau = partition_threshold(eps_noise, delta)
    noise = np.asarray(discrete_laplace(scale, size=len(keys), rng=gen))
    kept: dict[Any, None] = {}
    for key, z in zip(keys, noise.tolist(), strict=True):
        value = _category_value(key)
        # Keys whose values compare equal (True, 1 and 1.0) become one category, the first in
        # key order (a function of the selected keys only): Categorical would refuse the
        # duplicate after the charge.
        if counts[key] + int(z) >= tau and value != other:
            kept.setdefault(value, None)
    # The catch-all is always there, so that no outcome (not even "nothing cleared") needs a
    # refusal after the charge, and unselected values have somewhere to go.
    return (*kept, other)
