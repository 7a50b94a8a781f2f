"""A grouped query: contribution bounds, the noise plan, explain(), release()."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from dpkit._checks import check_delta, check_epsilon, check_probability
from dpkit._missing import missing_error
from dpkit._progress import Progress
from dpkit.accounting._relation import holding_under
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.frame._aggs import Aggregation, Measure, check_output_names
from dpkit.frame._bounding import bound
from dpkit.frame._calibrate import Bounding, NoisePlan, noise_plan, zcdp_plan
from dpkit.frame._engine import as_lazy, polars
from dpkit.frame._explain import Explanation, FrameRelease
from dpkit.frame._finish import finish, public_totals
from dpkit.frame._partition import combine, unit_partition
from dpkit.frame._pipeline import (
    ALL,
    ROWS,
    Layout,
    check_working,
    missing_rows,
    prepare,
)
from dpkit.frame._selection import key_selection
from dpkit.frame._spark import spark_refuse_missing, spark_schema_check, spark_totals
from dpkit.frame._table import RESERVED, UNIT_ID, Table, check_unreserved, payer, schema_names
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.random import RNGLike, as_generator

__all__ = ["GroupBy", "GroupedQuery", "positive_int"]


def positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise PrivacyParameterError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


_MAX_GROUP_ROWS = 1 << 32  # per-row integers are within ±2^30: sums stay within ±2^62


def _no_overflow(totals: Any, buckets: Any) -> tuple[Any, Any]:
    """Refuse (before charging) a group with more than 2^32 bounded rows: its fixed-point sums
    could pass 2^63, and both engines' int64 sums wrap silently (a wrapped sum jumps by 2^64,
    which no noise covers). Every value sum and bucket count of a key runs over its ``__rows``."""
    if totals.height and int(totals[ROWS].max() or 0) > _MAX_GROUP_ROWS:
        raise DataError(
            "a group has more than 2^32 rows after contribution bounding; exact int64 sums "
            "cannot hold it. Group by finer keys or use smaller contribution bounds."
        )
    return totals, buckets


class GroupBy:
    """A query grouped by keys, awaiting its aggregations (:meth:`agg`)."""

    def __init__(
        self,
        table: Table,
        by: tuple[str, ...],
        public_keys: object,
        max_groups: int,
        max_rows: int,
        max_rows_per_unit: int | None,
    ) -> None:
        self._args = (table, by, public_keys, max_groups, max_rows, max_rows_per_unit)

    def agg(self, *aggs: Aggregation) -> GroupedQuery:
        """The aggregations to release per group (``dpkit.frame.count``, ``sum``, …)."""
        return GroupedQuery(*self._args, aggs)


class GroupedQuery:
    """A fully specified grouped query: explain it, release it, or test it non-privately."""

    def __init__(
        self,
        table: Table,
        by: tuple[str, ...],
        public_keys: object,
        max_groups: int,
        max_rows: int,
        max_rows_per_unit: int | None,
        aggs: tuple[Aggregation, ...],
    ) -> None:
        self._table = table
        self._by = by
        self._bounding = Bounding(
            positive_int(max_rows, "max_rows"),
            positive_int(max_groups, "max_groups"),
            None
            if max_rows_per_unit is None
            else positive_int(max_rows_per_unit, "max_rows_per_unit"),
            table.replace,
        )
        if not aggs or not all(isinstance(a, Aggregation) for a in aggs):
            raise DataError("agg needs aggregations such as dpkit.frame.count() or sum(...).")
        names = [a.alias for a in aggs]
        if len(set(names)) != len(names):
            raise DataError(f"aggregation names must be unique, got {names}; use alias=.")
        check_output_names(by, aggs)
        # the identity column is the bounding's, not a key or a value
        check_unreserved([*by, *(c for a in aggs for c in a.columns)], "the keys and aggregations")
        # nor may they be named like a column the bounding writes beside them
        check_working(
            [*by, *(c for a in aggs for c in a.columns)], [m for a in aggs for m in a.measures()]
        )
        self._aggs = aggs
        self._public = None if public_keys is None else self._public_frame(public_keys)
        if not by:
            self._public = polars().DataFrame({ALL: [0]})

    # -- validation -------------------------------------------------------------------------
    def _public_frame(self, keys: object) -> Any:
        pl = polars()
        if isinstance(keys, pl.DataFrame | pl.LazyFrame) or type(keys).__module__.split(".")[0] == (
            "pandas"
        ):
            frame = as_lazy(keys, "public_keys").collect()
        elif len(self._by) == 1:
            try:
                frame = pl.DataFrame({self._by[0]: list(keys)})  # type: ignore[call-overload]
            except (TypeError, ValueError):
                raise DataError("public_keys must be a list of key values or a frame.") from None
        else:
            try:
                frame = pl.DataFrame([tuple(k) for k in keys], schema=list(self._by), orient="row")  # type: ignore[attr-defined]
            except (TypeError, ValueError):
                raise DataError("public_keys must be a list of key tuples or a frame.") from None
        missing = [c for c in self._by if c not in frame.columns]
        if missing:
            raise DataError(f"public_keys lacks the key column(s) {missing}.")
        frame = frame.select(list(self._by))
        if frame.height != frame.unique().height:
            raise DataError("public_keys contains duplicate keys.")
        return frame

    def _layout(self) -> Layout:
        unit = UNIT_ID  # the identity captured when the query was made (see _table)
        keys = self._by or (ALL,)
        values = sorted({c for a in self._aggs for c in a.columns})
        return Layout(unit, tuple(keys), tuple(values))

    def _source(self) -> Any:
        pl = polars()
        lf = self._table.data
        if not self._by:
            lf = lf.with_columns(pl.lit(0, dtype=pl.Int32).alias(ALL))
        return lf

    def _check_schema(self, schema: Any, layout: Layout) -> None:
        pl = polars()
        names = list(schema.keys())
        wanted = [*self._by, *layout.values]  # UNIT_ID is there: no step can drop it
        missing = [c for c in wanted if c not in names]
        if missing:
            shown = [n for n in names if not n.startswith(RESERVED)]
            raise DataError(
                f"unknown column(s) {missing}; the table has {shown}. Check the spelling."
            )
        for c in [UNIT_ID, *self._by]:
            # Object columns hold arbitrary Python values: no engine can hash or sort them
            # reliably, and their failure would surface late, so they are refused here.
            if schema[c] == pl.Object:
                name = (self._table.unit or "row") if c == UNIT_ID else c
                raise DataError(
                    f"column {name!r} holds Python objects; cast it to a string, integer or "
                    "categorical column before grouping or bounding by it."
                )
        for c in layout.values:
            if not schema[c].is_numeric():
                raise DataError(f"column {c!r} must be numeric to be aggregated, not {schema[c]}.")
        if self._public is not None and self._by:
            for c in self._by:
                if self._public.schema[c] != schema[c]:
                    try:
                        self._public = self._public.with_columns(
                            pl.col(c).cast(schema[c], strict=True)
                        )
                    except Exception:
                        raise DataError(
                            f"public_keys column {c!r} cannot be cast to the data's {schema[c]}."
                        ) from None

    def _measures(self) -> tuple[Measure, ...]:
        seen: dict[Measure, None] = {}
        for a in self._aggs:
            for m in a.measures():
                seen.setdefault(m)
        return tuple(seen)

    def _selection_method(self, selection: str | None) -> str:
        if selection is not None:
            return selection
        b = self._bounding
        one = b.max_groups == 1
        return "truncated_geometric" if one and not b.replace else "gaussian"

    def _plan(
        self, epsilon: object, delta: object, noise: str | None, selection: str | None,
        selection_share: float, rho: object = None,
    ) -> NoisePlan:  # fmt: skip
        if rho is not None:
            return zcdp_plan(self._measures(), self._bounding, self._public is not None,
                             epsilon=epsilon, delta=delta, noise=noise, rho=rho)  # fmt: skip
        eps, dlt = check_epsilon(epsilon), check_delta(delta)
        share = check_probability(selection_share, "selection_share")
        if share >= 1.0:
            raise PrivacyParameterError("selection_share must be below 1.")
        sel = None
        kind = noise or ("laplace" if dlt == 0 else "gaussian")
        if kind not in ("laplace", "gaussian"):
            raise PrivacyParameterError(f"noise must be 'laplace' or 'gaussian', got {noise!r}.")
        if self._public is None:
            b = self._bounding
            # keys are selected on the (unit, key) pairs kept by L0 (before any L1 row cap)
            groups = b.max_groups
            if noise is None and groups == 1:
                kind = "laplace"  # one group per unit: pure noise, all of δ to selection
            if dlt == 0:
                raise PrivacyParameterError(
                    "private key selection needs delta > 0; pass delta (e.g. 1e-6), or give "
                    "public_keys."
                )
            method = self._selection_method(selection)
            if method == "count" and kind != "laplace":
                raise PrivacyParameterError(
                    "selection='count' thresholds the Laplace-noised count: use noise='laplace'."
                )
            sel_delta = dlt if kind == "laplace" else dlt / 2
            sel = key_selection(
                method,
                # the count threshold spends no ε of its own: its count's noise is paid for
                epsilon=eps if method == "count" else eps * share,
                delta=sel_delta,
                max_groups=groups,
                replace=self._bounding.replace,
            )
        elif kind == "gaussian" and dlt == 0:
            raise PrivacyParameterError("Gaussian noise needs delta > 0.")
        return noise_plan(
            self._measures(), self._bounding, epsilon=eps, delta=dlt, noise=kind, selection=sel
        )

    def _steps(self, plan: NoisePlan) -> tuple[str, ...]:
        b = self._bounding
        t = self._table
        unit = "each row" if t.unit is None else f"{t.unit!r}"
        fixed = f"privacy unit: {unit}, fixed before any step; neighbours: {t.neighbouring.name}"
        steps = [fixed, *t.steps]
        what = "drop" if t.missing == "drop" else "refuse (before charging) any"
        steps.append(
            f"{what} rows with null/NaN in aggregated columns {list(self._layout().values)}"
        )
        steps.append(f"keep <= {b.max_rows} row(s) per (unit, key), smallest keyed hash")
        steps.append(f"keep <= {b.max_groups} key(s) per unit, smallest keyed hash")
        if b.max_rows_per_unit is not None:
            steps.append(f"keep <= {b.max_rows_per_unit} row(s) per unit, smallest keyed hash")
        for a in self._aggs:
            what = f"{a.stat}({a.column})" if a.column else a.stat
            extra = f" clamped to {a.bounds}" if a.bounds else ""
            steps.append(f"aggregate {what}{extra} as {a.alias!r}")
        if self._public is not None and self._by:
            steps.append(f"release exactly the {self._public.height} public key(s)")
        elif self._by:
            steps.append("release keys chosen by private key selection")
        return tuple(steps)

    # -- public API --------------------------------------------------------------------------
    def explain(
        self,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        noise: str | None = None,
        selection: str | None = None,
        selection_share: float = 0.5,
        rho: float | None = None,
    ) -> Explanation:
        """The plan, bounds, sensitivities, noise scales and total cost; charges nothing.

        The plan is run on an empty frame with the data's schema, so a query that cannot run
        fails here, before any budget is spent.
        """
        plan = self._plan(epsilon, delta, noise, selection, selection_share, rho)
        layout = self._layout()
        if self._table.spark:
            spark_schema_check(self._table.data, self._by, layout)
        else:
            src = self._source()
            try:
                schema = src.collect_schema()
            except Exception as exc:
                raise DataError(
                    f"the query's transformations fail on this table: {type(exc).__name__}"
                ) from None
            self._check_schema(schema, layout)
            try:
                self._totals(src.clear(), layout, plan, (1, 2, 3, 4))
            except DataError:
                raise
            except Exception as exc:
                raise DataError(
                    f"the query cannot run on this table's schema ({type(exc).__name__})."
                ) from None
        # the event the release charges: it declares the table's relation (see ``release``)
        event = holding_under(plan.event, self._table.neighbouring)
        return Explanation(
            self._steps(plan), plan, plan.epsilon, plan.delta, event, tuple(self._aggs)
        )

    def _totals(
        self,
        src: Any,
        layout: Layout,
        plan: NoisePlan,
        seeds: Sequence[int],
        streaming: bool = False,
        partitions: int = 1,
        progress: Progress | None = None,
    ) -> tuple[Any, Any]:
        pl = polars()
        own = self._table.unit is None
        # Each row its own unit: partition by the row's content, so that identical rows (which
        # prepare numbers by occurrence, for their hashes) share a partition and get the
        # numbers they get in one pass.
        by = [*layout.keys, *layout.values] if own else layout.unit
        engine = "streaming" if streaming else "auto"
        # One pass per partition of the units, run one after another so that only one
        # partition's bounding state is held at a time; integer totals add up exactly.
        all_totals: list[Any] = []
        all_buckets: list[Any] | None = []
        for part in range(partitions):
            rows = unit_partition(src, by, int(seeds[2]), part, partitions)
            prep = prepare(rows, layout, plan, seeds, own_unit=own, defer=True)
            totals, buckets = bound(
                prep, layout, plan, self._bounding, streaming=streaming, seeds=seeds,
                occurrence=own,
            )  # fmt: skip
            if buckets is None:
                all_totals.append(totals.collect(engine=engine))
                all_buckets = None
            else:
                out: list[Any] = pl.collect_all([totals, buckets], engine=engine)
                all_totals.append(out[0])
                assert all_buckets is not None
                all_buckets.append(out[1])
            if progress is not None:  # passes done: a public count (Polars reports nothing finer)
                progress(part + 1, partitions)
        return combine(all_totals, all_buckets, layout.keys)

    def _exact(
        self, plan: NoisePlan, seeds: Sequence[int], streaming: bool = False, partitions: int = 1,
        progress: Progress | None = None,
    ) -> tuple[Any, Any]:  # fmt: skip
        """Exact bounded totals (before charging: any data error is raised here)."""
        layout = self._layout()
        t = self._table
        if t.spark:
            if any(a.unit_total is not None for a in self._aggs):
                raise DataError(
                    "sum(..., unit_total=) runs on the Polars engine; on Spark, bound each "
                    "row with bounds= and max_rows."
                )
            if t.missing == "raise" and layout.values:
                spark_refuse_missing(t.data, layout.values)
            own = t.unit is None
            return _no_overflow(*spark_totals(t.data, own, self._bounding, layout, plan, seeds))
        src = self._source()
        checks = []  # refused before charging, in one pass over the data as given
        # (rows with a null unit are not there: the table dropped them, see _table.table)
        # Only the data's own nulls are refused: those a step makes (from a predicate on
        # private values) are dropped by prepare, a row-wise filter; refusing them revealed
        # whether any row satisfied the predicate, for free.
        given = [c for c in layout.values if c in schema_names(t.source, "the table")]
        if t.missing == "raise" and given:
            checks.append(missing_rows(given).alias("__missing"))
        try:
            found = t.source.select(checks).collect().row(0, named=True) if checks else {}
        except Exception as exc:  # a transformation that fails on the data (a strict cast)
            raise DataError(
                f"computing the bounded aggregates failed ({type(exc).__name__})."
            ) from None
        if found.get("__missing"):
            raise missing_error("an aggregated column")
        try:
            out = self._totals(src, layout, plan, seeds, streaming, partitions, progress)
        except Exception as exc:
            raise DataError(
                f"computing the bounded aggregates failed ({type(exc).__name__})."
            ) from None
        return _no_overflow(*out)

    def release(
        self,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        accountant: SupportsCharge | None = None,
        rng: RNGLike = None,
        noise: str | None = None,
        selection: str | None = None,
        selection_share: float = 0.5,
        alpha: float = 0.05,
        streaming: bool = False,
        partitions: int = 1,
        rho: float | None = None,
        progress: Progress | None = None,
    ) -> FrameRelease:
        """Release the noisy per-group aggregates.

        Parameters
        ----------
        epsilon, delta : float
            The whole query's cost (key selection included). Private key selection needs δ > 0.
        rho : float, optional
            Instead of ε and δ, with public keys: a zCDP budget for Gaussian noise, split over
            the aggregates and paid in ρ (``docs/accuracy.md``).
        accountant : Accountant, optional
            Charged with the query's event after everything has been validated and the exact
            bounded aggregates computed, and before any noise is drawn.
        rng : None, int or numpy.random.Generator
            ``None`` (default): secure noise and a fresh secret hash key. An int seed makes the
            release reproducible and is **not secure**.
        noise : {"laplace", "gaussian"}, optional
            Default: Laplace for δ = 0 or one group per unit, else Gaussian.
        selection : {"truncated_geometric", "laplace", "gaussian", "count"}, optional
            Private key selection (default: truncated geometric for one group per unit under
            add/remove, else the weighted Gaussian). ``"count"`` (add/remove, Laplace noise, a
            ``count()`` among the aggregations) releases a key iff its noisy row count passes a
            threshold: no separate selection count, the whole ε goes to the aggregates and
            ``selection_share`` is unused; released counts are then never below the threshold.
        selection_share : float
            Fraction of ε spent on key selection (default 0.5).
        alpha : float
            Intervals are (1 − alpha) per cell, for the noise only.
        streaming : bool
            Run the Polars plan on the streaming engine (inputs larger than memory, e.g. a
            ``pl.scan_parquet`` frame).
        partitions : int
            Bound the privacy units in this many passes, one hash partition of the units at a
            time (all rows of a unit in one partition), so that the bounding state of only
            ``1/partitions`` of the units is in memory at once; each pass reads the input again.
            The release is bit-identical for every value (exact integer totals): this is a
            memory/time setting, chosen by the caller, never from the data. Polars engine only
            (Spark distributes the bounding itself).
        progress : callable, optional
            ``progress(done, total)`` after each of the ``partitions`` passes (e.g. a
            ``dpkit._progress.ProgressBar``); off by default. Only the count of passes is
            reported: Polars gives no progress within a pass, and a count of rows would be data.

        Returns
        -------
        FrameRelease
            ``.frame`` (a Polars DataFrame), ``.event``, ``.explanation``.

        Notes
        -----
        An empty table is answered like any other (under add/remove its size is private, and a
        refusal would reveal that it is empty): public keys get noisy zeros; private selection
        releases no key.
        """
        a = check_probability(alpha, "alpha")
        parts = positive_int(partitions, "partitions")
        accountant = payer(self._table, accountant)
        explanation = self.explain(
            epsilon=epsilon, delta=delta, noise=noise, selection=selection,
            selection_share=selection_share, rho=rho,
        )  # fmt: skip
        plan = explanation.plan
        gen = as_generator(rng)
        seeds = [int(v) for v in gen.integers(0, 2**63 - 1, size=4, dtype="int64")]
        totals, buckets = self._exact(plan, seeds, streaming, parts, progress)
        keys = list(self._layout().keys)
        if self._public is not None:
            totals, buckets = public_totals(totals, buckets, self._public, keys)
        # the plan's sensitivities are the table's relation's (``replace`` doubles them), so
        # its event declares that relation: an accountant refuses to mix it with the other
        event = explanation.event
        charge(accountant, event, "frame query", delta=plan.delta or None, rng=rng)
        frame = finish(
            totals, buckets, keys=keys, aggs=self._aggs, plan=plan, gen=gen, alpha=a,
            drop_keys=(ALL,),
        )  # fmt: skip
        if self._table.pandas:  # pandas in, pandas out (post-processing of the release)
            frame = frame.to_pandas()
        return FrameRelease(frame, event, explanation)

    def bounded_aggregates(
        self, *, seed: int = 0, streaming: bool = False, partitions: int = 1
    ) -> Any:
        """NOT PRIVATE: the exact bounded aggregates, with no noise and no accountant.

        For testing a pipeline on data one is allowed to see. Returns per key the exact integer
        sums the release would noise (``__rows``, ``__units``, fixed-point sums at the exponents
        a release at ε = 1 would use) for the given hash ``seed``. ``streaming`` and
        ``partitions`` are those of :meth:`release` (the totals do not depend on them).
        """
        parts = positive_int(partitions, "partitions")
        delta = 0.0 if self._public is not None else 1e-9
        plan = self._plan(1.0, delta, None, None, 0.5)
        seeds = [int(v) for v in as_generator(seed).integers(0, 2**63 - 1, size=4, dtype="int64")]
        totals, buckets = self._exact(plan, seeds, streaming, parts)
        keys = list(self._layout().keys)
        totals = totals.sort(keys, nulls_last=True)
        if buckets is not None:
            buckets = buckets.sort([*keys, "__measure", "__bucket"], nulls_last=True)
            return totals, buckets
        return totals
