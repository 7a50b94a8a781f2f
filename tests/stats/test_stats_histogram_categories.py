"""dp.histogram over declared categories (strings, categoricals, any hashable): integer counts."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit as dp


def test_histogram_of_declared_categories() -> None:
    words = ["red", "blue", "red", None, "green", "mauve", 1, True] * 50
    acct = dp.Accountant(dp.PureDP(epsilon=1.0))
    with pytest.raises(dp.errors.DataError, match="missing"):
        dp.histogram(words, categories=["red", "blue", "green"], epsilon=0.5, accountant=acct)
    assert not acct.ledger
    h = dp.histogram(
        words, categories=["red", "blue", "green", 1], epsilon=0.5, accountant=acct,
        missing="drop", rng=dp.random.seeded(2),
    )  # fmt: skip
    assert h.value.dtype == np.int64 and h.value.shape == (4,)
    # 100 red, 50 blue, 50 green, 50 of the int 1 (True is not the category 1); noise scale 2:
    # |noise| > 30 has probability below 1e-6 per cell
    assert np.all(np.abs(h.value - [100, 50, 50, 50]) <= 30)
    pd = pytest.importorskip("pandas")
    cat = pd.Series(pd.Categorical(["a", "b", "a"] * 100, categories=["a", "b", "z"]))
    hc = dp.histogram(cat, categories=["a", "b", "z"], epsilon=1.0, rng=dp.random.seeded(1))
    assert np.all(np.abs(hc.value - [200, 100, 0]) <= 20)
    for bad in ([], ["a", "a"], [None], "ab", [["a"]]):
        with pytest.raises(dp.errors.DataError):
            dp.histogram(["a"], categories=bad, epsilon=1.0)
    with pytest.raises(dp.errors.DataError, match="not both"):
        dp.histogram([1.0], bins=[0, 1], categories=["a"], epsilon=1.0)
