"""Private queries over tables: a privacy unit and row-wise transformations before grouping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpkit._missing import MISSING_DEFAULT, Missing, check_missing
from dpkit.accounting import Neighbouring
from dpkit.errors import DataError
from dpkit.frame._aggs import Aggregation
from dpkit.frame._engine import as_lazy, is_spark
from dpkit.frame._grouped import GroupBy, GroupedQuery
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
        that such a row exists); ``"drop"`` removes those rows before contribution bounding (a
        row-wise filter: the guarantee holds, and the number of rows used stays private). Null
        key values are not missing: they form a group of their own.

    Notes
    -----
    Privacy guarantee: :meth:`GroupedQuery.release` is (ε, δ)-DP with respect to the privacy unit
    (seed 004, "whether an individual does or does not include their data"), provided the
    transformations (:meth:`filter`, :meth:`with_columns`, :meth:`join`) are *row-wise*: each
    output row depends only on one input row and public tables. Expressions that look at other
    rows (``pl.col("x").mean()``, windows, ``shift``) would let one unit change other units'
    rows, and are the caller's responsibility to avoid.

    Examples
    --------
    >>> import polars as pl, dpkit.frame as dpf
    >>> df = pl.DataFrame({"user": [1, 1, 2, 3], "city": ["a", "a", "b", "a"],
    ...                    "amount": [5.0, 7.0, 1.0, 3.0]})
    >>> q = dpf.Query(df, privacy_unit="user").group_by("city", public_keys=["a", "b"])
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
        self._spark = is_spark(data)
        self._data: Any = data if self._spark else as_lazy(data)
        if privacy_unit is not None and (not isinstance(privacy_unit, str) or not privacy_unit):
            raise DataError("privacy_unit must be a column name (str) or None (one row per unit).")
        self._unit = privacy_unit
        self._replace = is_replace(neighbouring)
        self._neighbouring = neighbouring
        self._missing = check_missing(missing)
        self._steps: tuple[str, ...] = ()

    def _derive(self, data: object, step: str) -> Query:
        q = Query.__new__(Query)
        q.__dict__.update(self.__dict__)
        q._data, q._steps = data, (*self._steps, step)
        return q

    def _polars_only(self, what: str) -> None:
        if self._spark:
            raise DataError(
                f"{what} runs on Polars frames; on Spark, transform the DataFrame with Spark "
                "before building the Query (row-wise only)."
            )

    def filter(self, *predicates: Any) -> Query:
        """Keep the rows where every (row-wise) Polars predicate holds."""
        self._polars_only("filter")
        return self._derive(
            self._data.filter(*predicates), f"filter {len(predicates)} predicate(s)"
        )

    def with_columns(self, *exprs: Any, **named: Any) -> Query:
        """Add or redefine columns with row-wise Polars expressions."""
        self._polars_only("with_columns")
        names = [*named]
        return self._derive(self._data.with_columns(*exprs, **named), f"derive columns {names}")

    def join(self, public: object, *, on: str | Sequence[str], how: str = "inner") -> Query:
        """Join a *public* table (its content is not protected) on key columns.

        ``how`` is ``"inner"`` or ``"left"``: every output row still comes from one private row,
        so each unit's rows after the join depend only on its own rows.
        """
        self._polars_only("join")
        if how not in ("inner", "left"):
            raise DataError(
                "join how must be 'inner' or 'left' (other joins create unit-less rows)."
            )
        cols = [on] if isinstance(on, str) else list(on)
        return self._derive(
            self._data.join(as_lazy(public, "public"), on=cols, how=how), f"join public on {cols}"
        )

    def group_by(
        self,
        *by: str,
        public_keys: object = None,
        max_groups: int = 1,
        max_rows: int = 1,
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
            L0, groups per unit.
        max_rows : int
            L∞, rows per (unit, group).
        max_rows_per_unit : int, optional
            L1, rows per unit over all groups.
        """
        if not by:
            raise DataError("group_by needs at least one key column; use Query.agg for no keys.")
        for b in by:
            if not isinstance(b, str):
                raise DataError("group_by keys must be column names (str).")
        return GroupBy(self, tuple(by), public_keys, max_groups, max_rows, max_rows_per_unit)

    def agg(
        self, *aggs: Aggregation, max_rows: int = 1, max_rows_per_unit: int | None = None
    ) -> GroupedQuery:
        """Aggregate the whole table (one group; ``max_rows`` rows per unit)."""
        return GroupedQuery(self, (), None, 1, max_rows, max_rows_per_unit, aggs)
