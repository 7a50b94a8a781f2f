"""Units within every bound are summed whole; only the others go through the selection.

The split must keep exactly the rows the selection alone keeps: checked against the selection
run on every unit, on tables mixing units within and beyond each bound (L∞, L0, L1), with keys
whose equality is subtle (null, NaN, −0.0) and with the selection weights of private keys.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit.frame as dpf
from dpkit.frame._bounding import _bound, bound, whole_units
from dpkit.frame._calibrate import Bounding
from dpkit.frame._pipeline import NPAIRS, prepare

B = (0.0, 100.0)
SEEDS = (5, 6, 7, 8)


def _table(seed: int, units: int = 400, rows: int = 1200) -> pl.DataFrame:
    # most units have 1–4 rows (within the bounds below), a few have dozens (beyond them)
    g = np.random.default_rng(seed)
    user = np.concatenate([g.integers(0, units, rows), np.repeat([units, units + 1], 40)])
    n = user.size
    key = g.integers(0, 6, n).astype(float)
    key[g.random(n) < 0.05] = np.nan
    key[g.random(n) < 0.05] = -0.0
    return pl.DataFrame(
        {
            "user": user,
            "key": pl.Series(key).fill_nan(None).fill_null(float("nan")),
            "k2": pl.Series(g.choice(["a", "b"], n)).scatter(np.arange(0, n, 13), None),
            "x": np.round(g.uniform(-20, 120, n), 3),
        }
    )


def _plans(df: pl.DataFrame, bounding: Bounding, keys: tuple[str, ...]) -> tuple[Any, ...]:
    q = dpf.Query(df, privacy_unit="user")
    if keys:
        gq = q.group_by(
            *keys,
            max_rows=bounding.max_rows,
            max_groups=bounding.max_groups,
            max_rows_per_unit=bounding.max_rows_per_unit,
        ).agg(dpf.count(), dpf.count_units(), dpf.sum("x", bounds=B))
    else:
        gq = q.agg(dpf.count(), dpf.mean("x", bounds=B), max_rows=bounding.max_rows)
    plan = gq.explain(epsilon=1.0, delta=1e-6).plan
    layout = gq._layout()
    prep = prepare(gq._source(), layout, plan, SEEDS, own_unit=False)
    return prep, layout, plan


CASES = [
    (Bounding(3, 3, 3, False), ("key", "k2")),  # L1: SmartNoise's max_ids
    (Bounding(2, 2, 3, False), ("key",)),
    (Bounding(3, 1, None, False), ()),  # no GROUP BY, L∞ > 1: one pair per unit
    (Bounding(2, 1, 2, False), ()),
]


@pytest.mark.parametrize(("bounding", "keys"), CASES)
@pytest.mark.parametrize("sort", [True, False])
def test_split_keeps_the_rows_the_selection_keeps(
    bounding: Bounding, keys: tuple[str, ...], sort: bool
) -> None:
    prep, layout, plan = _plans(_table(len(keys) + bounding.max_rows), bounding, keys)
    got, _ = bound(prep, layout, plan, bounding, sort=sort)
    want, _ = _bound(prep, layout, plan, bounding, sort=sort)
    by = list(layout.keys)
    got, want = got.collect().sort(by), want.collect().sort(by)
    assert got.columns == want.columns
    assert got.equals(want)
    # both kinds of units are there: the split is exercised, not bypassed
    flags = whole_units(prep, layout, bounding)[1].collect()
    assert 0 < int(flags["__whole"].sum()) < flags.height


def test_private_keys_weights_are_the_selections() -> None:
    # Gaussian key selection weighs each kept pair by floor(2^20/√t), t the unit's kept keys
    df = _table(3)
    q = dpf.Query(df, privacy_unit="user")
    gq = q.group_by("key", max_rows=2, max_groups=3, max_rows_per_unit=4)
    gq = gq.agg(dpf.count(), dpf.sum("x", bounds=B))
    plan = gq.explain(epsilon=1.0, delta=1e-6, selection="gaussian").plan
    assert plan.selection is not None and plan.selection.method == "gaussian"
    layout = gq._layout()
    b = Bounding(2, 3, 4, False)
    prep = prepare(gq._source(), layout, plan, SEEDS, own_unit=False)
    for sort in (True, False):
        got = bound(prep, layout, plan, b, sort=sort)[0].collect().sort("key")
        want = _bound(prep, layout, plan, b, sort=sort)[0].collect().sort("key")
        assert got.equals(want) and int(got["__weight"].sum()) > 0


def test_a_unit_at_a_bound_is_whole_and_one_beyond_it_is_selected() -> None:
    # user 1: 3 rows in one key (= L∞); user 2: 4 rows (> L∞); user 3: 2 keys (= L0);
    # user 4: 3 keys (> L0); user 5: 3 rows over 3 keys with L1 = 2 (> L1)
    df = pl.DataFrame(
        {
            "user": [1, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4, 4, 5, 5, 5],
            "key": ["a", "a", "a", "a", "a", "a", "a", "a", "b", "a", "b", "c", "a", "b", "a"],
            "x": [1.0] * 15,
        }
    )
    gq = dpf.Query(df, privacy_unit="user").group_by("key", max_rows=3, max_groups=2)
    gq = gq.agg(dpf.count())
    plan = gq.explain(epsilon=1.0, delta=1e-6).plan
    layout = gq._layout()
    prep = prepare(gq._source(), layout, plan, SEEDS, own_unit=False)

    def whole(b: Bounding) -> dict[int, int]:
        flags = whole_units(prep, layout, b)[1].filter(pl.col("__whole")).collect()
        return dict(flags.select(layout.unit, NPAIRS).iter_rows())

    assert whole(Bounding(3, 2, None, False)) == {1: 1, 3: 2, 5: 2}
    assert whole(Bounding(3, 2, 2, False)) == {3: 2}


@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("null_rows", [3, 4])  # within every bound; beyond L∞ (keys) or L1
@pytest.mark.parametrize("keys", [("key",), ()])
def test_a_null_unit_is_one_unit_on_both_sides_of_the_split(
    keys: tuple[str, ...], null_rows: int, sort: bool
) -> None:
    # group_by makes the null unit one unit; the split's joins must match it too, else its
    # rows vanish (whole: not summed; beyond a bound: not selected) where the selection keeps them
    user = [None] * null_rows + [1, 1, 2, 3, 3, 3, 3]
    df = pl.DataFrame(
        {
            "user": user,
            "key": [*["a", "b", "a", "a"][:null_rows], "a", "a", "b", "a", "b", "b", "b"],
            "x": [float(i) for i in range(len(user))],
        }
    )
    q = dpf.Query(df, privacy_unit="user")
    if keys:
        gq = q.group_by(*keys, max_rows=2, max_groups=2, max_rows_per_unit=3)
        gq = gq.agg(dpf.count(), dpf.count_units(), dpf.sum("x", bounds=B))
        bounding = Bounding(2, 2, 3, False)
    else:
        gq = q.agg(dpf.count(), dpf.sum("x", bounds=B), max_rows=3)
        bounding = Bounding(3, 1, None, False)
    plan = gq.explain(epsilon=1.0, delta=1e-6).plan
    layout = gq._layout()
    by = list(layout.keys)
    prep = prepare(gq._source(), layout, plan, SEEDS, own_unit=False)
    got = bound(prep, layout, plan, bounding, sort=sort)[0].collect().sort(by)
    want = _bound(prep, layout, plan, bounding, sort=sort)[0].collect().sort(by)
    assert got.equals(want)
    # the one-sort plan agrees with the group-by plan (its first unit, null, ranked too)
    other = _bound(prep, layout, plan, bounding, sort=not sort)[0].collect().sort(by)
    assert other.equals(want)
    assert int(got["__rows"].sum()) >= null_rows  # the null unit's rows (some) are counted


_ROW = st.tuples(
    st.sampled_from([None, float("nan"), -0.0, 0.0, 1.0, 2.0, 3.0]),  # the unit
    st.sampled_from([None, float("nan"), -0.0, 0.0, 1.0]),  # a float key
    st.sampled_from(["a", "", None]),  # a text key
    st.one_of(st.floats(-20, 20, allow_nan=False), st.just(-0.0)),
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    rows=st.lists(_ROW, min_size=1, max_size=20),
    bounds=st.tuples(st.integers(1, 3), st.integers(1, 3), st.sampled_from([None, 1, 2, 4])),
    nkeys=st.integers(0, 2),
    gaussian=st.booleans(),
    sort=st.booleans(),
    streaming=st.booleans(),
    values=st.booleans(),
    own=st.booleans(),
)
def test_split_equals_the_selection_on_small_tables(
    rows: list[tuple[Any, ...]],
    bounds: tuple[int, int, int | None],
    nkeys: int,
    gaussian: bool,
    sort: bool,
    streaming: bool,
    values: bool,
    own: bool,
) -> None:
    # null, NaN and signed-zero units and keys, units at, below and beyond each bound; with
    # and without a value (without one, even the row hash is computed after the split); each
    # row its own unit too (the row hash then numbers identical rows)
    linf, l0, l1 = bounds
    schema = {"user": pl.Float64, "key": pl.Float64, "k2": pl.String, "x": pl.Float64}
    df = pl.DataFrame(rows, schema=schema, orient="row")
    keys = ("key", "k2")[:nkeys]
    q = dpf.Query(df, privacy_unit=None if own else "user")
    if keys:
        gq = q.group_by(*keys, max_rows=linf, max_groups=l0, max_rows_per_unit=l1)
        aggs = [dpf.count(), dpf.count_units()] + ([dpf.sum("x", bounds=B)] if values else [])
        gq = gq.agg(*aggs)
        plan = gq.explain(epsilon=1.0, delta=1e-6, selection="gaussian" if gaussian else None).plan
        bounding = Bounding(linf, l0, l1, False)
    else:
        aggs = [dpf.count()] + ([dpf.mean("x", bounds=B)] if values else [])
        gq = q.agg(*aggs, max_rows=linf, max_rows_per_unit=l1)
        plan = gq.explain(epsilon=1.0, delta=1e-6).plan
        bounding = Bounding(linf, 1, l1, False)
    layout = gq._layout()
    by = list(layout.keys)
    prep = prepare(gq._source(), layout, plan, SEEDS, own_unit=own)
    engine = "streaming" if streaming else "auto"
    got = bound(prep, layout, plan, bounding, streaming=streaming, sort=sort)[0]
    want = _bound(prep, layout, plan, bounding, streaming=streaming, sort=sort)[0]
    got, want = got.collect(engine=engine), want.collect(engine=engine)
    assert got.sort(by).equals(want.sort(by))
    # hashes deferred to the rows beyond a bound: the same rows kept, the same integers
    late = prepare(gq._source(), layout, plan, SEEDS, own_unit=own, defer=True)
    lazy = bound(
        late, layout, plan, bounding, streaming=streaming, sort=sort, seeds=SEEDS, occurrence=own
    )[0]
    assert lazy.collect(engine=engine).sort(by).equals(want.sort(by))


@pytest.mark.parametrize("keys", [("key", "k2"), ()])
@pytest.mark.parametrize("values", [True, False])
def test_deferred_hashes_keep_the_rows_of_every_hash(keys: tuple[str, ...], values: bool) -> None:
    # the larger table with units beyond every bound: prepare(defer=True) then bound adds the
    # hashes to the selected units' rows; the totals are the selection's on the fully hashed
    # rows, under several hash keys (the rows kept change with the key, the equality must not)
    df = _table(11)
    q = dpf.Query(df, privacy_unit="user")
    if keys:
        gq = q.group_by(*keys, max_rows=2, max_groups=2, max_rows_per_unit=3)
        bounding = Bounding(2, 2, 3, False)
        aggs = [dpf.count(), dpf.count_units()] + ([dpf.sum("x", bounds=B)] if values else [])
        gq = gq.agg(*aggs)
    else:
        aggs = [dpf.count()] + ([dpf.sum("x", bounds=B)] if values else [])
        gq = q.agg(*aggs, max_rows=3)
        bounding = Bounding(3, 1, None, False)
    plan = gq.explain(epsilon=1.0, delta=1e-6).plan
    layout = gq._layout()
    by = list(layout.keys)
    totals = set()
    for seeds in [SEEDS, (1, 2, 3, 4), (9, 10, 11, 12)]:
        full = prepare(gq._source(), layout, plan, seeds, own_unit=False)
        want = _bound(full, layout, plan, bounding)[0].collect().sort(by)
        late = prepare(gq._source(), layout, plan, seeds, own_unit=False, defer=True)
        assert "__g" not in late.collect_schema().names()
        assert ("__h" in late.collect_schema().names()) == values
        got = bound(late, layout, plan, bounding, seeds=seeds)[0].collect().sort(by)
        assert got.equals(want)
        sums = [m.measure.name for m in plan.measures if m.measure.kind == "value"]
        totals.add(tuple(tuple(want[c]) for c in ["__rows", *sums]))
    # the selection is exercised: another key keeps other rows (other sums, or other keys'
    # counts where a unit's L0 keys change); a bare count keeps min(rows, L∞) whatever the key
    assert len(totals) > 1 or not (values or keys)


_KEY_KINDS: dict[str, tuple[list[Any], Any]] = {
    "enum": (["x", "y", None], pl.Enum(["x", "y", "z"])),
    "categorical": (["x", "", None], pl.Categorical),
    "date": ([dt.date(2020, 1, 1), dt.date(1960, 5, 5), None], pl.Date),
    "float32": ([-0.0, 0.0, float("nan"), None, 2.0], pl.Float32),
    "boolean": ([True, False, None], pl.Boolean),
    "int8": ([-128, 0, 127, None], pl.Int8),
}


@pytest.mark.parametrize("kind", sorted(_KEY_KINDS))
def test_deferred_hashes_on_every_key_type_and_extreme_values(kind: str) -> None:
    # keys of each hashed type (the pair hash is computed after prepare's canonical float key),
    # values far beyond the bounds and subnormal (the row hash rounds them), duplicate rows,
    # persons at, below and one past each bound (1 to 6 rows): the deferred hashes keep the
    # rows of the fully hashed selection, with the Gaussian selection weights
    g = np.random.default_rng(len(kind))
    pool, dtype = _KEY_KINDS[kind]
    sizes = g.integers(1, 7, 60)
    n = int(sizes.sum())
    xs = [1e300, -1e300, 5e-324, -0.0, 49.5, 3.25]
    df = pl.DataFrame(
        {
            "user": np.repeat(np.arange(sizes.size), sizes),
            "k": pl.Series([pool[i] for i in g.integers(0, len(pool), n)], dtype=dtype),
            "x": [xs[i] for i in g.integers(0, len(xs), n)],
        }
    )
    df = pl.concat([df, df.head(40)])  # duplicate rows
    for l1, values in [(3, True), (4, False)]:
        gq = dpf.Query(df, privacy_unit="user").group_by(
            "k", max_rows=2, max_groups=2, max_rows_per_unit=l1
        )
        aggs = [dpf.count(), dpf.count_units()] + ([dpf.sum("x", bounds=B)] if values else [])
        gq = gq.agg(*aggs)
        plan = gq.explain(epsilon=1.0, delta=1e-6, selection="gaussian").plan
        layout = gq._layout()
        bounding = Bounding(2, 2, l1, False)
        full = prepare(gq._source(), layout, plan, SEEDS, own_unit=False)
        want = _bound(full, layout, plan, bounding)[0].collect().sort("k")
        late = prepare(gq._source(), layout, plan, SEEDS, own_unit=False, defer=True)
        got = bound(late, layout, plan, bounding, seeds=SEEDS)[0].collect().sort("k")
        assert got.equals(want)
        flags = whole_units(full, layout, bounding)[1].collect()
        assert 0 < int(flags["__whole"].sum()) < flags.height  # both sides of the split
