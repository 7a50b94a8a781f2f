"""A compiled SQL query: its frame plan, explain(), release(), and the one-call ``query``."""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dpkit._checks import check_delta, check_epsilon
from dpkit.accounting import Event
from dpkit.errors import DataError, PrivacyParameterError, QueryRefusedError
from dpkit.frame import Explanation, GroupedQuery, Query
from dpkit.frame._aggs import output_names
from dpkit.frame._engine import as_lazy, is_spark, polars
from dpkit.mechanisms._base import SupportsCharge
from dpkit.random import RNGLike
from dpkit.sql._catalog import Catalog, Table
from dpkit.sql._compile import Compiled, compile_tree
from dpkit.sql._parse import parse_sql
from dpkit.sql._post import Post, evaluate
from dpkit.sql._scope import Source
from dpkit.sql._spark import is_session, named_table, spark_plans, spark_table

__all__ = ["SQLExplanation", "SQLQuery", "SQLRelease", "query"]


@dataclass(frozen=True)
class SQLExplanation:
    """What a SQL query will do and cost: its SQL-level steps and the frame plan beneath.

    Built from the query text, the metadata and the tables' schemas only; charges nothing.
    ``epsilon``/``delta`` are the query's whole cost, split over every noisy quantity (the
    hidden ones too: a mean's count, key selection's noisy counts), listed in ``frame``.
    """

    sql: str
    dialect: str
    steps: tuple[str, ...]
    frame: Explanation
    epsilon: float
    delta: float
    event: Event

    def __str__(self) -> str:
        lines = [f"SQL ({self.dialect} dialect):"]
        lines += [f"  - {s}" for s in self.steps]
        lines.append(str(self.frame))
        return "\n".join(lines)


@dataclass(frozen=True)
class SQLRelease:
    """A released SQL result: ``frame`` (Polars: keys, then each value with ``_lo``/``_hi``),
    the ``event`` charged, and the ``explanation`` executed."""

    frame: Any
    event: Event
    explanation: SQLExplanation


class SQLQuery:
    """A SQL query compiled on a catalog: every refusal happens here, from text and metadata.

    Parameters
    ----------
    sql : str
        One SELECT statement (dpkit's dialect: ordinary SQL; or BigQuery's
        ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(...)``).
    catalog : Catalog
        The public metadata of the tables.
    dialect : str, optional
        sqlglot dialect of the text (default ``"postgres"``; BigQuery's DP clause is recognised
        in any dialect).

    Notes
    -----
    Privacy guarantee: :meth:`release` is (ε, δ)-DP for the privacy unit of the private table
    (all its rows together; with ``row_privacy`` each row), with the contribution bounds and
    column bounds of the catalog, because it *is* a :mod:`dpkit.frame` release (the plan of
    :meth:`frame_query`) followed by post-processing of the released table only (expressions of
    released aggregates, HAVING, ORDER BY, LIMIT). Keys are released only from public key sets
    (metadata, literals of a CASE, a public table) or by private key selection.

    Examples
    --------
    >>> import polars as pl, dpkit.sql as dps
    >>> cat = dps.Catalog([dps.Table("t", privacy_unit="u", columns=[
    ...     dps.Column("u", "int"), dps.Column("g", "string", keys=["a", "b"]),
    ...     dps.Column("x", "float", bounds=(0, 10))])])
    >>> df = pl.DataFrame({"u": [1, 2, 3], "g": ["a", "b", "a"], "x": [1.0, 5.0, 9.0]})
    >>> q = dps.SQLQuery("SELECT g, COUNT(*) AS n, AVG(x) + 1 AS m FROM t GROUP BY g", cat)
    >>> r = q.release({"t": df}, epsilon=1.0, rng=0)
    >>> r.frame.columns
    ['g', 'n', 'n_lo', 'n_hi', 'm', 'm_lo', 'm_hi']
    """

    def __init__(self, sql: str, catalog: Catalog, *, dialect: str | None = None) -> None:
        if not isinstance(catalog, Catalog):
            raise DataError("catalog must be a dpkit.sql.Catalog (see dpkit.sql.load_catalog).")
        self._c: Compiled = compile_tree(parse_sql(sql, dialect=dialect), catalog, sql)

    @property
    def bigquery(self) -> bool:
        """Whether the query uses BigQuery's DIFFERENTIAL_PRIVACY clause and semantics."""
        return self._c.bigquery

    # -- the frame plan -------------------------------------------------------------------------
    def _given(self, tables: object) -> dict[str, Any]:
        """The data given for each table of the query, by its catalog name (a frame, or a
        Spark DataFrame: one given by its registered name is looked up in the active session)."""
        srcs = self._c.scope.sources
        if is_session(tables):
            return {s.table.name: spark_table(tables, s.table.name) for s in srcs}
        if not isinstance(tables, Mapping):
            if len(srcs) == 1:
                return {srcs[0].table.name: named_table(tables)}
            raise DataError("tables must map each table name in the query to its data.")
        given: dict[str, Any] = {}
        for s in srcs:
            name = s.table.name
            for k, v in tables.items():
                if str(k).lower() == name.lower():
                    given[name] = named_table(v)
                    break
            else:
                raise DataError(f"no data given for table {name!r} (tables maps names to frames).")
        return given

    def _data(self, given: dict[str, Any], name: str) -> Any:
        data = as_lazy(given[name], "data" if name == self._c.scope.private.name else "public")
        table = next(s.table for s in self._c.scope.sources if s.table.name == name)
        return _typed(data, table)

    def _public_keys(self, publics: dict[str, Any]) -> Any:
        c = self._c
        # BigQuery always selects groups by a noisy unit count (its semantics), never a list
        if not c.keys or c.bigquery or any(v is None for v in c.key_values):
            return None
        pl = polars()
        sets = []
        for phys, v in zip(c.keys, c.key_values, strict=True):
            if v == "public":
                found = c.scope.public_column(phys)
                assert found is not None
                src, orig = found
                vals = publics[src.alias].select(pl.col(orig).unique(maintain_order=True)).collect()
                sets.append(vals.to_series().to_list())
            else:
                sets.append(list(v))
        if len(sets) == 1:
            return sets[0]
        return list(itertools.product(*sets))

    def frame_query(self, tables: object) -> GroupedQuery:
        """The :mod:`dpkit.frame` plan this query runs (for inspection and tests): on Polars,
        or on Spark where the private table is a Spark DataFrame."""
        return self._plans(tables)[1]

    def _plans(self, tables: object) -> tuple[GroupedQuery, GroupedQuery]:
        """(the plan every check runs on, the plan that runs): the same Polars plan, or, for a
        Spark table, the Polars plan on an empty frame of its schema (so that every refusal is
        the Polars path's, from the schema alone) and the Spark plan."""
        given = self._given(tables)
        if is_spark(given[self._c.scope.private.name]):
            return spark_plans(self, given)
        gq = self._frame_query(given)
        return gq, gq

    def _renamed(self, s: Source, data: Any) -> Any:
        """A joined table's columns under their physical names in the joined table."""
        pl = polars()
        return data.select(
            [pl.col(col.name).alias(s.names[col.name.lower()]) for col in s.table.columns]
        )

    def _frame_query(self, given: dict[str, Any]) -> GroupedQuery:
        pl = polars()
        c = self._c
        srcs = c.scope.sources
        base = self._data(given, srcs[0].table.name)
        publics: dict[str, Any] = {}
        joins = []
        for s in srcs[1:]:
            data = self._data(given, s.table.name)
            renamed = self._renamed(s, data)
            if s.role == "unit_join":
                base = base.join(renamed, on=[p for p, _ in s.on], how="inner")
            else:
                publics[s.alias] = data
                joins.append((renamed, [p for p, _ in s.on], s.how))
        pk = self._public_keys(publics)
        unit = c.scope.unit
        if unit is not None:
            # a row without a unit is dropped (row-wise), never refused: the frame's refusal
            # would tell whether the table holds a unit whose id is NULL (a free membership bit)
            keep = pl.col(unit).is_not_null()
            if base.collect_schema()[unit].is_float():  # a NaN unit is null too (as the frame)
                keep = keep & pl.col(unit).is_not_nan()
            base = base.filter(keep)
        if c.bigquery:
            for renamed, on, how in joins:
                base = base.join(renamed, on=on, how=how)
            if c.where is not None:
                base = base.filter(c.where)
            if c.derived:
                base = base.with_columns(**c.derived)
            if c.windows:
                base = base.with_columns(**{k: w.polars() for k, w in c.windows.items()})
            q = Query(base, privacy_unit=unit, missing="drop")
        else:
            q = Query(base, privacy_unit=unit, missing="drop")
            for renamed, on, how in joins:
                q = q.join(renamed, on=on, how=how)
            if c.where is not None:
                q = q.filter(c.where)
            if c.derived:
                q = q.with_columns(**c.derived)
        return self._grouped(q, pk)

    def _grouped(self, q: Query, pk: Any) -> GroupedQuery:
        """The grouped query of the compiled keys, bounds and aggregations."""
        c = self._c
        if not c.keys:
            # one group: L1 and L∞ bound the same rows, so one bound (the smaller) is enough and
            # the frame runs its one-sort plan instead of a window per unit
            rows = min(c.max_rows, c.max_rows_per_unit or c.max_rows)
            return q.agg(*c.aggs, max_rows=rows)
        return q.group_by(
            *c.keys,
            public_keys=pk,
            max_groups=c.max_groups,
            max_rows=c.max_rows,
            max_rows_per_unit=c.max_rows_per_unit,
        ).agg(*c.aggs)

    # -- budget ------------------------------------------------------------------------------
    def _budget(self, epsilon: object, delta: object) -> tuple[float, float, dict[str, Any]]:
        c = self._c
        if not c.bigquery:
            if epsilon is None:
                raise PrivacyParameterError("give the query's total epsilon (and delta).")
            return check_epsilon(epsilon), check_delta(0.0 if delta is None else delta), {}
        eps, dlt = c.options.get("epsilon"), c.options.get("delta", 0.0)
        for given, opt, name in ((epsilon, eps, "epsilon"), (delta, dlt, "delta")):
            if given is not None and float(given) != float(opt or 0.0):  # type: ignore[arg-type]
                raise PrivacyParameterError(
                    f"{name} differs from the query's OPTIONS; give it in one place only."
                )
        n = max(c.n_dp_functions, 1)
        extra = {"noise": "laplace", "selection": "laplace", "selection_share": 1.0 / (n + 1)}
        return check_epsilon(eps), check_delta(dlt if dlt is not None else 0.0), extra

    def _steps(self) -> tuple[str, ...]:
        c = self._c
        s = c.scope
        unit = "each row" if s.unit is None else repr(s.unit)
        steps = [f"read private table {s.private.name!r} (privacy unit: {unit})"]
        for src in s.sources[1:]:
            what = "public table" if src.role == "public" else "private table, on the unit"
            steps.append(f"{src.how} join {what} {src.table.name!r} on {[o for _, o in src.on]}")
        if c.bigquery:
            steps.append(
                "BigQuery semantics: each unit's rows in a group are aggregated first, then "
                "that per-unit value is clamped; groups kept by a noisy count of their units "
                "(1/(n+1) of epsilon for n aggregates)"
            )
        steps += [f"aggregation {n}" for n in c.agg_notes]
        if c.keys:
            public = all(v is not None for v in c.key_values) and not c.bigquery
            kinds = "public key set" if public else "private key selection (thresholded)"
            steps.append(f"keys {list(c.keys)} from a {kinds}")
        post = [n for n, t, k in c.outputs if not k and t[0] != "ref"]
        if post:
            steps.append(f"post-processing of released values: {post}")
        if c.having is not None:
            steps.append("HAVING on released values (no extra cost)")
        if c.order:
            steps.append("ORDER BY released values and keys (no extra cost)")
        if c.limit is not None:
            steps.append(f"LIMIT {c.limit} of the released rows (sorted by key first)")
        return tuple(steps)

    def _noise(
        self, gq: GroupedQuery, eps: float, dlt: float, noise: str | None, selection: str | None
    ) -> dict[str, Any]:
        """The noise plan with the least noise for this query's bounds (public parameters
        only): Laplace or Gaussian (with few measures and one group per unit Laplace wins,
        with many Gaussian), and, for privately selected keys with a COUNT among the
        aggregates, the count's own noisy value thresholded as the key selection (no ε split
        off to a separate selection count; ``dpkit.frame._selection``). A ``selection`` given
        is used as given (the choice of noise is made for it)."""
        given = {} if selection is None else {"selection": selection}
        if dlt == 0:
            return given if noise is None else {"noise": noise, **given}
        plans: dict[tuple[str, str | None], Any] = {}
        kinds = ("laplace", "gaussian") if noise is None else (noise,)
        counted = (
            gq._public is None
            and bool(gq._by)
            and not gq._bounding.replace
            and any(m.kind == "rows" for m in gq._measures())
        )
        for kind in kinds:
            sels: tuple[str | None, ...] = (None,)
            if selection is not None:
                sels = (selection,)
            elif counted and kind == "laplace":
                sels = (None, "count")
            for sel in sels:
                # one that cannot be calibrated is left out: the others (or the default) decide
                with contextlib.suppress(PrivacyParameterError):
                    plans[kind, sel] = gq._plan(eps, dlt, kind, sel, 0.5)
        if not plans or any(not mn.sd > 0 for p in plans.values() for mn in p.measures):
            # none calibrates, or a scale too small to compare (a huge epsilon)
            return given if noise is None else {"noise": noise, **given}
        # the same measures in every plan, in the same order: the plan with the least total
        # log noise sd (the geometric mean of the measures' sd)
        best = min(plans, key=lambda k: math.fsum(math.log(mn.sd) for mn in plans[k].measures))
        kind, sel = best
        return {"noise": kind} if sel is None else {"noise": kind, "selection": sel}

    def explain(
        self,
        tables: object,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        noise: str | None = None,
        selection: str | None = None,
    ) -> SQLExplanation:
        """The plan and its whole cost, before anything is charged (reads schemas only).

        ``noise`` (dpkit's dialect): ``"laplace"`` or ``"gaussian"``; by default whichever
        gives the smaller noise for this plan's bounds (a choice from public parameters only).
        ``selection`` (dpkit's dialect, privately selected keys): as in
        :meth:`dpkit.frame.GroupedQuery.release`; by default the plan with the least noise,
        which for a query with ``COUNT`` is ``"count"`` (its own noisy count thresholded: less
        noise, but a key needs about the threshold in *rows*; ``explain`` shows it) — pass
        ``"truncated_geometric"`` or ``"gaussian"`` to release smaller keys at more noise.
        """
        eps, dlt, extra = self._budget(epsilon, delta)
        gq = self._plans(tables)[0]
        if not self._c.bigquery:
            extra = self._noise(gq, eps, dlt, noise, selection)
        fx = gq.explain(epsilon=eps, delta=dlt, **extra)
        self._check_post(gq)
        dialect = "BigQuery" if self._c.bigquery else "dpkit"
        return SQLExplanation(
            self._c.sql, dialect, self._steps(), fx, fx.epsilon, fx.delta, fx.event
        )

    def release(
        self,
        tables: object,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        accountant: SupportsCharge | None = None,
        rng: RNGLike = None,
        alpha: float = 0.05,
        noise: str | None = None,
        selection: str | None = None,
    ) -> SQLRelease:
        """Run the query: one frame release (charged once, for the whole ε, δ), then
        post-processing of the released table only (``noise``, ``selection`` as in
        :meth:`explain`)."""
        eps, dlt, extra = self._budget(epsilon, delta)
        checked, gq = self._plans(tables)
        if not self._c.bigquery:
            extra = self._noise(checked, eps, dlt, noise, selection)
        self._check_post(checked)
        if checked is not gq:  # Spark: the Polars path's checks on the schema, before any job
            checked.explain(epsilon=eps, delta=dlt, **extra)
        r = gq.release(epsilon=eps, delta=dlt, accountant=accountant, rng=rng, alpha=alpha, **extra)
        dialect = "BigQuery" if self._c.bigquery else "dpkit"
        ex = r.explanation
        expl = SQLExplanation(
            self._c.sql, dialect, self._steps(), ex, ex.epsilon, ex.delta, ex.event
        )
        return SQLRelease(self._finish(r.frame), r.event, expl)

    def _check_post(self, gq: GroupedQuery) -> None:
        """Run the post-processing on an empty released table of the right schema, so that
        an expression that cannot run (a number compared with a string) is refused before
        anything is charged, never after."""
        pl = polars()
        c = self._c
        try:
            schema = gq._table.data.collect_schema()  # the plan's schema: no data are read
            cols: dict[str, Any] = {k: pl.Series(k, [], dtype=schema[k]) for k in c.keys}
        except Exception:
            return  # the frame's own checks report it, before any charge
        for name in sorted(n for a in c.aggs for n in output_names(a)):
            cols[name] = pl.Series(name, [], dtype=pl.Float64)
        try:
            self._finish(pl.DataFrame(cols))
        except Exception as exc:
            raise QueryRefusedError(
                "HAVING, ORDER BY or an expression of aggregates cannot run on the released "
                f"values ({type(exc).__name__}): compare numbers with numbers, keys with keys."
            ) from None

    def _finish(self, released: Any) -> Any:
        """Post-processing: a function of the released table only (sorted by key first, so
        that LIMIT never depends on the order in which an engine produced the rows)."""
        pl = polars()
        c = self._c
        out = released.sort(c.keys, nulls_last=True) if c.keys else released

        def ev(p: Post) -> tuple[Any, Any, Any]:
            return evaluate(_rename_out(p))

        cols = []
        for name, tree, is_key in c.outputs:
            if is_key:
                cols.append(pl.col(tree[1]).alias(f"__o_{name}"))
            else:
                v, lo, hi = ev(tree)
                cols += [
                    v.alias(f"__o_{name}"),
                    lo.alias(f"__o_{name}_lo"),
                    hi.alias(f"__o_{name}_hi"),
                ]
        out = out.with_columns(cols)
        if c.having is not None:
            out = out.filter(ev(c.having)[0].fill_null(False))
        if c.order:
            out = out.sort(
                [ev(t)[0] for t, _ in c.order],
                descending=[d for _, d in c.order],
                nulls_last=True,
                maintain_order=True,
            )
        if c.offset or c.limit is not None:
            out = out.slice(c.offset, c.limit)
        final = []
        for name, _, is_key in c.outputs:
            final.append(pl.col(f"__o_{name}").alias(name))
            if not is_key:
                final += [
                    pl.col(f"__o_{name}_lo").alias(f"{name}_lo"),
                    pl.col(f"__o_{name}_hi").alias(f"{name}_hi"),
                ]
        return out.select(final)


def _rename_out(p: Post) -> Post:
    if p[0] == "out":
        return ("key", f"__o_{p[1]}")
    if p[0] in ("ref", "key", "const"):
        return p
    return (p[0], *(_rename_out(a) if isinstance(a, tuple) else a for a in p[1:]))


def query(
    sql: str,
    tables: object,
    *,
    catalog: Catalog,
    epsilon: float | None = None,
    delta: float | None = None,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    alpha: float = 0.05,
    dialect: str | None = None,
) -> Any:
    """Run one private SQL query; a Polars DataFrame with ``{name}_lo``/``{name}_hi`` intervals.

    ``epsilon``/``delta`` are the query's whole cost (in BigQuery's dialect they come from
    ``OPTIONS``). See :class:`SQLQuery` for the guarantee.

    Examples
    --------
    >>> import polars as pl, dpkit.sql as dps
    >>> cat = dps.Catalog([dps.Table("t", row_privacy=True, columns=[
    ...     dps.Column("x", "float", bounds=(0, 10))])])
    >>> df = pl.DataFrame({"x": [1.0, 5.0, 9.0]})
    >>> dps.query("SELECT COUNT(*) AS n FROM t", {"t": df}, catalog=cat, epsilon=1.0, rng=0).columns
    ['n', 'n_lo', 'n_hi']
    """
    q = SQLQuery(sql, catalog, dialect=dialect)
    return q.release(
        tables, epsilon=epsilon, delta=delta, accountant=accountant, rng=rng, alpha=alpha
    ).frame


def _typed(data: Any, table: Table) -> Any:
    """``data``, once its columns' types agree with the metadata (from the schema alone).

    A column declared numeric but held as text would be cast value by value where an
    expression clamps it, and one unit's unparsable value would make the release fail: a
    refusal that tells whether that unit is present. So the types are checked first, and a
    mismatch is refused whatever the values are.
    """
    pl = polars()
    try:
        schema = data.collect_schema()
    except Exception:
        return data  # the frame's own checks report it, before any charge
    for c in table.columns:
        dtype = schema.get(c.name)
        if dtype is None or not c.numeric:
            continue
        if not (dtype.is_numeric() or dtype == pl.Boolean or dtype == pl.Null):
            raise DataError(
                f"a column declared {c.type} in the metadata holds {dtype} data; cast it to a "
                "number before the query (a value that does not convert becomes NULL)."
            )
    return data
