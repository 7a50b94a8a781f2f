"""A Python client of the curator service that mirrors :mod:`dpkit.stats`.

``Curator(url, key).mean("table", "col", epsilon=0.5)`` sends the query and returns a
:class:`RemoteRelease` with ``.value`` and ``.ci()``, like the library's ``Release``. Refusals
raise the library's exceptions: :class:`~dpkit.errors.BudgetExceededError` when the budget would
be overspent, :class:`~dpkit.errors.PrivacyParameterError` / :class:`~dpkit.errors.DataError` for
bad requests (nothing is charged for any of them).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit.client._errors import (
    AuthenticationError,
    CuratorError,
    NotFoundError,
    PermissionDeniedError,
)
from dpkit.client._results import RemoteFrequencies, RemoteTable, frequencies, table
from dpkit.errors import BudgetExceededError, DataError, PrivacyParameterError

__all__ = ["Curator", "Quote", "RemoteFrequencies", "RemoteRelease", "RemoteTable"]


class Quote(dict[str, Any]):
    """The answer to a ``dry_run=True`` query: its price and, where the service knows it before
    the release, the half-width of the answer's noise interval (``"accuracy"``). A dict (the
    service's JSON) that prints as one line.

    >>> Quote({"epsilon": 0.4, "delta": 0.0, "rho": 0.08,
    ...        "accuracy": {"alpha": 0.05, "half_width": 7.5}})
    Quote(epsilon=0.4, delta=0, rho=0.08, 95% noise interval +/- 7.5)

    ``rho`` is what a budget declared in zCDP is charged (``None``: a δ > 0 price, which such a
    budget refuses); ``epsilon`` is ``None`` for a ρ query without ``delta``, which only a ρ
    budget pays:

    >>> Quote({"epsilon": None, "delta": 0.0, "rho": 0.05})
    Quote(rho=0.05)

    When the analyst's remaining budget would refuse the query now, the service says so (the
    dry run is still free) and the quote shows it:

    >>> Quote({"epsilon": 0.4, "delta": 0.0, "rho": 0.08, "would_be_refused": {
    ...     "message": "would be refused: remaining epsilon 0.1 < price 0.4",
    ...     "exhausted": ["epsilon"]}})
    Quote(epsilon=0.4, delta=0, rho=0.08; would be refused: remaining epsilon 0.1 < price 0.4)
    """

    @property
    def half_width(self) -> Any:
        """The noise half-width at the request's alpha, or ``None`` if unknown before release."""
        acc = self.get("accuracy")
        return None if acc is None else acc.get("half_width")

    @property
    def would_be_refused(self) -> str | None:
        """Why a real request would be refused now (the exhausted resource, what is left and
        the price), or ``None`` if it fits the remaining budget."""
        refused = self.get("would_be_refused")
        return None if refused is None else str(refused.get("message"))

    def __repr__(self) -> str:
        refused = self.would_be_refused
        tail = ")" if refused is None else f"; {refused})"
        parts = []
        if self.get("epsilon") is not None:
            parts.append(f"epsilon={self.get('epsilon', 0):g}, delta={self.get('delta', 0):g}")
        if self.get("rho") is not None:
            parts.append(f"rho={self['rho']:g}")
        text = "Quote(" + ", ".join(parts)
        acc = self.get("accuracy")
        if acc is None:
            return text + tail
        text += ", " if parts else ""
        level = f"{100 * (1 - float(acc.get('alpha', 0.05))):g}%"
        h = acc.get("half_width")
        if isinstance(h, int | float):
            text += f"{level} noise interval +/- {h:.4g}"
        elif isinstance(h, dict) and h:  # a table: one half-width per output column
            cells = ", ".join(f"{k} +/- {v:.4g}" for k, v in h.items())
            text += f"{level} noise intervals: {cells}"
        return text + tail


@dataclass(frozen=True)
class RemoteRelease:
    """An answer from the curator: value, its interval at ``alpha``, cost and ledger id."""

    value: Any
    interval: tuple[Any, Any] | None
    alpha: float
    epsilon: float
    delta: float
    statistic: str
    id: str | None = None
    labels: tuple[str, ...] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    rho: float | None = None
    """What a budget in zCDP was (or would be) charged for it; ``None``: a δ > 0 price."""

    def ci(self, alpha: float | None = None) -> tuple[Any, Any]:
        """The ``1 − alpha`` noise interval computed by the service (ask with ``alpha=``)."""
        if alpha is not None and abs(alpha - self.alpha) > 1e-12:
            raise DataError(
                f"the service computed the interval at alpha={self.alpha:g}; send alpha= with "
                "the query for another level."
            )
        if self.interval is None:
            raise CuratorError(f"{self.statistic} has no interval from the released value alone.")
        return self.interval

    def __float__(self) -> float:
        return float(self.value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return np.asarray(self.value, dtype=dtype)


def _raise(status: int, body: Any) -> None:
    err = body.get("error", {}) if isinstance(body, dict) else {}
    msg = str(err.get("message", f"HTTP {status}"))
    kind = err.get("type")
    if status == 402 or kind == "BudgetExceededError":
        rem = err.get("remaining")
        raise BudgetExceededError(msg, remaining=rem)
    if status == 401:
        raise AuthenticationError(msg, status=status)
    if status == 403:
        raise PermissionDeniedError(msg, status=status)
    if status == 404:
        raise NotFoundError(msg, status=status)
    if kind == "PrivacyParameterError":
        raise PrivacyParameterError(msg)
    if status in (400, 413, 422):
        raise DataError(msg)
    raise CuratorError(msg, status=status)


class Curator:
    """Client of a dpkit curator service.

    Parameters
    ----------
    url : str
        Base URL, e.g. ``"http://127.0.0.1:8700"``.
    key : str
        The analyst's (or admin's) API key.
    timeout : float
        Seconds per request.

    Notes
    -----
    Every query method takes ``epsilon`` (and ``delta``) keyword-only, like :mod:`dpkit.stats`,
    plus ``dry_run=True`` (validate and price only, free) or ``dummy=True`` (run on the public
    dummy dataset, free). Each query carries an idempotency key, so a retried request (same
    ``idempotency_key=``) is never charged twice.

    Examples
    --------
    ::

        c = Curator("http://127.0.0.1:8700", key)
        m = c.mean("survey", "age", epsilon=0.5)
        m.value, m.ci()
    """

    def __init__(self, url: str, key: str, *, timeout: float = 60.0) -> None:
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - the server extra installs it
            raise ImportError("dpkit.client needs httpx: pip install 'dpkit[client]'") from exc
        self._http = httpx.Client(
            base_url=url, timeout=timeout, headers={"Authorization": f"Bearer {key}"}
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Curator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, json: Any = None) -> Any:
        r = self._http.request(method, path, json=json)
        try:
            body = r.json()
        except ValueError:
            body = None
        if r.status_code >= 400:
            _raise(r.status_code, body)
        return body

    # -- queries --------------------------------------------------------------------------------
    def query(self, dataset: str, query: str, **params: Any) -> Any:
        """Send one query (any registered type); returns a :class:`RemoteRelease` (a
        :class:`RemoteTable` for ``group_by`` and ``synthesize``, a :class:`RemoteFrequencies`
        for ``local_frequencies``), or the price for ``dry_run=True`` (a :class:`Quote`: a dict,
        with the expected accuracy where it is known before the release)."""
        body = {"dataset": dataset, "query": query, **params}
        if not body.get("dry_run") and not body.get("dummy"):
            body.setdefault("idempotency_key", uuid.uuid4().hex)
        out = self._call("POST", "/v1/query", body)
        if out.get("dry_run"):
            return Quote(out)
        return _answer(out)

    def count(self, dataset: str, *, epsilon: float | None = None, **kw: Any) -> Any:
        """Private number of rows (``epsilon=``, or ``rho=`` for Gaussian noise)."""
        return self.query(dataset, "count", **_budget(epsilon), **kw)

    def sum(self, dataset: str, column: str, *, epsilon: float | None = None, **kw: Any) -> Any:
        """Private sum of a column (clamped to its public bounds, or ``bounds=``; ``epsilon=``,
        or ``rho=`` for Gaussian noise)."""
        return self.query(dataset, "sum", column=column, **_budget(epsilon), **kw)

    def mean(self, dataset: str, column: str, *, epsilon: float | None = None, **kw: Any) -> Any:
        """Private mean of a column (``epsilon=``, or ``rho=`` for Gaussian noise)."""
        return self.query(dataset, "mean", column=column, **_budget(epsilon), **kw)

    def var(self, dataset: str, column: str, *, epsilon: float, **kw: Any) -> Any:
        """Private variance of a column."""
        return self.query(dataset, "var", column=column, epsilon=epsilon, **kw)

    def std(self, dataset: str, column: str, *, epsilon: float, **kw: Any) -> Any:
        """Private standard deviation of a column."""
        return self.query(dataset, "std", column=column, epsilon=epsilon, **kw)

    def cov(self, dataset: str, x: str, y: str, *, epsilon: float, **kw: Any) -> Any:
        """Private covariance of two columns."""
        return self.query(dataset, "cov", columns=[x, y], epsilon=epsilon, **kw)

    def corr(self, dataset: str, x: str, y: str, *, epsilon: float, **kw: Any) -> Any:
        """Private Pearson correlation of two columns."""
        return self.query(dataset, "corr", columns=[x, y], epsilon=epsilon, **kw)

    def quantile(
        self, dataset: str, column: str, q: float | list[float], *, epsilon: float, **kw: Any
    ) -> Any:
        """Private quantile(s) (exponential mechanism; ε is split between them)."""
        qs = list(q) if isinstance(q, list | tuple) else [q]
        rel = self.query(dataset, "quantiles", column=column, q=qs, epsilon=epsilon, **kw)
        if not isinstance(q, list | tuple) and isinstance(rel, RemoteRelease):
            return RemoteRelease(rel.value[0], None, rel.alpha, rel.epsilon, rel.delta,
                                 rel.statistic, rel.id, None, rel.raw)  # fmt: skip
        return rel

    def median(self, dataset: str, column: str, *, epsilon: float, **kw: Any) -> Any:
        """Private median."""
        return self.quantile(dataset, column, 0.5, epsilon=epsilon, **kw)

    def histogram(
        self, dataset: str, column: str, *, epsilon: float | None = None, **kw: Any
    ) -> Any:
        """Private histogram (categories of a categorical column, or ``bins=``; ``epsilon=``,
        or ``rho=`` for Gaussian noise)."""
        return self.query(dataset, "histogram", column=column, **_budget(epsilon), **kw)

    def group_by(
        self,
        dataset: str,
        by: str | list[str],
        *aggregations: Any,
        epsilon: float,
        delta: float = 0.0,
        keys: list[Any] | str | None = None,
        max_rows: int | None = None,
        max_groups: int | None = None,
        max_rows_per_unit: int | None = None,
        **kw: Any,
    ) -> Any:
        """Private per-group aggregates (like :meth:`dpkit.frame.Query.group_by`).

        ``aggregations`` are :mod:`dpkit.frame` aggregations (``dpf.count()``, ``dpf.mean("x",
        bounds=(0, 1))``…) or their JSON form (``{"stat": "mean", "column": "x"}``, bounds then
        from the schema); default: a count. ``keys``: ``None`` releases every key of the key
        columns' public domains, a list releases those, ``"private"`` selects keys privately
        (δ > 0). ``max_rows`` (L∞), ``max_groups`` (L0) and ``max_rows_per_unit`` (L1) bound
        each person's contribution: the first two are required where the dataset has a privacy
        unit (the service does not choose them). Returns a :class:`RemoteTable` (``.frame``:
        Polars).
        """
        params: dict[str, Any] = {"by": [by] if isinstance(by, str) else list(by)}
        if max_rows is not None:
            params["max_rows"] = max_rows
        if max_groups is not None:
            params["max_groups"] = max_groups
        if aggregations:
            params["aggregations"] = [_aggregation(a) for a in aggregations]
        if keys is not None:
            params["keys"] = keys
        if max_rows_per_unit is not None:
            params["max_rows_per_unit"] = max_rows_per_unit
        if delta:
            params["delta"] = delta
        return self.query(dataset, "group_by", epsilon=epsilon, **params, **kw)

    def sql(
        self,
        dataset: str,
        sql: str,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        max_rows: int = 1,
        max_groups: int = 1,
        max_rows_per_unit: int | None = None,
        **kw: Any,
    ) -> Any:
        """A private SQL query on a dataset (``POST /v1/sql``; docs/sql.md), the table named as
        the dataset: ``curator.sql("visits", "SELECT city, COUNT(*) FROM visits GROUP BY city",
        epsilon=1.0)``. The metadata comes from the registered schema; ``max_rows`` (L∞),
        ``max_groups`` (L0) and ``max_rows_per_unit`` (L1) bound each person's contribution.
        In BigQuery's dialect the budget is the query's ``OPTIONS`` (leave ``epsilon`` out).
        Returns a :class:`RemoteTable` (``.frame``: keys, values and their ``_lo``/``_hi``), or
        the price (a dict) with ``dry_run=True``.
        """
        body: dict[str, Any] = {"dataset": dataset, "sql": sql, "max_rows": max_rows,
                                "max_groups": max_groups, **kw}  # fmt: skip
        if epsilon is not None:
            body["epsilon"] = epsilon
        if delta:
            body["delta"] = delta
        if max_rows_per_unit is not None:
            body["max_rows_per_unit"] = max_rows_per_unit
        if not body.get("dry_run") and not body.get("dummy"):
            body.setdefault("idempotency_key", uuid.uuid4().hex)
        out = self._call("POST", "/v1/sql", body)
        if out.get("dry_run"):
            return out
        return _answer(out)

    def synthesize(
        self,
        dataset: str,
        columns: list[str] | None = None,
        *,
        rows: int,
        epsilon: float,
        delta: float,
        **kw: Any,
    ) -> Any:
        """Private synthetic rows (:class:`dpkit.release.Synthesizer` on the schema's domain).

        ``method`` (``"aim"``, ``"mst"``, ``"independent"``) and ``bins`` may be passed too.
        Returns a :class:`RemoteTable` of ``rows`` synthetic records.
        """
        params: dict[str, Any] = {} if columns is None else {"columns": list(columns)}
        return self.query(
            dataset, "synthesize", rows=rows, epsilon=epsilon, delta=delta, **params, **kw
        )

    def local_frequencies(self, dataset: str, column: str, **kw: Any) -> Any:
        """Frequency estimates from a column of local-model reports: free (post-processing).

        Returns a :class:`RemoteFrequencies` (like :class:`dpkit.local.FrequencyEstimate`).
        """
        return self.query(dataset, "local_frequencies", column=column, **kw)

    # -- the rest of the API ----------------------------------------------------------------------
    def result(self, result_id: str) -> Any:
        """Fetch a past answer again (no charge)."""
        return _answer(self._call("GET", f"/v1/results/{result_id}"))

    def results(self, limit: int = 100) -> list[dict[str, Any]]:
        """Your past answers, newest first."""
        out: list[dict[str, Any]] = self._call("GET", f"/v1/results?limit={int(limit)}")["results"]
        return out

    def budget(self) -> list[dict[str, Any]]:
        """Your budgets: total, spent and remaining ε and δ per dataset; a budget declared in
        zCDP has ``rho``, ``spent_rho``, ``remaining_rho`` and ``remaining_as`` (the (ε, δ)
        the remaining ρ implies, for reading)."""
        out: list[dict[str, Any]] = self._call("GET", "/v1/me")["budgets"]
        return out

    def datasets(self) -> list[dict[str, Any]]:
        """The public schemas of the datasets."""
        out: list[dict[str, Any]] = self._call("GET", "/v1/datasets")["datasets"]
        return out

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        """Call an admin endpoint (``/v1/admin/...``) with this client's key."""
        return self._call(method, path, body)

    def set_budget(
        self,
        analyst: str,
        dataset: str,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        rho: float | None = None,
    ) -> None:
        """Set an analyst's budget on a dataset (admin key): ``epsilon`` (and ``delta``), or
        ``rho`` for a budget in zero-concentrated DP (its charges' ρ add up exactly)."""
        body: dict[str, Any] = {"analyst": analyst, "dataset": dataset}
        if rho is not None:
            if epsilon is not None or delta:
                raise DataError("a budget is in (epsilon, delta) or in rho, not both.")
            body["rho"] = rho
        else:
            body.update(epsilon=epsilon, delta=delta)
        self._call("PUT", "/v1/admin/budgets", body)


def _budget(epsilon: float | None) -> dict[str, Any]:
    """``epsilon`` as a request parameter when given (a ρ query gives ``rho=`` instead)."""
    return {} if epsilon is None else {"epsilon": epsilon}


_DEFAULT_NAMES = {"count": "count", "count_units": "units", "quantiles": "q_{}"}


def _aggregation(a: Any) -> dict[str, Any]:
    """The JSON form of a :mod:`dpkit.frame` aggregation (or a JSON form, passed through)."""
    if isinstance(a, dict):
        return a
    stat, column = getattr(a, "stat", None), getattr(a, "column", None)
    if not isinstance(stat, str):
        raise DataError("aggregations must be dpkit.frame aggregations or JSON objects.")
    if stat == "histogram":
        raise DataError("group_by answers count, count_units, sum, mean, var, std, quantiles.")
    default = _DEFAULT_NAMES.get(stat, f"{stat}_{{}}").format(column)
    if getattr(a, "alias", default) != default:
        raise DataError("the curator names aggregations itself; leave alias out.")
    out: dict[str, Any] = {"stat": stat}
    if column is not None:
        out["column"] = column
    if getattr(a, "bounds", None) is not None:
        out["bounds"] = list(a.bounds)
    if stat == "quantiles":
        out["q"] = list(a.qs)
    return out


def _answer(out: dict[str, Any]) -> Any:
    """The client's result object for a JSON answer, by its query type."""
    kind = out.get("query")
    if kind in ("group_by", "synthesize", "sql"):
        return table(out)
    if kind == "local_frequencies":
        return frequencies(out)
    return _release(out)


def _release(out: dict[str, Any]) -> RemoteRelease:
    ci = out.get("ci")
    labels = out.get("labels")
    value = out.get("value")
    return RemoteRelease(
        value=np.asarray(value) if isinstance(value, list) else value,
        interval=None if ci is None else (
            np.asarray(ci[0]) if isinstance(ci[0], list) else ci[0],
            np.asarray(ci[1]) if isinstance(ci[1], list) else ci[1]),
        alpha=float(out.get("alpha", 0.05)),
        epsilon=float(out.get("epsilon", 0.0)),
        delta=float(out.get("delta", 0.0)),
        rho=None if out.get("rho") is None else float(out["rho"]),
        statistic=str(out.get("query")),
        id=out.get("id"),
        labels=None if labels is None else tuple(labels),
        raw=out,
    )  # fmt: skip
