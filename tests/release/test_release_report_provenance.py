"""A utility report records where the synthetic table came from: method, ε, δ, the public domain
and the dpkit version — and no seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpkit._version import __version__
from dpkit.random import seeded
from dpkit.release import Categorical, Domain, Numeric, Synthesizer, utility_report

SEED = 987_654_321  # distinctive, so that finding it in the report would be no accident


def _data(n: int = 600) -> dict[str, np.ndarray]:
    g = np.random.default_rng(0)
    a = g.choice(["x", "y", "z"], n)
    return {"a": a, "b": np.where(a == "x", g.uniform(0, 3, n), g.uniform(5, 10, n))}


def test_report_records_the_release_and_no_seed(tmp_path: Path) -> None:
    dom = Domain({"a": Categorical(["x", "y", "z"]), "b": Numeric(0, 10, bins=5, atoms=(0,))})
    synth = Synthesizer(dom, epsilon=0.8, delta=1e-6, method="mst")
    model = synth.fit(_data(), rng=seeded(SEED))
    table = model.sample(600, rng=seeded(SEED + 1), output="dict")
    rep = utility_report(_data(), table, dom, plots=False, synthesizer=synth)
    p = rep.provenance
    assert p is not None
    assert (p.method, p.delta, p.dpkit_version) == ("mst", 1e-6, __version__)
    assert abs(p.epsilon - 0.8) < 1e-6 and p.rho == synth.rho  # the ε paid, at that δ
    assert dict(p.domain) == {"a": "categories x, y, z", "b": "numeric [0, 10], 5 bins, atoms 0"}
    text = rep.summary()
    page = rep.to_html(tmp_path / "r.html").read_text(encoding="utf-8")
    for shown in (text, page):
        assert "method mst" in shown and "δ = 1e-06" in shown and "no seed is recorded" in shown
        assert str(SEED) not in shown and str(SEED + 1) not in shown
    assert "<h2>Provenance</h2>" in page


def test_without_the_synthesizer_there_is_no_provenance() -> None:
    dom = Domain({"a": Categorical(["x", "y", "z"])})
    data = {"a": np.array(["x", "y", "z", "x"])}
    rep = utility_report(data, data, dom, plots=False)
    assert rep.provenance is None and rep.summary().startswith("column")
