"""The registry entries for :mod:`dpkit.stats`: count, sum, mean, var, std, cov, corr, quantiles,
histogram. Each reads the request and the public schema only, and runs the library's statistic
(Dwork, McSherry, Nissim & Smith 2006: noise scaled to the sensitivity of a bounded query; McSherry
2016 for each statistic).

Every statistic is run under add/remove-one-row neighbours (the schema's privacy unit is a row),
with the column's public bounds unless the request narrows or widens them (bounds chosen by the
analyst are public too, and never read from the data).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import dpkit.stats as st
from dpkit.accounting._compose import epsilon_of
from dpkit.errors import DataError, DPKitError, PrivacyParameterError
from dpkit.server._numbers import integer, privacy, real
from dpkit.server._registry import Answer, Meter, Prepared, QueryRegistry, check_keys
from dpkit.server._schema import Column, DatasetSchema, Table
from dpkit.stats._aggregate import (
    ClampedSum,
    MeanSteps,
    SumSteps,
    clamped_sum,
    mean_steps,
    sum_steps,
)
from dpkit.stats._histogram import histogram_noise
from dpkit.stats._noisy import Part, plan

__all__ = ["clamped", "stats_registry"]

_PRIVACY = {"epsilon", "delta", "alpha"}
_MAX_BINS = 10_000
_MAX_QUANTILES = 100


def _number(value: object, what: str) -> float:
    return real(value, what)


def _alpha(params: Mapping[str, Any]) -> float:
    return real(
        params.get("alpha", 0.05), "alpha", low=0, high=1, low_open=True, high_open=True,
        hint=", e.g. 0.05 for a 95% interval",
    )  # fmt: skip


def _numeric(schema: DatasetSchema, name: object) -> Column:
    col = schema.column(name)
    if col.bounds is None:
        what = "categorical" if col.type == "category" else f"of type {col.type}"
        raise DataError(f"column {col.name} is {what}; this query needs a numeric column.")
    return col


def _rows_only(prepare: Any) -> Any:
    """These statistics protect one row; on a dataset whose privacy unit is an id column (a
    person may have many rows) they would under-count a person's influence, so they refuse it."""

    def checked(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
        if schema.privacy_unit != "row":
            raise DataError(
                f"dataset {schema.name} has several rows per person (privacy unit "
                f"{schema.privacy_unit}); use the group_by query, which bounds each person's "
                "contribution."
            )
        out: Prepared = prepare(params, schema)
        return out

    return checked


def _bounds(params: Mapping[str, Any], col: Column, key: str = "bounds") -> tuple[float, float]:
    b = params.get(key)
    if b is None:
        assert col.bounds is not None
        return col.bounds
    if not isinstance(b, list) or len(b) != 2:
        raise DataError(f"{key} must be [low, high].")
    lo, hi = _number(b[0], key), _number(b[1], key)
    if not lo < hi:
        raise DataError(f"{key} must satisfy low < high.")
    return lo, hi


def _interval(rel: st.Release, alpha: float) -> tuple[Any, Any] | None:
    """The release's noise interval, or ``None`` where the statistic has none (quantiles)."""
    try:
        lo, hi = rel.ci(alpha)
    except DPKitError:
        return None
    return _jsonable(lo), _jsonable(hi)


def _jsonable(v: Any) -> Any:
    if type(v) is float or type(v) is int:
        return v  # an integral release (a count) stays an integer
    if isinstance(v, np.ndarray) and v.dtype.kind == "i":
        return [int(t) for t in v.ravel()]  # integer counts (a histogram) stay integers
    arr = np.asarray(v, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else [float(t) for t in arr.ravel()]


def _answer(rel: st.Release, alpha: float, labels: tuple[str, ...] | None = None) -> Answer:
    return Answer(_jsonable(rel.value), _interval(rel, alpha), labels)


def _expected_n(params: Mapping[str, Any]) -> int | None:
    """The request's ``expected_n``: a public guess of the number of rows, read only by the dry
    run's accuracy of statistics whose interval depends on the (private) count."""
    if "expected_n" not in params:
        return None
    return integer(params["expected_n"], "expected_n", low=1, high=2**53)


def _privacy(params: Mapping[str, Any], pure: bool = False) -> tuple[float, float, float]:
    eps, dlt = privacy(params, pure=pure)
    return eps, dlt, _alpha(params)


def _rho(params: Mapping[str, Any]) -> float | None:
    """The request's zCDP budget ``rho`` (discrete Gaussian noise), or ``None``.

    With ``rho`` the request gives no ``epsilon``. A budget declared in ρ pays it as ρ (exactly,
    :mod:`._rho`); an (ε, δ) budget pays it as the library's :class:`~dpkit.accounting.Accountant`
    with an (ε, δ) budget pays a ρ release, ``(ε(δ), δ)`` from the exact privacy curve of the
    noise it draws, at the request's ``delta`` > 0 (:func:`_rho_price`; without ``delta`` only
    ρ budgets can pay it).
    """
    if "rho" not in params:
        return None
    if "epsilon" in params:
        raise PrivacyParameterError("give epsilon or rho, not both.")
    return real(params["rho"], "rho", low=0, low_open=True, error=PrivacyParameterError,
                hint=" (ρ > 0, e.g. 0.1)")  # fmt: skip


def _rho_price(params: Mapping[str, Any], event: Any) -> tuple[float, float]:
    """The (ε, δ) a ρ release is charged by (ε, δ) budgets: ε(δ) of its event at the request's
    δ (> 0), a hair above so that the meter's exact recomputation fits; (0, 0) without a δ
    (priced in ρ alone)."""
    if "delta" not in params:
        return 0.0, 0.0
    dlt = real(
        params.get("delta"), "delta", low=0, high=1, low_open=True, high_open=True,
        error=PrivacyParameterError, hint=" (with rho: the δ at which the ledger pays it)",
    )  # fmt: skip
    eps = float(epsilon_of(event, delta=dlt))
    if not math.isfinite(eps):
        raise PrivacyParameterError("this rho has no finite epsilon at this delta.")
    return eps * (1.0 + 1e-9), dlt


def _count(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
    check_keys(params, _PRIVACY | {"rho"})
    r = _rho(params)
    if r is None:
        eps, dlt, alpha = _privacy(params)
        kw: dict[str, Any] = {"epsilon": eps, "delta": dlt}
    else:
        alpha = _alpha(params)
        event = plan([Part("count", 0, 1)], epsilon=0.0, delta=0.0, rho=r).event
        eps, dlt = _rho_price(params, event)
        kw = {"rho": r}
    first = schema.columns[0].name

    def compute(t: Table, rng: Any, meter: Meter) -> Answer:
        rel = st.count(t.columns[first], accountant=meter, rng=rng, **kw)
        return _answer(rel, alpha)

    def accuracy() -> float:
        return st.accuracy("count", alpha=alpha, **kw)

    return Prepared("count", eps, dlt, compute, accuracy=accuracy, rho=r)


def _univariate(fn: Callable[..., st.Release], name: str) -> Any:
    def prepare(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
        check_keys(params, _PRIVACY | {"column", "bounds", "ddof", "expected_n"})
        eps, dlt, alpha = _privacy(params)
        col = _numeric(schema, params.get("column"))
        bounds = _bounds(params, col)
        guess = _expected_n(params)
        kw: dict[str, Any] = {}
        if "ddof" in params:
            kw["ddof"] = integer(params["ddof"], "ddof", low=0, high=1)

        def compute(t: Table, rng: Any, meter: Meter) -> Answer:
            rel = fn(
                t.columns[col.name],
                bounds=bounds,
                epsilon=eps,
                delta=dlt,
                accountant=meter,
                rng=rng,
                **kw,
            )
            return _answer(rel, alpha)

        def accuracy() -> float | None:
            # a worst-case bound over the data, at the public guess of the number of rows
            if guess is None:
                return None
            kw_acc = {"bounds": bounds, "expected_n": guess, "alpha": alpha, **kw}
            w = st.accuracy(name, epsilon=eps, delta=dlt, **kw_acc)
            return w if math.isfinite(w) else None  # the noisy count may vanish: no bound

        return Prepared(name, eps, dlt, compute, accuracy=accuracy)

    return prepare


def clamped(
    table: Table,
    column: str,
    bounds: tuple[float, float],
    key: tuple[str, str, tuple[str, ...]] | None = None,
) -> ClampedSum:
    """The exact clamped sum of a column, computed once per table and bounds (:mod:`._memo`).

    Deterministic and noise-free, so the same aggregate serves every sum and mean on these
    bounds; each answer draws its own noise (:func:`dpkit.stats._aggregate.release_mean`).
    """
    # ``key``: the memo key already made by _clamped_key (once per prepared query, not per answer)
    key = key or _clamped_key(column, bounds)
    return table.memo.get(key, lambda: clamped_sum(table.columns[column], bounds))


def _clamped_key(column: str, bounds: tuple[float, float]) -> tuple[str, str, tuple[str, ...]]:
    # Keyed by the bounds' exact bit patterns: -0.0 == 0.0, and sharing their entry would let
    # one analyst's answer show the sign another analyst chose.
    return ("clamped_sum", column, tuple(float(b).hex() for b in bounds))


def _summed(steps_of: Callable[..., SumSteps | MeanSteps], name: str) -> Any:
    """``sum`` and ``mean``: the library's release steps on the column's memoised exact sum.

    The steps (grid, budget split, calibrated noise: public) are made once per prepared query,
    and every answer releases the remembered aggregate through them with its own charge and
    noise, exactly as :func:`~dpkit.stats._aggregate.release_sum` and ``release_mean`` do.
    """

    def prepare(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
        check_keys(params, _PRIVACY | {"column", "bounds", "expected_n", "rho"})
        r = _rho(params)
        col = _numeric(schema, params.get("column"))
        bounds = _bounds(params, col)
        guess = _expected_n(params)
        if r is None:
            eps, dlt, alpha = _privacy(params)
            # made at the first computation (the pricing probe), after the registry's own checks
            steps = functools.cache(lambda: steps_of(bounds, eps, dlt))
        else:
            # the event of a ρ release is needed for its price: its steps are made now
            alpha = _alpha(params)
            made = steps_of(bounds, 0.0, 0.0, rho=r)
            eps, dlt = _rho_price(params, made.plan.event)
            steps = functools.cache(lambda: made)
        key = _clamped_key(col.name, bounds)

        def compute(t: Table, rng: Any, meter: Meter) -> Answer:
            agg = clamped(t, col.name, bounds, key)
            return _answer(steps().release(agg, meter, rng), alpha)

        def accuracy() -> float | None:
            steps_made = steps()
            if isinstance(steps_made, SumSteps):
                return steps_made.accuracy(alpha)
            # a mean's interval depends on its noisy count: given at the public guess of it
            return None if guess is None else steps_made.accuracy(alpha, expected_n=guess)

        # Quick once the exact sum is remembered; the first one on new bounds reads the column.
        return Prepared(name, eps, dlt, compute, quick=lambda t: t.memo.peek(key) is not None,
                        accuracy=accuracy, rho=r)  # fmt: skip

    return prepare


def _bivariate(fn: Callable[..., st.Release], name: str) -> Any:
    def prepare(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
        check_keys(params, _PRIVACY | {"columns", "bounds", "expected_n"})
        eps, dlt, alpha = _privacy(params)
        guess = _expected_n(params)
        cols = params.get("columns")
        if not isinstance(cols, list) or len(cols) != 2:
            raise DataError(f"{name} needs columns = [first, second].")
        a, b = _numeric(schema, cols[0]), _numeric(schema, cols[1])
        given = params.get("bounds")
        if given is None:
            bounds = (_bounds({}, a), _bounds({}, b))
        elif isinstance(given, list) and len(given) == 2:
            bounds = (_bounds({"b": given[0]}, a, "b"), _bounds({"b": given[1]}, b, "b"))
        else:
            raise DataError("bounds must be [[low, high], [low, high]], one pair per column.")

        def compute(t: Table, rng: Any, meter: Meter) -> Answer:
            x, y = t.columns[a.name], t.columns[b.name]
            rel = fn(x, y, bounds=bounds, epsilon=eps, delta=dlt, accountant=meter, rng=rng)
            return _answer(rel, alpha)

        def accuracy() -> float | None:
            # cov: a worst-case bound at the guessed number of rows; corr has none (its error
            # depends on the data's private variances)
            if name != "cov" or guess is None:
                return None
            w = st.accuracy("cov", bounds=bounds, epsilon=eps, delta=dlt, expected_n=guess,
                            alpha=alpha)  # fmt: skip
            return w if math.isfinite(w) else None

        return Prepared(name, eps, dlt, compute, accuracy=accuracy)

    return prepare


def _quantiles(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
    check_keys(params, _PRIVACY | {"column", "bounds", "q"})
    eps, _, alpha = _privacy(params, pure=True)
    col = _numeric(schema, params.get("column"))
    bounds = _bounds(params, col)
    q = params.get("q", [0.5])
    if not isinstance(q, list) or not 0 < len(q) <= _MAX_QUANTILES:
        raise DataError(f"q must be a list of 1 to {_MAX_QUANTILES} probabilities.")
    qs = [real(v, "q", low=0, high=1) for v in q]

    def compute(t: Table, rng: Any, meter: Meter) -> Answer:
        rel = st.quantile(
            t.columns[col.name], qs, bounds=bounds, epsilon=eps, accountant=meter, rng=rng
        )
        return _answer(rel, alpha)

    def accuracy() -> dict[str, float]:
        # a rank error, in rows (the exponential mechanism's utility bound), not a value's
        t = st.accuracy("quantile", q=qs, bounds=bounds, epsilon=eps, alpha=alpha)
        return {"rank": t}

    return Prepared("quantiles", eps, 0.0, compute, accuracy=accuracy)


def _histogram(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
    check_keys(params, _PRIVACY | {"column", "bins", "rho"})
    r = _rho(params)
    if r is None:
        eps, dlt, alpha = _privacy(params)
        kw: dict[str, Any] = {"epsilon": eps, "delta": dlt}
    else:
        alpha = _alpha(params)
        eps, dlt = _rho_price(params, histogram_noise(0.0, 0.0, False, r)[1])
        kw = {"rho": r}
    col = schema.column(params.get("column"))
    bins = params.get("bins", 10)
    if col.type == "local":
        raise DataError(
            f"column {col.name} holds local reports; use the local_frequencies query (free)."
        )
    if col.categories is not None:
        if "bins" in params:
            raise DataError("a categorical column's bins are its categories; leave bins out.")
        labels = (*col.categories, "(other)")
        edges: list[float] = [i - 0.5 for i in range(len(labels) + 1)]
    elif isinstance(bins, int) and not isinstance(bins, bool):
        bins = integer(bins, "bins", low=1, high=_MAX_BINS)
        assert col.bounds is not None
        edges = [float(e) for e in np.linspace(col.bounds[0], col.bounds[1], bins + 1)]
        labels = tuple(f"[{lo:g}, {hi:g})" for lo, hi in itertools.pairwise(edges))
    elif isinstance(bins, list) and 2 <= len(bins) <= _MAX_BINS + 1:
        edges = [_number(e, "bins") for e in bins]
        if not all(b > a for a, b in itertools.pairwise(edges)):
            raise DataError("bin edges must be strictly increasing.")
        labels = tuple(f"[{lo:g}, {hi:g})" for lo, hi in itertools.pairwise(edges))
    else:
        raise DataError(f"bins must be a number of bins (1 to {_MAX_BINS}) or a list of edges.")

    def compute(t: Table, rng: Any, meter: Meter) -> Answer:
        x = t.columns[col.name]
        rel = st.histogram(x, bins=edges, accountant=meter, rng=rng, **kw)
        return _answer(rel, alpha, labels)

    def accuracy() -> float:
        return st.accuracy("histogram", alpha=alpha, **kw)

    return Prepared("histogram", eps, dlt, compute, accuracy=accuracy, rho=r)


def stats_registry() -> QueryRegistry:
    """A registry with every :mod:`dpkit.stats` query: the service's default.

    Examples
    --------
    >>> from dpkit.server import stats_registry
    >>> stats_registry().names()
    ['corr', 'count', 'cov', 'histogram', 'mean', 'quantiles', 'std', 'sum', 'var']
    """
    reg = QueryRegistry()
    reg.register("count", _rows_only(_count))
    # Noise on the column's remembered exact sum: answered on the service's event loop.
    reg.register("sum", _rows_only(_summed(sum_steps, "sum")), inline=True)
    reg.register("mean", _rows_only(_summed(mean_steps, "mean")), inline=True)
    for name, fn in (("var", st.var), ("std", st.std)):
        reg.register(name, _rows_only(_univariate(fn, name)))
    reg.register("cov", _rows_only(_bivariate(st.cov, "cov")))
    reg.register("corr", _rows_only(_bivariate(st.corr, "corr")))
    reg.register("quantiles", _rows_only(_quantiles))
    reg.register("histogram", _rows_only(_histogram))
    return reg
