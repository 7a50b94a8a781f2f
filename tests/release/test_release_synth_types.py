"""Synthetic tables come back in the kind of table they were fitted on, each column in its
declared type (an integer column as integers)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from dpkit.random import seeded
from dpkit.release import Categorical, Domain, Numeric, Synthesizer, utility_report

DOM = Domain({"age": Numeric(18, 90, integer=True), "c": Categorical(["a", "b"]),
              "x": Numeric(0, 1, bins=4)})  # fmt: skip


def _data(n: int = 400) -> dict[str, object]:
    g = np.random.default_rng(0)
    return {"age": g.integers(18, 91, n), "c": g.choice(["a", "b"], n), "x": g.random(n)}


def test_pandas_in_pandas_out_polars_in_polars_out_with_declared_types() -> None:
    pd = pytest.importorskip("pandas")
    synth = Synthesizer(DOM, epsilon=1.0, delta=1e-6, method="independent")
    for frame, kind in (
        (pd.DataFrame(_data()), pd.DataFrame),
        (pl.DataFrame(_data()), pl.DataFrame),
    ):
        out = synth.fit(frame, rng=seeded(1)).sample(50, rng=2)
        assert isinstance(out, kind)
        assert str(out["age"].dtype).lower() == "int64" and str(out["x"].dtype).lower() == "float64"
    model = synth.fit(_data(), rng=seeded(1))
    arr = model.sample(50, rng=2)
    assert isinstance(arr, np.ndarray) and arr.dtype["age"] == np.int64
    assert arr.dtype["x"] == np.float64 and arr.dtype["c"].kind == "O"
    assert model.sample(5, rng=2, output="dict")["age"].dtype == np.int64


def test_the_utility_report_displays_in_a_notebook() -> None:
    synth = Synthesizer(DOM, epsilon=1.0, delta=1e-6, method="independent")
    real = pl.DataFrame(_data())
    syn = synth.fit(real, rng=seeded(1)).sample(400, rng=2)
    page = utility_report(real, syn, DOM, plots=False)._repr_html_()
    assert page.startswith("<table><caption>Utility report") and "<td>age</td>" in page
    assert "mean 3-way TVD" in page and "not private" in page
