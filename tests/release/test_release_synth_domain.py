"""Public domains: cells, atoms, integer columns, clamping, specs, and the table readers."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.errors import DataError
from dpkit.release import Categorical, Domain, Numeric
from dpkit.release._domain import MISSING


def test_numeric_cells_atoms_first_then_bins() -> None:
    col = Numeric(0, 100, bins=4, atoms=[0, 50])
    assert col.cells == 6
    codes = col.encode([0.0, 50.0, 10.0, 49.9, 50.1, 100.0, 120.0, -3.0], "x")
    # 0 and 50 are atoms 0 and 1; the rest fall in bins [0,25) [25,50) [50,75) [75,100].
    assert codes.tolist() == [0, 1, 2, 3, 4, 5, 5, 0]


def test_numeric_decode_stays_in_its_cell() -> None:
    col = Numeric(0, 100, bins=4, atoms=[0])
    cells = np.repeat(np.arange(5), 1000)
    vals = col.decode(cells, np.random.default_rng(0))
    assert np.all(vals[:1000] == 0)
    assert np.array_equal(col.encode(vals, "x"), cells)
    edges = col.bin_edges
    for b in range(4):
        v = vals[1000 * (b + 1) : 1000 * (b + 2)]
        assert v.min() >= edges[b] and v.max() <= edges[b + 1]


def test_integer_columns() -> None:
    small = Numeric(1, 5, integer=True)
    assert small.cells == 5
    assert small.encode([1, 2, 3, 4, 5, 7], "k").tolist() == [0, 1, 2, 3, 4, 4]
    wide = Numeric(0, 99, bins=10, integer=True)
    assert wide.cells == 10
    cells = np.repeat(np.arange(10), 200)
    vals = wide.decode(cells, np.random.default_rng(1))
    assert np.all(vals == np.round(vals))
    assert np.array_equal(wide.encode(vals, "k"), cells)
    # Every integer of a bin is reachable: bin 0 holds 0..9.
    assert set(vals[:200].astype(int)) == set(range(10))


def test_categorical_drops_unknown_values_and_refuses_only_missing_ones() -> None:
    col = Categorical(["a", "b"])
    assert col.encode(["b", "a"], "c").tolist() == [1, 0]
    # an unknown value is never refused (that would reveal it): its record is dropped
    assert col.encode(["a", "secret-value", ["x"]], "c").tolist() == [0, -1, -1]
    # a missing value is marked (MISSING, -2); the table's missing= policy refuses or drops it
    for bad in (["a", None], ["a", float("nan")]):
        assert col.encode(bad, "c").tolist() == [0, MISSING]
        with pytest.raises(DataError) as err:
            Domain({"c": col}).encode({"c": bad})
        assert "missing value" in str(err.value)
        assert Domain({"c": col}).encode({"c": bad}, missing="drop").tolist() == [[0]]
    # A catch-all takes unknown values, never missing ones.
    other = Categorical(["a", "rest"], other="rest")
    assert other.encode(["zz", "a"], "c").tolist() == [1, 0]
    assert other.encode([None], "c").tolist() == [MISSING]
    with pytest.raises(DataError):
        Domain({"c": other}).encode({"c": [None]})


@pytest.mark.parametrize(
    "make",
    [
        lambda: Numeric(1, 1),
        lambda: Numeric(2, 1),
        lambda: Numeric(0, float("inf")),
        lambda: Numeric(0, float("nan")),
        lambda: Numeric(0, 1, bins=0),
        lambda: Numeric(0, 1, bins=2.5),
        lambda: Numeric(0, 1, atoms=[2]),
        lambda: Numeric(0, 1, edges=[0, 0.7, 0.5, 1]),
        lambda: Numeric(0, 1, edges=[0.1, 1]),
        lambda: Numeric(0.2, 0.8, integer=True),
        lambda: Categorical([]),
        lambda: Categorical("abc"),
        lambda: Categorical(["a", "a"]),
        lambda: Categorical(["a", None]),
        lambda: Categorical(["a"], other="b"),
        lambda: Categorical([["a"], ["b"]]),  # unhashable: was a bare TypeError
        lambda: Domain({}),
        lambda: Domain({"x": (0, 1)}),
        lambda: Domain({1: Categorical(["a"])}),
    ],
)
def test_bad_domains(make: object) -> None:
    with pytest.raises(DataError):
        make()  # type: ignore[operator]


def test_spec_round_trip() -> None:
    dom = Domain(
        {
            "x": Numeric(0, 10, bins=3, atoms=[0]),
            "k": Numeric(0, 20, integer=True, bins=4),
            "c": Categorical(["u", "v", "other"], other="other"),
        }
    )
    back = Domain.from_spec(dom.spec())
    assert back.shape == dom.shape and back.names == dom.names
    data = {"x": [0.0, 3.3, 9.9], "k": [0, 7, 20], "c": ["u", "zzz", "v"]}
    assert np.array_equal(back.encode(data), dom.encode(data))
    with pytest.raises(DataError):
        Domain.from_spec({"x": {"type": "numeric", "lo": 0, "hi": 1, "bogus": 1}})
    with pytest.raises(DataError):
        Domain.from_spec({"x": {"type": "date"}})


def test_tables_of_every_kind() -> None:
    dom = Domain({"a": Numeric(0, 1, bins=2), "b": Categorical([0, 1])})
    want = [[0, 1], [1, 0]]
    assert dom.encode({"a": [0.1, 0.9], "b": [1, 0]}).tolist() == want
    assert dom.encode(np.array([[0.1, 1], [0.9, 0]])).tolist() == want
    rec = np.array([(0.1, 1), (0.9, 0)], dtype=[("a", float), ("b", int)])
    assert dom.encode(rec).tolist() == want
    pd = pytest.importorskip("pandas")
    assert dom.encode(pd.DataFrame({"a": [0.1, 0.9], "b": [1, 0]})).tolist() == want
    with pytest.raises(DataError):
        dom.encode(np.zeros((2, 3)))
    with pytest.raises(DataError):
        dom.encode("not a table")
