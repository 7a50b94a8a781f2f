"""Bad input to the density releases: a clear dpkit error, nothing released, nothing charged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.release import (
    bernstein_density,
    histogram_density,
    kde_density,
    ks_synthetic,
    series_density,
)

X = np.array([0.1, 0.5, 0.9])

RELEASES: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "histogram": (histogram_density, {}),
    "series": (series_density, {"expected_n": 100}),
    "kde": (kde_density, {"bandwidth": 0.1, "delta": 1e-6, "grid": 16}),
    "bernstein": (bernstein_density, {"bandwidth": 0.1}),
    "ks": (ks_synthetic, {}),
}


@pytest.fixture(params=sorted(RELEASES))
def release(request: pytest.FixtureRequest) -> tuple[Callable[..., Any], dict[str, Any]]:
    return RELEASES[request.param]


BAD_DATA: list[tuple[object, str]] = [
    (None, "None"),
    ([0.1, None, 0.3], "missing value"),  # missing="raise" (the default)
    (np.array([0.1, np.nan]), "missing value"),
    (["a", "b"], "missing value"),  # a non-number in an untyped list is missing
    (np.array(["2026-01-01"], dtype="datetime64[D]"), "numeric"),  # a declared type: schema
    (np.zeros((3, 2)), "shape"),
]


@pytest.mark.parametrize(("data", "message"), BAD_DATA)
def test_bad_data_refused_before_charging(
    release: tuple[Callable[..., Any], dict[str, Any]], data: object, message: str
) -> None:
    fn, kw = release
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-5))
    with pytest.raises(DataError, match=message):
        fn(data, bounds=(0, 1), epsilon=1.0, accountant=acct, rng=0, **kw)
    assert acct.spent.epsilon == 0.0


def test_values_are_not_echoed_in_errors(
    release: tuple[Callable[..., Any], dict[str, Any]],
) -> None:
    fn, kw = release
    with pytest.raises(DataError) as info:
        fn(np.array([0.123456789, 7.654321, np.nan]), bounds=(0, 1), epsilon=1.0, rng=0, **kw)
    assert "7.654" not in str(info.value) and "0.1234" not in str(info.value)


@pytest.mark.parametrize(
    ("bounds", "error"),
    [(None, DataError), ((1, 0), DataError), ((0, np.inf), DataError), ("ab", DataError)],
)
def test_bad_bounds(
    release: tuple[Callable[..., Any], dict[str, Any]], bounds: object, error: type
) -> None:
    fn, kw = release
    with pytest.raises(error):
        fn(X, bounds=bounds, epsilon=1.0, rng=0, **kw)


@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan"), float("inf"), None, "1"])
def test_bad_epsilon(release: tuple[Callable[..., Any], dict[str, Any]], epsilon: object) -> None:
    fn, kw = release
    with pytest.raises(PrivacyParameterError):
        fn(X, bounds=(0, 1), epsilon=epsilon, rng=0, **kw)


@pytest.mark.parametrize("delta", [-0.1, 1.0, 2.0])
def test_bad_delta(delta: float) -> None:
    for fn, kw in ((histogram_density, {}), (series_density, {})):
        with pytest.raises(PrivacyParameterError):
            fn(X, bounds=(0, 1), epsilon=1.0, delta=delta, rng=0, **kw)
    with pytest.raises(PrivacyParameterError):
        kde_density(X, bounds=(0, 1), bandwidth=0.1, epsilon=1.0, delta=delta)


def test_outside_records_clamped_on_request(
    release: tuple[Callable[..., Any], dict[str, Any]],
) -> None:
    fn, kw = release
    out = fn(np.array([-5.0, 0.5, 9.0]), bounds=(0, 1), epsilon=1.0, outside="clamp", rng=0, **kw)
    assert out.event is not None
    with pytest.raises(DataError, match="outside"):
        fn(X, bounds=(0, 1), epsilon=1.0, outside="ignore", rng=0, **kw)


def test_empty_data_is_released_not_refused(
    release: tuple[Callable[..., Any], dict[str, Any]],
) -> None:
    fn, kw = release
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-5))
    out = fn(np.empty(0), bounds=(0, 1), epsilon=1.0, accountant=acct, rng=0, **kw)
    assert acct.spent.epsilon > 0 and out.event is not None


def test_too_many_cells_refused_with_memory_and_nothing_charged() -> None:
    acct = Accountant(ApproxDP(epsilon=5.0, delta=1e-5))
    box = [(0, 1)] * 12
    data = np.full((10, 12), 0.5)
    with pytest.raises(DataError, match=r"needs about .*(GiB|TiB|PiB).*Nothing was charged"):
        histogram_density(data, bounds=box, epsilon=1.0, bins=10, accountant=acct)
    wide = np.full((10, 40), 0.5)  # default: 2 bins per side, 2^40 cells
    with pytest.raises(DataError, match=r"needs about .*(TiB|PiB|EiB)"):
        histogram_density(wide, bounds=[(0, 1)] * 40, epsilon=1.0, accountant=acct)
    with pytest.raises(DataError, match=r"needs about"):
        bernstein_density(
            data[:, :4], bounds=box[:4], bandwidth=0.01, epsilon=1.0, degree=200, accountant=acct
        )
    with pytest.raises(DataError, match=r"kernel grid .* exceeds"):
        kde_density(
            data[:, :3],
            bounds=box[:3],
            bandwidth=0.1,
            epsilon=1.0,
            delta=1e-6,
            grid=14,
            accountant=acct,
        )
    with pytest.raises(DataError, match="d ≤ 3"):
        series_density(data[:, :4], bounds=box[:4], epsilon=1.0, accountant=acct)
    with pytest.raises(DataError, match="needs a path table"):
        ks_synthetic(X, bounds=(0, 1), epsilon=1.0, size=10**6, grid=10**5, accountant=acct)
    assert acct.spent.epsilon == 0.0


def test_parameter_errors() -> None:
    with pytest.raises(PrivacyParameterError, match="delta > 0"):
        kde_density(X, bounds=(0, 1), bandwidth=0.1, epsilon=1.0, delta=0.0)
    for h in (0.0, -1.0, float("nan"), None, "x"):
        with pytest.raises(PrivacyParameterError, match="bandwidth"):
            bernstein_density(X, bounds=(0, 1), bandwidth=h, epsilon=1.0)
    with pytest.raises(DataError, match="postprocess"):
        histogram_density(X, bounds=(0, 1), epsilon=1.0, postprocess="smooth")
    with pytest.raises(DataError, match="bins"):
        histogram_density(X, bounds=(0, 1), epsilon=1.0, bins=0)
    with pytest.raises(DataError, match="atoms"):
        histogram_density(X, bounds=(0, 1), epsilon=1.0, atoms=[2.0])
    with pytest.raises(DataError, match=r"n .*does not match"):
        histogram_density(X, bounds=(0, 1), epsilon=1.0, n=4)
    with pytest.raises(DataError, match="1-d"):
        ks_synthetic(np.zeros((2, 2)), bounds=[(0, 1), (0, 1)], epsilon=1.0)
    with pytest.raises(DataError, match="size"):
        ks_synthetic(X, bounds=(0, 1), epsilon=1.0, size=0)
    with pytest.raises(PrivacyParameterError, match="neighbouring"):
        histogram_density(X, bounds=(0, 1), epsilon=1.0, neighbouring="replace")  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="count_fraction"):
        histogram_density(X, bounds=(0, 1), epsilon=1.0, count_fraction=1.5)
    dens = histogram_density(X, bounds=(0, 1), epsilon=1.0, rng=0)
    with pytest.raises(DataError, match="size"):
        dens.sample(-1)
    with pytest.raises(DataError, match="NaN"):
        dens.pdf([np.nan])
    two = histogram_density(np.zeros((3, 2)), bounds=[(0, 1), (0, 1)], epsilon=1.0, rng=0)
    with pytest.raises(DataError, match="1-d"):
        two.cdf([0.5, 0.5])


def test_extreme_but_valid_parameters_release() -> None:
    # tiny ε with a large lattice (fixed point at 2^0), and a large ε (fine fixed point)
    x = np.random.default_rng(0).uniform(size=(50, 2))
    d = bernstein_density(
        x, bounds=[(0, 1), (0, 1)], bandwidth=0.01, epsilon=0.01, degree=64, rng=1
    )
    assert d.probabilities.sum() == pytest.approx(1.0)
    d = series_density(x[:, 0], bounds=(0, 1), epsilon=500.0, degree=2, n=50, rng=1)
    assert d.probabilities.sum() == pytest.approx(1.0)
    d = histogram_density(x, bounds=[(0, 1), (0, 1)], epsilon=1e-3, delta=1e-9, rng=1)
    assert d.probabilities.sum() == pytest.approx(1.0)


def test_large_delta_for_public_n_warns() -> None:
    from dpkit.errors import PrivacyWarning

    with pytest.warns(PrivacyWarning, match="Name & Shame"):
        histogram_density(X, bounds=(0, 1), epsilon=1.0, delta=0.5, n=3, rng=0)
    with pytest.warns(PrivacyWarning):
        series_density(X, bounds=(0, 1), epsilon=1.0, delta=0.5, n=3, rng=0)
    with pytest.warns(PrivacyWarning):
        kde_density(X, bounds=(0, 1), bandwidth=0.1, epsilon=1.0, delta=0.5, grid=8, n=3, rng=0)
