"""Regressions for the data path of the statistics (issue 13: masked arrays, timing, emptiness,
charge-then-fail at tiny ε, error messages, the Release repr)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dpkit.stats as st
import dpkit.stats._fixed as fixed_module
from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import DataError, DPKitError, PrivacyParameterError
from dpkit.stats._quantile import _cells
from tests._structure import lines_run

B = (0.0, 1.0)


class _Sneaky(np.ndarray):  # type: ignore[type-arg]
    """An ndarray subclass whose min/max claim every value is in bounds."""

    def min(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return 0.0

    def max(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return 0.5


# --- 1. masked arrays and ndarray subclasses --------------------------------------------------


def test_masked_array_is_refused_with_a_hint(recorder: Any) -> None:
    # The masked record 1e9 used to be added raw while min/max ignored it: dp.sum moved by 1e9.
    x = np.ma.masked_array([0.5, 1e9], mask=[False, True])
    for call in (
        lambda: st.sum(x, bounds=B, epsilon=1.0, accountant=recorder, rng=0),
        lambda: st.mean(x, bounds=B, epsilon=1.0, accountant=recorder, rng=0),
        lambda: st.var(x, bounds=B, epsilon=1.0, accountant=recorder, rng=0),
        lambda: st.median(x, bounds=B, epsilon=1.0, accountant=recorder, rng=0),
        lambda: st.histogram(x, bins=[0, 1], epsilon=1.0, accountant=recorder, rng=0),
        lambda: st.corr(x, x, bounds=(B, B), epsilon=1.0, accountant=recorder, rng=0),
    ):
        with pytest.raises(DataError, match="compressed"):
            call()
    # a masked NaN used to raise a bare ValueError
    with pytest.raises(DataError):
        st.sum(np.ma.masked_invalid([0.5, np.nan]), bounds=B, epsilon=1.0, accountant=recorder)
    assert recorder.ledger == []


def test_ndarray_subclass_is_clamped_from_its_values() -> None:
    x = np.array([0.5] * 99 + [1e9]).view(_Sneaky)
    r = st.sum(x, bounds=B, epsilon=1.0, rng=0)
    # clamped sum is 50.5; Laplace noise of scale ~1 exceeds 40 with probability e^-40
    assert abs(r.value - 50.5) < 40
    m = st.mean(x, bounds=B, epsilon=1.0, n=100, rng=0)
    assert 0.0 <= m.value <= 1.0


# --- 2a. the clamp is unconditional ------------------------------------------------------------


@pytest.mark.parametrize("stat", ["sum", "mean"])
def test_clamping_runs_the_same_lines_with_and_without_an_outlier(stat: str) -> None:
    inside = np.full(1000, 0.5)
    outlier = inside.copy()
    outlier[-1] = 1e9  # its neighbour under replace-one; the clamp must not be skipped for either
    fn: Callable[..., Any] = getattr(st, stat)
    runs = [
        lines_run(lambda x=x: fn(x, bounds=B, epsilon=1.0, rng=0), fixed_module.__file__)
        for x in (inside, outlier)
    ]
    assert runs[0], "the fixed-point sum was not traced"
    assert runs[0] == runs[1]


# --- 4. empty data under add/remove is answered with noise --------------------------------------

EMPTY_CALLS: dict[str, Callable[..., Any]] = {
    "count": lambda x, **k: st.count(x, **k),
    "sum": lambda x, **k: st.sum(x, bounds=B, **k),
    "mean": lambda x, **k: st.mean(x, bounds=B, **k),
    "mean_n": lambda x, **k: st.mean(x, bounds=B, n=10, **k),
    "var": lambda x, **k: st.var(x, bounds=B, **k),
    "std": lambda x, **k: st.std(x, bounds=B, **k),
    "median": lambda x, **k: st.median(x, bounds=B, **k),
    "quantile": lambda x, **k: st.quantile(x, [0.25, 0.75], bounds=B, **k),
    "histogram": lambda x, **k: st.histogram(x, bins=[0, 0.5, 1], **k),
    "cov": lambda x, **k: st.cov(x, x, bounds=(B, B), **k),
    "corr": lambda x, **k: st.corr(x, x, bounds=(B, B), **k),
}


@pytest.mark.parametrize("name", sorted(EMPTY_CALLS))
def test_empty_data_is_answered_with_noise(name: str, recorder: Any) -> None:
    r = EMPTY_CALLS[name]([], epsilon=1.0, accountant=recorder, rng=3)
    assert np.all(np.isfinite(np.asarray(r.value)))
    assert len(recorder.ledger) == 1  # paid for like any other release


def test_empty_count_is_noise_around_zero() -> None:
    vals = [st.count([], epsilon=1.0, rng=s).value for s in range(200)]
    # discrete Laplace of scale 1: sd ≈ 1.37, so the mean of 200 is within 0.5 of 0 at ~5 se
    assert abs(np.mean(vals)) < 0.5
    assert np.std(vals) > 0.5  # it is noise, not a constant


def test_quantile_cells_of_no_data_cover_every_grid_point() -> None:
    # An empty window used to drop the first grid point of the range.
    cells = _cells(np.array([]), 0, 0, 5, 9, 0.5, 1.0)
    assert cells.start.tolist() == [5.0]
    assert cells.count.tolist() == [5.0]


# --- 6. tiny ε: works with correct noise, or refuses before charging ---------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda e, a: st.sum([0.5], bounds=B, epsilon=e, accountant=a, rng=0),
        lambda e, a: st.mean([0.5], bounds=B, epsilon=e, accountant=a, rng=0),
        lambda e, a: st.mean([0.5], bounds=B, n=1, epsilon=e, accountant=a, rng=0),
        lambda e, a: st.count([0.5], epsilon=e, accountant=a, rng=0),
        lambda e, a: st.histogram([0.5], bins=[0, 1], epsilon=e, accountant=a, rng=0),
        lambda e, a: st.var([0.5], bounds=B, epsilon=e, accountant=a, rng=0),
        lambda e, a: st.bounds([0.5], epsilon=e, accountant=a, rng=0),
    ],
    ids=["sum", "mean", "mean_n", "count", "histogram", "var", "bounds"],
)
@pytest.mark.parametrize("eps", [1e-13, 2.0**-53, 1e-300])
def test_tiny_epsilon_refuses_before_charging_or_noises_correctly(
    call: Callable[[float, Accountant], Any], eps: float
) -> None:
    acct = Accountant(ApproxDP(epsilon=10.0, delta=0.5))
    try:
        r = call(eps, acct)
    except PrivacyParameterError:
        assert acct.spent.epsilon == 0.0  # refused before the charge
        return
    except DataError:  # bounds: too few records for a private range, after its (paid) noise
        assert acct.spent.epsilon <= eps
        return
    assert 0.0 < acct.spent.epsilon <= eps
    terms = getattr(r.errors, "terms", None) or []
    for part, _ in terms:  # one-part statistics: the noise is calibrated to ≈ Δ, not 8Δ
        real_sens = part.sensitivity * part.unit
        exact = part.part.real_sensitivity
        assert real_sens <= exact * (1 + 2.0**-6)


def test_sum_noise_at_tiny_epsilon_is_not_inflated() -> None:
    # At ε = 1e-13 the rounding allowance was 8Δ: the noise 9× too large.
    r = st.sum([0.5], bounds=B, epsilon=1e-13, rng=0)
    part = r.errors.terms[0][0]  # type: ignore[attr-defined]
    assert part.real_scale <= 1e13 * (1 + 2.0**-6)


# --- 11. error messages never echo data ---------------------------------------------------------

SECRET = "salary=91234.5 (alice)"


@pytest.mark.parametrize(
    "call",
    [
        lambda: st.sum([0.1, SECRET], bounds=B, epsilon=1.0),
        lambda: st.sum(np.array([0.1, SECRET], dtype=object), bounds=B, epsilon=1.0),
        lambda: st.count([[0.1], [SECRET, 2]], epsilon=1.0),
        lambda: st.median([SECRET], bounds=B, epsilon=1.0),
        lambda: st.histogram([SECRET], bins=[0, 1], epsilon=1.0),
    ],
)
def test_errors_do_not_echo_data(call: Callable[[], Any]) -> None:
    with pytest.raises(DPKitError) as info:
        call()
    assert "alice" not in str(info.value)
    assert "91234" not in str(info.value)


# --- presentation ---------------------------------------------------------------------------


def test_release_repr_shows_user_units() -> None:
    r = st.sum([0.5] * 10, bounds=(0, 100), epsilon=1.0, rng=0)
    text = repr(r)
    assert "sensitivity" not in text and "6710886400" not in text
    assert text.startswith("Release(sum=") and "epsilon=1" in text and "ci=" in text
    g = st.mean([0.5] * 10, bounds=B, epsilon=1.0, delta=1e-6, rng=0)
    assert "delta=1e-06" in repr(g) and "epsilon=1" in repr(g)
    assert "epsilon=0 (public)" in repr(st.count([1.0], epsilon=1.0, neighbouring=_replace()))


def _replace() -> Any:
    from dpkit.accounting import Neighbouring

    return Neighbouring.REPLACE
