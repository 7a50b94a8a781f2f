"""Bounding in passes over hash partitions of the units is bit-identical to one pass."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
import dpkit.frame._bounding as bounding_mod
import dpkit.frame._grouped as grouped_mod
from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import PrivacyParameterError

B = (0.0, 100.0)


def _table(seed: int = 0, units: int = 200, rows: int = 3000) -> pl.DataFrame:
    # ~15 rows and ~7 keys per unit: every bound below binds for most units, so a partition
    # that split a unit's rows would change the totals (see the broken variant below)
    g = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "user": g.integers(0, units, rows),
            "key": pl.Series(
                g.choice(["a", "b", "c", "d", "e", "f", "g", "h", ""], rows), dtype=pl.String
            ).replace("", None),  # a null key is a key like any other
            "x": np.round(g.uniform(-20, 120, rows), 3),
        }
    )


_BASIC = (dpf.count(), dpf.count_units(), dpf.sum("x", bounds=B), dpf.var("x", bounds=B))
_ROWS = (
    *_BASIC,
    dpf.quantiles("x", [0.25, 0.5], bounds=B, levels=2),
    dpf.histogram("x", bins=[0, 25, 50, 100]),
)
CASES: list[tuple[str, str | None, tuple[str, ...], dict[str, int], tuple[Any, ...]]] = [
    ("one row per pair (packed min)", "user", ("key",), {"max_rows": 1, "max_groups": 2}, _BASIC),
    ("rows per pair, weights", "user", ("key",), {"max_rows": 3, "max_groups": 3}, _BASIC),
    (
        "rows per unit, tree and histogram",
        "user",
        ("key",),
        {"max_rows": 2, "max_groups": 3, "max_rows_per_unit": 4},
        _ROWS,
    ),
    ("each row its own unit", None, ("key",), {"max_rows": 1, "max_groups": 1}, _BASIC),
    ("no group-by", "user", (), {"max_rows": 2, "max_rows_per_unit": 3}, _BASIC),
]


def _query(
    df: Any, unit: str | None, by: tuple[str, ...], bounds: dict[str, int], aggs: Any
) -> Any:
    q = dpf.Query(df, privacy_unit=unit)
    if not by:
        return q.agg(*aggs, **bounds)
    return q.group_by(*by, **bounds).agg(*aggs)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and all(x.equals(y) for x, y in zip(a, b, strict=True))
    return bool(a.equals(b))


@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize(("name", "unit", "by", "bounds", "aggs"), CASES, ids=[c[0] for c in CASES])
def test_partitioned_bounded_aggregates_are_bit_identical(
    name: str,
    unit: str | None,
    by: tuple[str, ...],
    bounds: dict[str, int],
    aggs: Any,
    sort: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # both in-memory plans (the default depends on the Polars version), and streaming
    monkeypatch.setattr(bounding_mod, "sort_is_faster", lambda: sort)
    g = _query(_table(), unit, by, bounds, aggs)
    one = g.bounded_aggregates(seed=7)
    for parts in (2, 3, 8):
        assert _equal(one, g.bounded_aggregates(seed=7, partitions=parts)), parts
    assert _equal(one, g.bounded_aggregates(seed=7, partitions=3, streaming=True))


def test_partitions_split_the_units_into_disjoint_nonempty_parts() -> None:
    """Each unit lands in exactly one partition, and the partitions are not degenerate (a hash
    that sent every unit to one partition would pass the identity test above trivially)."""
    from dpkit.frame._partition import unit_partition

    df = _table(1)
    parts = 4
    seen = [
        set(unit_partition(df.lazy(), "user", 12345, p, parts).collect()["user"].to_list())
        for p in range(parts)
    ]
    assert all(len(s) >= 20 for s in seen)  # 200 units in 4 parts: ~50 each, 20 is > 4 sd away
    assert sum(len(s) for s in seen) == df["user"].n_unique()
    assert set().union(*seen) == set(df["user"].to_list())
    # all of a unit's rows go with it
    rows = sum(
        unit_partition(df.lazy(), "user", 12345, p, parts).collect().height for p in range(4)
    )
    assert rows == df.height


def test_partitioning_rows_instead_of_units_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deliberately broken variant that splits a unit's rows over partitions bounds each part
    separately (up to L0 keys per part) and must change the totals."""
    g = _query(_table(2), "user", ("key",), {"max_rows": 1, "max_groups": 2}, _BASIC)
    one = g.bounded_aggregates(seed=7)

    def by_row(lf: Any, unit: str, seed: int, part: int, parts: int) -> Any:
        h = pl.col("x").hash(seed=seed) % pl.lit(parts, dtype=pl.UInt64)
        return lf.filter(h == pl.lit(part, dtype=pl.UInt64))

    monkeypatch.setattr(grouped_mod, "unit_partition", by_row)
    broken = g.bounded_aggregates(seed=7, partitions=3)
    assert not _equal(one, broken)
    assert int(broken["__units"].sum()) > int(one["__units"].sum())  # more than L0 keys per unit


def test_seeded_release_is_the_same_for_every_partition_count() -> None:
    g = _query(_table(3), "user", ("key",), {"max_rows": 2, "max_groups": 3}, _BASIC)
    a = g.release(epsilon=1.0, delta=1e-6, rng=11)
    b = g.release(epsilon=1.0, delta=1e-6, rng=11, partitions=5)
    assert a.frame.height > 0 and a.frame.equals(b.frame)


def test_progress_reports_each_pass_and_changes_nothing() -> None:
    """``progress(done, total)`` after each partition's pass (counts of passes, never of rows),
    drawn by the one progress API; the release is the same with or without it."""
    import io

    from dpkit._progress import ProgressBar

    g = _query(_table(3), "user", ("key",), {"max_rows": 2, "max_groups": 3}, _BASIC)
    calls: list[tuple[int, int]] = []
    a = g.release(
        epsilon=1.0, delta=1e-6, rng=11, partitions=3, progress=lambda d, t: calls.append((d, t))
    )
    assert calls == [(1, 3), (2, 3), (3, 3)]
    out = io.StringIO()
    with ProgressBar(3, stream=out, backend="text") as bar:
        b = g.release(epsilon=1.0, delta=1e-6, rng=11, partitions=3, progress=bar)
    assert a.frame.equals(b.frame) and a.frame.equals(
        g.release(epsilon=1.0, delta=1e-6, rng=11).frame
    )
    assert "100.0%" in out.getvalue()


def test_parquet_scan_in_partitions(tmp_path: Any) -> None:
    df = _table(4)
    path = tmp_path / "t.parquet"
    df.write_parquet(path)
    bounds = {"max_rows": 2, "max_groups": 2}
    mem = _query(df, "user", ("key",), bounds, _BASIC).bounded_aggregates(seed=2)
    lazy = _query(pl.scan_parquet(path), "user", ("key",), bounds, _BASIC)
    assert mem.equals(lazy.bounded_aggregates(seed=2, partitions=4))
    assert mem.equals(lazy.bounded_aggregates(seed=2, partitions=4, streaming=True))


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "4", None])
def test_bad_partition_count_is_refused_before_charging(bad: object) -> None:
    g = _query(_table(5), "user", ("key",), {"max_rows": 1, "max_groups": 1}, _BASIC)
    acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-5))
    with pytest.raises(PrivacyParameterError, match="partitions"):
        g.release(epsilon=1.0, delta=1e-6, accountant=acct, rng=0, partitions=bad)
    assert float(acct.spent.epsilon) == 0.0  # type: ignore[attr-defined]
    with pytest.raises(PrivacyParameterError, match="partitions"):
        g.bounded_aggregates(partitions=bad)


def test_empty_table_in_partitions_is_answered_like_one_pass() -> None:
    empty = _table(6).clear()
    g = dpf.Query(empty, privacy_unit="user").group_by(
        "key", public_keys=["a", "b"], max_groups=1, max_rows=1
    )
    g = g.agg(dpf.count(), dpf.quantiles("x", 0.5, bounds=B))
    one = g.bounded_aggregates(seed=1)
    assert _equal(one, g.bounded_aggregates(seed=1, partitions=4))
    a = g.release(epsilon=1.0, rng=3)
    assert a.frame.height == 2 and a.frame.equals(g.release(epsilon=1.0, rng=3, partitions=4).frame)
