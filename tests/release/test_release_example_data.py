"""The example data dpkit ships are the public-domain RAND HIE subset, value for value as
statsmodels distributes it, and its declared domain fits them: the codebook's caps clamp only a
few dozen records (doctor visits above 40 a year)."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.release._examples import RANDHIE_FLAGS, load_randhie, randhie_domain


def test_the_shipped_copy_is_statsmodels_randhie() -> None:
    randhie = pytest.importorskip("statsmodels.datasets.randhie")
    theirs = randhie.load_pandas().data
    ours = load_randhie()
    assert list(ours.columns) == list(theirs.columns)
    for name in ours.columns:
        a = ours[name].to_numpy()
        b = theirs[name].to_numpy(dtype=np.float64)
        want = np.rint(b).astype(int) if name in RANDHIE_FLAGS else b
        assert a.dtype == want.dtype and np.array_equal(a, want), name


def test_the_declared_domain_fits_the_records() -> None:
    df, dom = load_randhie(), randhie_domain()
    assert list(df.columns) == list(dom.names)
    for name, var in dom.columns.items():
        x = df[name].to_numpy()
        if name in RANDHIE_FLAGS:
            assert set(np.unique(x).tolist()) == {0, 1}
        else:
            assert var.lo <= x.min(), name
            assert np.mean(x > var.hi) < 2e-3, name  # 33 of 20,190 visit counts are clamped
