"""discover_domain releases categories that do not depend on which record came first.

Categories were counted by their text but released as the value of the first record with that
text: with both ``1`` and ``"1"`` in a column, the released type told which came first. They
are now counted by type and value together, and each released category is rebuilt from its
type and text alone.
"""

from __future__ import annotations

import numpy as np

from dpkit.release import Categorical, discover_domain


def _categories(values: list[object]) -> tuple[object, ...]:
    col = np.empty(len(values), dtype=object)
    col[:] = values
    dom = discover_domain({"c": col}, categorical=["c"], epsilon=1.0, delta=1e-6, rng=0)
    c = dom.columns["c"]
    assert isinstance(c, Categorical)
    return c.categories


def _typed(cats: tuple[object, ...]) -> list[tuple[str, object]]:
    return [(type(c).__name__, c) for c in cats]


def test_record_order_does_not_change_the_released_categories() -> None:
    int_first = _categories([1] * 100 + ["1"] * 100)
    str_first = _categories(["1"] * 100 + [1] * 100)
    assert _typed(int_first) == _typed(str_first)
    # both are kept, each with its own type
    assert ("int", 1) in _typed(int_first) and ("str", "1") in _typed(int_first)


def test_one_record_of_another_type_does_not_change_the_type_released() -> None:
    # A single "1" among a hundred 1s used to decide the released type when it came first;
    # now one record is below the threshold, and the hundred 1s are released as the int 1
    # whichever record leads.
    alone = _categories([1] * 100)
    leading = _categories(["1"] + [1] * 100)
    assert _typed(alone) == _typed(leading) == [("int", 1), ("str", "other")]


def test_numpy_scalars_are_released_as_python_values() -> None:
    col = np.empty(100, dtype=object)
    col[:] = [np.int64(3)] * 100
    dom = discover_domain({"c": col}, categorical=["c"], epsilon=1.0, delta=1e-6, rng=0)
    assert _typed(dom.columns["c"].categories) == [("int", 3), ("str", "other")]  # type: ignore[union-attr]


def test_equal_values_of_different_types_merge_whatever_the_order() -> None:
    a = _categories([True] * 100 + [1] * 100 + [1.0] * 100)
    b = _categories([1.0] * 100 + [1] * 100 + [True] * 100)
    assert _typed(a) == _typed(b)
    assert len(a) == 2  # one merged category and the catch-all
