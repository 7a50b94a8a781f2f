"""Synthesizer.fit streamed from Parquet (a path or a LazyFrame): every marginal the fit needs is
counted in one pass over batches of rows; the counts, hence the model and its samples, equal the
in-memory path's for the same data and seed, and bad input is refused before any charge."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import dpkit.release._scan_codes as scan
from dpkit.accounting import ZCDP, Accountant
from dpkit.errors import DataError
from dpkit.release import Categorical, Domain, Numeric, Synthesizer
from dpkit.release._marginals import marginal


def _data() -> pl.DataFrame:
    g = np.random.default_rng(11)
    n = 3000
    a = g.choice(["x", "y", "z", "w"], n)  # "w" is not a category: goes to "other"
    age = np.round(g.normal(40, 15, n))  # beyond [18, 90] too: clamped
    age[:4] = [np.inf, -np.inf, 18.5, 89.5]
    score = g.uniform(-0.2, 1.2, n)
    score[:3] = [0.0, 0.5, 1.0]  # atoms and edges
    level = g.integers(0, 5, n)  # 4 is not listed, no other: the record is dropped
    return pl.DataFrame({"a": a, "age": age, "score": score, "level": level})


def _domain() -> Domain:
    return Domain(
        {
            "a": Categorical(["x", "y", "z", "other"], other="other"),
            "age": Numeric(18, 90, bins=6, integer=True),
            "score": Numeric(0, 1, bins=4, atoms=[0, 1]),
            "level": Categorical([0, 1, 2, 3]),
        }
    )


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3000 records in batches of 700: the counts must add up across batches
    monkeypatch.setattr(scan, "BATCH_ROWS", 700)


@pytest.fixture
def parquet(tmp_path: Path) -> Path:
    path = tmp_path / "t.parquet"
    _data().write_parquet(path, row_group_size=500)
    return path


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize(
    ("method", "estimator"),
    [("aim", "pgm"), ("aim", "closed"), ("mst", "pgm"), ("mst", "closed"), ("independent", "pgm")],
)
def test_fit_from_parquet_equals_fit_in_memory(parquet: Path, method: str, estimator: str) -> None:
    df = _data()
    workload = [("a", "age"), ("age", "score", "level")] if method == "aim" else None
    syn = Synthesizer(
        _domain(), epsilon=2.0, delta=1e-6, method=method, estimator=estimator, workload=workload
    )
    ref = syn.fit(df, rng=5)
    assert ref.fitted_on == "polars"
    ref_rows = ref.sample(500, rng=9, output="dict")
    for data in (parquet, str(parquet), pl.scan_parquet(parquet)):
        got = syn.fit(data, rng=5)
        assert got.n_estimate == ref.n_estimate and got.measured == ref.measured
        rows = got.sample(500, rng=9, output="dict")
        assert all(np.array_equal(rows[k], ref_rows[k]) for k in rows)


@pytest.mark.usefixtures("small_batches")
def test_streamed_counts_equal_in_memory_counts(parquet: Path) -> None:
    dom = _domain()
    codes = dom.encode(_data())
    sets = scan.needed_marginals("mst", "pgm", dom.shape, [], 10**6)
    assert sets == list(itertools.combinations(range(4), 2))  # one-ways summed from pairs
    streamed = scan.scan_codes(dom, parquet, "raise", sets)
    # subsets in any order, and a triple outside the pairs (counted by a pass of its own)
    for cols in [(0,), (3,), (1, 0), (2, 3), (3, 1, 2), (0, 1, 2, 3)]:
        want = marginal(codes, dom.shape, cols)
        got = streamed.marginal(dom.shape, cols)
        assert got.dtype == np.int64 and got.shape == want.shape
        assert np.array_equal(got, want)
    assert int(streamed.marginal(dom.shape, (0,)).sum()) == codes.shape[0]


def test_needed_marginals_follow_public_parameters() -> None:
    shape = (2, 3, 10, 4)
    # AIM's closed form: every triple within max_cells, and the pairs of those that are not
    closed = scan.needed_marginals("aim", "closed", shape, [], 50)
    assert closed == [(0, 2), (1, 2), (2, 3), (0, 1, 3)]
    assert scan.needed_marginals("mst", "pgm", (2, 3, 1000), [], 100) == [(2,), (0, 1)]
    assert scan.needed_marginals("independent", "pgm", shape, [], 100) == [(0,), (1,), (2,), (3,)]
    wl = [(0, 1), (1, 3)]
    assert scan.needed_marginals("aim", "pgm", shape, wl, 10**6) == [(2,), (0, 1), (1, 3)]


@pytest.mark.usefixtures("small_batches")
def test_missing_values_refused_before_the_charge_or_dropped(tmp_path: Path) -> None:
    df = _data().with_columns(
        pl.when(pl.arange(0, pl.len()) == 2500).then(None).otherwise(pl.col("score")).alias("score")
    )  # one missing value, in the fourth batch
    path = tmp_path / "m.parquet"
    df.write_parquet(path)
    acct = Accountant(ZCDP(rho=10.0))
    syn = Synthesizer(_domain(), epsilon=1.0, delta=1e-6, method="mst")
    with pytest.raises(DataError, match="missing"):
        syn.fit(path, accountant=acct, rng=1)
    assert acct.spent.rho == 0.0
    dropped, ref = syn.fit(path, missing="drop", rng=1), syn.fit(df, missing="drop", rng=1)
    assert dropped.n_estimate == ref.n_estimate and dropped.measured == ref.measured


def test_bad_tables_refused_before_the_charge(tmp_path: Path) -> None:
    acct = Accountant(ZCDP(rho=10.0))
    syn = Synthesizer(_domain(), epsilon=1.0, delta=1e-6, method="independent")
    extra = tmp_path / "extra.parquet"
    _data().with_columns(pl.lit(1).alias("secret")).write_parquet(extra)
    lacking = tmp_path / "lacking.parquet"
    _data().drop("level").write_parquet(lacking)
    absent = tmp_path / "no-such-file-7f3a.parquet"
    with pytest.raises(DataError, match="does not describe"):
        syn.fit(extra, accountant=acct)
    with pytest.raises(DataError, match="lack"):
        syn.fit(pl.scan_parquet(lacking), accountant=acct)
    with pytest.raises(DataError, match="reading the table failed") as err:
        syn.fit(absent, accountant=acct)
    assert "7f3a" not in str(err.value)  # the path is not echoed
    assert acct.spent.rho == 0.0


def test_empty_parquet_is_answered_with_noise(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    _data().head(0).write_parquet(path)
    syn = Synthesizer(_domain(), epsilon=1.0, delta=1e-6, method="mst")
    got, ref = syn.fit(path, rng=3), syn.fit(_data().head(0), rng=3)
    assert got.n_estimate == ref.n_estimate and got.measured == ref.measured


@pytest.mark.usefixtures("small_batches")
def test_integer_categories_read_exactly_whatever_the_missing_values(tmp_path: Path) -> None:
    # An integer column with a missing value comes out of Polars/pandas as floats, 2**53 + 1
    # then reads as 2**53: one record's missing value would move every such record to another
    # category (far beyond the sensitivity), and a batch with no missing value would encode
    # them unlike the whole table.
    import pandas as pd

    big = 2**53 + 1
    dom = Domain({"k": Categorical([big, 2**53, 7], other=7), "j": Categorical([0, 1])})
    ints = pl.DataFrame({"k": [big] * 1000, "j": [0, 1] * 500})
    extra = pl.DataFrame({"k": [None], "j": [0]}, schema=ints.schema)  # a neighbour's record
    both = pl.concat([ints, extra])
    nullable = pd.DataFrame({"k": pd.array([big, None], "Int64"), "j": [0, 1]})  # pandas' own
    for table in (ints, both, nullable):
        codes = dom.encode(table, "drop")
        assert np.array_equal(marginal(codes, dom.shape, (0,)), [len(codes), 0, 0])
    path = tmp_path / "big.parquet"
    both.write_parquet(path)
    streamed = scan.scan_codes(dom, path, "drop", [(0, 1)]).marginal(dom.shape, (0, 1))
    assert np.array_equal(streamed, marginal(dom.encode(both, "drop"), dom.shape, (0, 1)))


def test_pandas_missing_markers_are_missing_values() -> None:
    # pd.NA in a nullable "string" or "boolean" column is a missing value: refused under
    # missing="raise", not read as a category outside the list (other, or dropped)
    import pandas as pd

    dom = Domain({"s": Categorical(["a", "b"], other="b"), "t": Categorical([True, False])})
    table = pd.DataFrame(
        {"s": pd.array(["a", None, "a"], "string"), "t": pd.array([True, False, None], "boolean")}
    )
    with pytest.raises(DataError, match="missing"):
        dom.encode(table)
    assert dom.encode(table, "drop").tolist() == [[0, 0]]  # the first record only
    assert dom.encode(table.iloc[:1], "raise").tolist() == [[0, 0]]


def test_first_pass_counts_at_most_the_prefetch_cells() -> None:
    # AIM's closed form on 40 columns of 64 cells: 9880 triples, 2.6e9 cells; the first pass
    # (and Spark's collect to the driver) keeps the one-ways and triples up to the cap
    shape = (64,) * 40
    sets = scan.needed_marginals("aim", "closed", shape, [], 10**6)
    kept = scan.prefetched(sets, shape)
    assert all((c,) in kept or any(c in s for s in kept) for c in range(40))
    assert sum(math.prod(shape[c] for c in s) for s in kept) <= scan.PREFETCH_CELLS
    assert 0 < len(kept) < len(sets)
