"""Private queries over tables: a privacy unit and row-wise transformations before grouping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpkit._missing import MISSING_DEFAULT, Missing, check_missing
from dpkit.accounting import Neighbouring
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.frame._aggs import Aggregation
from dpkit.frame._engine import as_lazy
from dpkit.frame._grouped import GroupBy, GroupedQuery
from dpkit.frame._parts import Partitions
from dpkit.frame._suggest import SuggestedBounds, suggest_bounds
from dpkit.frame._table import (
    Table,
    check_rowwise,
    check_unnamed,
    check_unreserved,
    schema_names,
    table,
)
from dpkit.frame._total import check_total
from dpkit.mechanisms._base import SupportsCharge
from dpkit.random import RNGLike
from dpkit.stats._events import is_replace

__all__ = ["Query"]


class Query:
    """A table whose privacy unit is declared, ready for row-wise steps and a grouped release.

    Parameters
    ----------
    data : polars.LazyFrame, polars.DataFrame, pandas.DataFrame or pyspark.sql.DataFrame
        The sensitive table (pandas is converted to Polars; Spark runs on Spark).
    privacy_unit : str or None
        The column identifying whom a row belongs to (a user id): the guarantee protects all the
        rows of one unit together. ``None`` means every row is its own unit.
    neighbouring : Neighbouring
        ``ADD_REMOVE`` (default): neighbouring tables differ by all the rows of one unit.
        ``REPLACE``: one unit's rows are replaced by arbitrary others; sensitivities double.
    missing : {"raise", "drop"}
        A row with a null or NaN in a column an aggregation reads: ``"raise"`` (default, as in
        :mod:`dpkit.stats`) refuses the release before anything is charged (the refusal reveals
        that such a row exists; only the table as given is read: a null a step makes is
        dropped, as refusing it would answer any predicate on private values for free);
        ``"drop"`` removes those rows before contribution bounding (a row-wise filter: the
        guarantee holds, and the number of rows used stays private). Null key values are not
        missing: they form a group of their own.

    Notes
    -----
    Privacy guarantee: :meth:`GroupedQuery.release` is (ε, δ)-DP with respect to the privacy unit
    (Dwork, McSherry, Nissim and Smith 2006: neighbouring tables differ in all the rows of one
    unit), provided the transformations (:meth:`filter`, :meth:`with_columns`, :meth:`join`) are
    *row-wise*: each output row depends only on one input row and public tables. Expressions
    that look at other rows (``pl.col("x").mean()``, windows, ranks, ``shift``) would let one
    unit change other units' rows: :meth:`filter` and :meth:`with_columns` refuse them (and
    selectors, regexes and Python functions, which cannot be shown row-wise) from the
    expression alone. A step that fails on some value (a strict cast) is refused before any
    charge, and that refusal reveals that such a value exists: make steps total.

    Identity before transformation: each row's unit is fixed here, when the query is made (a
    hidden column, a copy of ``privacy_unit`` or a row number, under a reserved name no step may
    read or write, by name or through a selector).
    Rows a join copies stay their unit's rows, counted by the contribution bounds, and
    redefining the unit's column later changes a column, never whom a row belongs to.

    Examples
    --------
    >>> import polars as pl, dpkit.frame as dpf
    >>> df = pl.DataFrame({"user": [1, 1, 2, 3], "city": ["a", "a", "b", "a"],
    ...                    "amount": [5.0, 7.0, 1.0, 3.0]})
    >>> q = dpf.Query(df, privacy_unit="user").group_by(
    ...     "city", public_keys=["a", "b"], max_groups=1, max_rows=2)
    >>> r = q.agg(dpf.count(), dpf.sum("amount", bounds=(0, 10))).release(epsilon=1.0, rng=0)
    >>> r.frame.columns
    ['city', 'count', 'count_lo', 'count_hi', 'sum_amount', 'sum_amount_lo', 'sum_amount_hi']
    """

    def __init__(
        self,
        data: object,
        *,
        privacy_unit: str | None,
        neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
        missing: Missing = MISSING_DEFAULT,
    ) -> None:
        if privacy_unit is not None and (not isinstance(privacy_unit, str) or not privacy_unit):
            raise DataError("privacy_unit must be a column name (str) or None (one row per unit).")
        # the identity is fixed here, before any step can copy rows or overwrite the unit
        self._table: Table = table(
            data, privacy_unit, neighbouring, is_replace(neighbouring), check_missing(missing)
        )

    def _derive(self, data: object, step: str) -> Query:
        q = Query.__new__(Query)
        q._table = self._table.derive(data, step)
        return q

    def _polars_only(self, what: str) -> None:
        if self._table.spark:
            raise DataError(
                f"{what} runs on Polars frames; on Spark, transform the DataFrame with Spark "
                "before building the Query (row-wise only)."
            )

    def filter(self, *predicates: Any) -> Query:
        """Keep the rows where every (row-wise) Polars predicate holds."""
        self._polars_only("filter")
        check_unnamed(predicates, "filter")
        check_rowwise(predicates, "filter")
        check_total(predicates, self._table.data, "filter")
        return self._derive(
            self._table.data.filter(*predicates), f"filter {len(predicates)} predicate(s)"
        )

    def with_columns(self, *exprs: Any, **named: Any) -> Query:
        """Add or redefine columns with row-wise Polars expressions.

        Redefining the privacy unit's column changes a column, not the unit: rows stay the
        units they were when the query was made. Expressions may not write the hidden identity
        column (``pl.all()`` would): name the columns they write.
        """
        self._polars_only("with_columns")
        data = self._table.data
        check_unnamed([*exprs, *named.values()], "with_columns")
        # the names the expressions write, from the plan's schema (no data are read)
        check_unreserved(schema_names(data.select(*exprs, **named), "with_columns"), "with_columns")
        check_rowwise([*exprs, *named.values()], "with_columns")
        check_total([*exprs, *named.values()], data, "with_columns")
        names = [*named]
        return self._derive(data.with_columns(*exprs, **named), f"derive columns {names}")

    def join(self, public: object, *, on: str | Sequence[str], how: str = "inner") -> Query:
        """Join a *public* table (its content is not protected) on key columns.

        ``how`` is ``"inner"`` or ``"left"``: every output row comes from one private row and
        carries that row's unit, fixed when the query was made. A public table that repeats a
        key copies a private row: with a declared ``privacy_unit`` the copies are that unit's
        rows, and the contribution bounds (``max_rows``, ``max_groups``, ``max_rows_per_unit``)
        count them; where each row is its own unit the join is refused (the check reads the
        public table only), since copies of a row could not be told apart from other rows'.
        """
        self._polars_only("join")
        if how not in ("inner", "left"):
            raise DataError(
                "join how must be 'inner' or 'left' (other joins create unit-less rows)."
            )
        cols = [on] if isinstance(on, str) else list(on)
        pub = as_lazy(public, "public")
        check_unreserved([*cols, *schema_names(pub, "the public table")], "the public table")
        if self._table.unit is None:
            _refuse_repeated_keys(pub, cols)
        return self._derive(self._table.data.join(pub, on=cols, how=how), f"join public on {cols}")

    def group_by(
        self,
        *by: str,
        public_keys: object = None,
        max_groups: int | None = None,
        max_rows: int | None = None,
        max_rows_per_unit: int | None = None,
    ) -> GroupBy:
        """Group by key columns with contribution bounds.

        Parameters
        ----------
        *by : str
            Key columns.
        public_keys : sequence or DataFrame, optional
            The keys to release (every one, with fresh noise; absent keys get noisy zeros). A list
            of values for one key column, or a frame with the key columns. ``None``: keys are
            selected privately (needs δ > 0).
        max_groups : int
            L0, groups per unit. Required with a declared ``privacy_unit`` (1 where each row is
            its own unit): dpkit never picks a bound for you.
        max_rows : int
            L∞, rows per (unit, group). Required with a declared ``privacy_unit`` (1 where each
            row is its own unit).
        max_rows_per_unit : int, optional
            L1, rows per unit over all groups.

        Raises
        ------
        PrivacyParameterError
            A bound is missing: larger bounds keep more of each unit's rows (less bias) and add
            more noise (``explain()`` shows it); :meth:`suggest_bounds` estimates them privately.
        """
        if not by:
            raise DataError("group_by needs at least one key column; use Query.agg for no keys.")
        for b in by:
            if not isinstance(b, str):
                raise DataError("group_by keys must be column names (str).")
        check_unreserved(by, "group_by")
        l0 = self._chosen(max_groups, "max_groups", "groups one unit may add to")
        linf = self._chosen(max_rows, "max_rows", "rows one unit may add to each group")
        return GroupBy(self._table, tuple(by), public_keys, l0, linf, max_rows_per_unit)

    def agg(
        self,
        *aggs: Aggregation,
        max_rows: int | None = None,
        max_rows_per_unit: int | None = None,
    ) -> GroupedQuery:
        """Aggregate the whole table (one group; ``max_rows`` rows per unit, required with a
        declared ``privacy_unit``)."""
        linf = self._chosen(max_rows, "max_rows", "rows one unit may add")
        return GroupedQuery(self._table, (), None, 1, linf, max_rows_per_unit, aggs)

    def partition_by(self, column: str, *, keys: object) -> Partitions:
        """Split the privacy units into disjoint parts by a public key column, for parallel
        composition (:meth:`dpkit.accounting.Accountant.parallel`).

        Each unit goes to one part: that of the first key, in the order of ``keys``, that any
        of its rows carries in ``column`` (its rows with other keys are dropped); rows whose
        key is not in ``keys`` are in no part. So the parts are disjoint in units by
        construction, and releases over them, each within the part's budget, cost that budget
        once, not once per part. With a column that is constant per unit (a user's home
        region) nothing is dropped.

        Parameters
        ----------
        column : str
            The partition column.
        keys : sequence
            Its public values, one part each (never read from the data).

        Examples
        --------
        >>> import polars as pl, dpkit as dp, dpkit.frame as dpf
        >>> df = pl.DataFrame({"user": [1, 1, 2, 3], "region": ["n", "n", "s", "s"],
        ...                    "spend": [5.0, 7.0, 1.0, 3.0]})
        >>> acct = dp.Accountant(dp.PureDP(epsilon=1.0))
        >>> parts = acct.parallel(dpf.Query(df, privacy_unit="user").partition_by(
        ...     "region", keys=["n", "s"]), budget=dp.PureDP(epsilon=1.0))
        >>> for region, q in parts.items():
        ...     r = q.agg(dpf.count(), max_rows=2).release(epsilon=1.0)
        >>> acct.spent   # two releases at epsilon=1, over disjoint units: 1, not 2
        PureDP(epsilon=1.0)
        """
        self._polars_only("partition_by")
        return Partitions(self._table, column, keys, _of_table)

    def suggest_bounds(
        self,
        *by: str,
        epsilon: float,
        upper: int = 1000,
        quantile: float = 0.9,
        accountant: SupportsCharge | None = None,
        rng: RNGLike = None,
    ) -> SuggestedBounds:
        """Suggest ``max_groups`` and ``max_rows`` from private quantiles of contributions.

        Each unit contributes how many groups (of the key columns ``by``) it has rows in, and
        its most rows in one group; the ``quantile`` of each, released privately at ε/2 each
        (:func:`dpkit.stats.quantile`) within ``[1, upper]``, is a bound that
        about that fraction of units fit. ``upper`` is a public cap, never read from the data.
        Costs ``epsilon`` (charged to ``accountant`` before anything is read); the release
        then needs its own budget.

        Notes
        -----
        Privacy guarantee: ε-DP with respect to the privacy unit (one unit adds or removes one
        number to each of the two lists; two quantiles at ε/2 compose to ε).

        Examples
        --------
        >>> import numpy as np, polars as pl, dpkit as dp, dpkit.frame as dpf
        >>> g = np.random.default_rng(0)
        >>> df = pl.DataFrame({"user": g.integers(0, 2000, 20_000),
        ...                    "shop": g.choice(["a", "b", "c", "d"], 20_000)})
        >>> q = dpf.Query(df, privacy_unit="user")
        >>> s = q.suggest_bounds("shop", epsilon=0.5, rng=dp.random.seeded(1))
        >>> s.bounds
        {'max_groups': 4, 'max_rows': 6}
        >>> g = q.group_by("shop", public_keys=["a", "b", "c", "d"], **s.bounds)
        """
        return suggest_bounds(
            self._table, tuple(by), epsilon=epsilon, upper=upper, quantile_=quantile,
            accountant=accountant, rng=rng,
        )  # fmt: skip

    def _chosen(self, bound: int | None, name: str, meaning: str) -> int:
        """A contribution bound the user chose; 1 where each row is its own unit (exact)."""
        if bound is not None:
            return bound
        if self._table.unit is None:
            return 1  # a unit is one row: it adds one row to one group, nothing to choose
        raise PrivacyParameterError(
            f"choose {name} (the {meaning}): with a privacy unit declared, dpkit does not pick "
            "contribution bounds for you. Rows beyond the bounds are dropped (bias); larger "
            "bounds add more noise: compare them with explain(). Query.suggest_bounds(...) "
            "estimates them from a private quantile of each unit's contributions (it costs "
            "budget)."
        )


def _of_table(table: Table) -> Query:
    """A query of an already prepared table (a part of a parallel composition)."""
    q = Query.__new__(Query)
    q._table = table
    return q


def _refuse_repeated_keys(public: Any, on: list[str]) -> None:
    """Refuse a public table that repeats a join key (its rows only: never the private table).

    Keys with a null never match (Polars joins do not match nulls), so they cannot copy a row.
    """
    try:
        keys = public.select(on).drop_nulls().collect()
    except Exception as exc:
        raise DataError(f"the public table cannot be read ({type(exc).__name__}).") from None
    if keys.height != keys.unique().height:
        raise DataError(
            "the public table repeats join key values, which would copy a private row into "
            "several rows, each counted as a unit (privacy_unit=None). Declare a privacy_unit "
            "column (the copies are then that unit's rows, bounded by max_rows and max_groups), "
            "or make the public keys unique."
        )
