"""The missing-value policy (``missing=``) in :mod:`dpkit.release`, and ±inf clamped.

±inf is a value beyond a bound, like 1e308: it is clamped to the bound, so a release on data
holding one is exactly the release on data holding the bound instead (same seed, same output).
NaN, None, and a non-number in a numeric column have no place in any domain: the default
``missing="raise"`` refuses them before anything is charged; ``missing="drop"`` removes the
record, so the release equals the one on the data without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpkit.accounting import Accountant, ApproxDP, Neighbouring
from dpkit.errors import DataError
from dpkit.random import seeded
from dpkit.release import (
    Categorical,
    Domain,
    Numeric,
    Synthesizer,
    bernstein_density,
    discover_domain,
    histogram_density,
    kde_density,
    ks_synthetic,
    series_density,
)

BASE = [0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9]

DENSITIES: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "histogram": (histogram_density, {"bins": 4}),
    "series": (series_density, {"degree": 3}),
    "kde": (kde_density, {"bandwidth": 0.1, "delta": 1e-6, "grid": 16}),
    "bernstein": (bernstein_density, {"bandwidth": 0.2}),
    "ks": (ks_synthetic, {"size": 5, "grid": 6}),
}


def _acct() -> Accountant:
    return Accountant(ApproxDP(epsilon=100.0, delta=0.5))


def _density(name: str, x: Any, **kw: Any) -> tuple[Any, Accountant]:
    f, extra = DENSITIES[name]
    acct = _acct()
    out = f(x, bounds=(0.0, 1.0), epsilon=1.0, accountant=acct, rng=seeded(3), **extra, **kw)
    return out, acct


def _same(a: Any, b: Any) -> bool:
    """Two releases hold the same released numbers."""
    if hasattr(a, "values"):  # a synthetic sample
        return bool(np.array_equal(a.values, b.values))
    return bool(np.array_equal(a.raw, b.raw)) and bool(
        np.array_equal(a.probabilities, b.probabilities)
    )


@pytest.mark.parametrize("name", sorted(DENSITIES))
@pytest.mark.parametrize(("far", "bound"), [(np.inf, 1.0), (-np.inf, 0.0)])
def test_density_clamps_inf_to_the_bound(name: str, far: float, bound: float) -> None:
    got, _ = _density(name, np.array([*BASE, far]))
    want, _ = _density(name, np.array([*BASE, bound]))
    assert _same(got, want)


@pytest.mark.parametrize("name", sorted(DENSITIES))
@pytest.mark.parametrize("bad", [np.array([*BASE, np.nan]), [*BASE, None], [*BASE, "n/a"]])
def test_density_refuses_missing_by_default_before_the_charge(name: str, bad: Any) -> None:
    f, extra = DENSITIES[name]
    acct = _acct()
    with pytest.raises(DataError, match="missing value") as info:
        f(bad, bounds=(0.0, 1.0), epsilon=1.0, accountant=acct, rng=seeded(3), **extra)
    assert "n/a" not in str(info.value)
    assert acct.spent.epsilon == 0 and acct.spent.delta == 0


@pytest.mark.parametrize("name", sorted(DENSITIES))
@pytest.mark.parametrize("bad", [np.nan, None, "n/a"])
def test_density_drops_missing_on_request(name: str, bad: Any) -> None:
    got, _ = _density(name, [*BASE, bad], missing="drop")
    want, _ = _density(name, np.array(BASE))
    assert _same(got, want)


@pytest.mark.parametrize("name", sorted(DENSITIES))
def test_density_drop_with_a_public_size_is_refused_as_a_parameter(name: str) -> None:
    f, extra = DENSITIES[name]
    for kw in ({"n": len(BASE)}, {"neighbouring": Neighbouring.REPLACE}):
        acct = _acct()
        with pytest.raises(DataError, match="missing='drop'"):
            f(np.array(BASE), bounds=(0.0, 1.0), epsilon=1.0, accountant=acct, missing="drop",
              **extra, **kw)  # fmt: skip
        assert acct.spent.epsilon == 0


@pytest.mark.parametrize("name", sorted(DENSITIES))
def test_density_checks_the_policy(name: str) -> None:
    f, extra = DENSITIES[name]
    with pytest.raises(DataError, match="missing must be"):
        f(np.array(BASE), bounds=(0.0, 1.0), epsilon=1.0, missing="fill", **extra)


DOM = Domain({"x": Numeric(0.0, 10.0, bins=4), "c": Categorical(("a", "b"))})
TABLE = {"x": [float(i % 10) for i in range(40)], "c": ["a", "b"] * 20}


def _with(row: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([pd.DataFrame(TABLE), row], ignore_index=True)


def _fit(data: Any, **kw: Any) -> tuple[Any, Accountant]:
    acct = _acct()
    synth = Synthesizer(DOM, rho=1.0, method="independent")
    return synth.fit(data, accountant=acct, rng=seeded(5), **kw), acct


def _counts(model: Any) -> Any:
    return model.sample(200, rng=seeded(9))


def _equal_samples(a: Any, b: Any) -> bool:
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in ("x", "c"))


@pytest.mark.parametrize(("far", "bound"), [(np.inf, 10.0), (-np.inf, 0.0)])
def test_synthesizer_clamps_inf(far: float, bound: float) -> None:
    got, _ = _fit(_with(pd.DataFrame({"x": [far], "c": ["a"]})))
    want, _ = _fit(_with(pd.DataFrame({"x": [bound], "c": ["a"]})))
    assert _equal_samples(_counts(got), _counts(want))


MISSING_ROWS = {
    "nan": pd.DataFrame({"x": [np.nan], "c": ["a"]}),
    "none_numeric": pd.DataFrame({"x": pd.Series([None], dtype=object), "c": ["a"]}),
    "string_numeric": pd.DataFrame({"x": pd.Series(["n/a"], dtype=object), "c": ["a"]}),
    "none_category": pd.DataFrame({"x": [1.0], "c": pd.Series([None], dtype=object)}),
}


@pytest.mark.parametrize("kind", sorted(MISSING_ROWS))
def test_synthesizer_refuses_missing_by_default(kind: str) -> None:
    acct = _acct()
    with pytest.raises(DataError, match="missing value") as info:
        Synthesizer(DOM, rho=1.0, method="independent").fit(
            _with(MISSING_ROWS[kind]), accountant=acct, rng=seeded(5)
        )
    assert "n/a" not in str(info.value)
    assert acct.spent.epsilon == 0


@pytest.mark.parametrize("kind", sorted(MISSING_ROWS))
def test_synthesizer_drops_missing_on_request(kind: str) -> None:
    got, _ = _fit(_with(MISSING_ROWS[kind]), missing="drop")
    want, _ = _fit(pd.DataFrame(TABLE))
    assert _equal_samples(_counts(got), _counts(want))


def test_synthesizer_checks_the_policy_before_the_data() -> None:
    with pytest.raises(DataError, match="missing must be"):
        Synthesizer(DOM, rho=1.0, method="independent").fit(pd.DataFrame(TABLE), missing="fill")


def _discover(data: Any, **kw: Any) -> Any:
    return discover_domain(
        data, numeric={"x": (0.0, 10.0)}, categorical=["c"], epsilon=1.0, delta=1e-6,
        accountant=_acct(), rng=seeded(7), **kw,
    )  # fmt: skip


@pytest.mark.parametrize(("far", "bound"), [(np.inf, 10.0), (-np.inf, 0.0)])
def test_discover_domain_clamps_inf(far: float, bound: float) -> None:
    got = _discover(_with(pd.DataFrame({"x": [far], "c": ["a"]})))
    want = _discover(_with(pd.DataFrame({"x": [bound], "c": ["a"]})))
    assert got.spec() == want.spec()


@pytest.mark.parametrize("kind", sorted(MISSING_ROWS))
def test_discover_domain_missing_policy(kind: str) -> None:
    acct = _acct()
    with pytest.raises(DataError, match="missing value"):
        discover_domain(
            _with(MISSING_ROWS[kind]), numeric={"x": (0.0, 10.0)}, categorical=["c"],
            epsilon=1.0, delta=1e-6, accountant=acct, rng=seeded(7),
        )  # fmt: skip
    assert acct.spent.epsilon == 0
    got = _discover(_with(MISSING_ROWS[kind]), missing="drop")
    want = _discover(pd.DataFrame(TABLE))
    assert got.spec() == want.spec()
