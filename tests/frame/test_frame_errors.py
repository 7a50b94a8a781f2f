"""Bad input fails before any charge; the anchor bugs of other libraries stay fixed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
import dpkit.frame._finish as finish_mod
import dpkit.frame._pipeline as pipeline_mod
from dpkit.accounting import Accountant, ApproxDP, Neighbouring
from dpkit.errors import DataError, PrivacyParameterError


def _df() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "user": [1, 1, 2, 3, 3, 3],
            "key": ["a", "b", "a", "a", "a", "c"],
            "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "s": ["u", "v", "w", "x", "y", "z"],
        }
    )


def _acct() -> Accountant:
    return Accountant(ApproxDP(epsilon=10.0, delta=1e-5))


def _spent(a: Accountant) -> float:
    return float(a.spent.epsilon)


def _q(df: pl.DataFrame, unit: str = "user") -> dpf.Query:
    return dpf.Query(df, privacy_unit=unit)


def _by(q: dpf.Query, key: str = "key") -> dpf.GroupBy:
    return q.group_by(key, public_keys=["a"], max_groups=1, max_rows=1)


BAD: list[tuple[str, Any]] = [
    ("misspelt unit", lambda df: _by(_q(df, "usr")).agg(dpf.count())),
    ("misspelt key", lambda df: _by(_q(df), "kye").agg(dpf.count())),
    ("misspelt value", lambda df: _by(_q(df)).agg(dpf.sum("xx", bounds=(0, 1)))),
    ("non-numeric", lambda df: _by(_q(df)).agg(dpf.sum("s", bounds=(0, 1)))),
    ("bad expression", lambda df: _by(_q(df).with_columns(y=pl.col("nope") * 2)).agg(dpf.count())),
    (
        "object key",
        lambda df: _by(
            _q(df.with_columns(pl.Series("key", df["key"].to_list(), dtype=pl.Object)))
        ).agg(dpf.count()),
    ),
    (
        "runtime cast failure",
        lambda df: _by(_q(df).with_columns(y=pl.col("s").cast(pl.Int64))).agg(
            dpf.sum("y", bounds=(0, 1))
        ),
    ),
]


@pytest.mark.parametrize(("what", "build"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_before_charging(what: str, build: Any) -> None:
    acct = _acct()
    with pytest.raises(DataError) as info:
        build(_df()).release(epsilon=1.0, accountant=acct, rng=0)
    assert _spent(acct) == 0.0 and not acct.ledger
    # messages never echo data values
    for secret in ("u'", "'v'", "4.0", "5.0"):
        assert secret not in str(info.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: dpf.sum("x", bounds=None),  # type: ignore[arg-type]
        lambda: dpf.sum("x", bounds=(5, 1)),
        lambda: dpf.mean("x", bounds=(1, 1)),
        lambda: dpf.var("x", bounds=(0, float("inf"))),
        lambda: dpf.sum("x", bounds=(0, float("nan"))),
        lambda: dpf.histogram("x", bins=[3, 2]),
        lambda: dpf.quantiles("x", 1.5, bounds=(0, 1)),
        lambda: dpf.sum(3, bounds=(0, 1)),  # type: ignore[arg-type]
    ],
)
def test_bad_aggregation_parameters(make: Any) -> None:
    with pytest.raises(DataError):
        make()


@pytest.mark.parametrize(
    ("kw", "err"),
    [
        ({"epsilon": 0.0}, PrivacyParameterError),
        ({"epsilon": -1.0}, PrivacyParameterError),
        ({"epsilon": float("inf")}, PrivacyParameterError),
        ({"epsilon": 1.0, "delta": 1.0}, PrivacyParameterError),
        ({"epsilon": 1.0, "delta": -0.1}, PrivacyParameterError),
        ({"epsilon": 1.0, "noise": "cauchy"}, PrivacyParameterError),
    ],
)
def test_bad_privacy_parameters(kw: dict[str, Any], err: type[Exception]) -> None:
    acct = _acct()
    q = (
        dpf.Query(_df(), privacy_unit="user")
        .group_by("key", public_keys=["a"], max_groups=1, max_rows=1)
        .agg(dpf.count())
    )
    with pytest.raises(err):
        q.release(accountant=acct, rng=0, **kw)
    assert not acct.ledger


def test_bounds_parameters_and_private_keys_need_delta() -> None:
    q = dpf.Query(_df(), privacy_unit="user")
    for kw in ({"max_rows": 0}, {"max_groups": -1}, {"max_rows_per_unit": 0}, {"max_rows": 1.5}):
        with pytest.raises(PrivacyParameterError):
            q.group_by("key", **{"max_groups": 1, "max_rows": 1, **kw}).agg(dpf.count())  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="delta"):
        q.group_by("key", max_groups=1, max_rows=1).agg(dpf.count()).release(epsilon=1.0, rng=0)
    with pytest.raises(DataError):
        q.group_by("key", public_keys=["a", "a"], max_groups=1, max_rows=1).agg(dpf.count())
    with pytest.raises(DataError):
        q.group_by("key", public_keys=["a"], max_groups=1, max_rows=1).agg(dpf.count(), dpf.count())
    with pytest.raises(DataError):
        q.join(pl.DataFrame({"key": ["a"]}), on="key", how="full")
    with pytest.raises(DataError):
        dpf.Query([1, 2, 3], privacy_unit="user")


def test_empty_table_is_answered_with_noise() -> None:
    empty = _df().clear()
    acct = _acct()
    q = dpf.Query(empty, privacy_unit="user")
    pub = q.group_by("key", public_keys=["a", "b"], max_groups=1, max_rows=1).agg(
        dpf.count(), dpf.mean("x", bounds=(0, 10))
    )
    r = pub.release(epsilon=1.0, accountant=acct, rng=0)
    assert r.frame.height == 2 and _spent(acct) > 0
    assert r.frame["mean_x"].is_between(0, 10).all()
    priv = (
        q.group_by("key", max_groups=1, max_rows=1)
        .agg(dpf.count())
        .release(epsilon=1.0, delta=1e-6, rng=0)
    )
    assert priv.frame.height == 0
    whole = q.agg(dpf.count(), max_rows=1).release(epsilon=1.0, rng=3)
    assert whole.frame.height == 1


def test_explain_shows_plan_and_cost_and_charges_nothing() -> None:
    q = dpf.Query(_df(), privacy_unit="user").filter(pl.col("x") > 0)
    g = q.group_by("key", max_groups=2, max_rows=3).agg(dpf.count(), dpf.sum("x", bounds=(0, 10)))
    e = g.explain(epsilon=1.0, delta=1e-6)
    text = str(e)
    assert "keep <= 3 row(s) per (unit, key)" in text and "Total cost: epsilon=1" in text
    assert "Key selection" in text
    rows = e.plan.measures[0]
    assert rows.l1 == 6  # L0 · L∞
    assert e.plan.measures[1].l1 * e.plan.measures[1].unit == pytest.approx(6 * 10.0, rel=1e-6)


# -- regressions for the anchor bugs -------------------------------------------------------------


def _replace_l1(l_inf: int) -> int:
    q = dpf.Query(_df(), privacy_unit="user", neighbouring=Neighbouring.REPLACE)
    g = q.group_by("key", public_keys=["a"], max_rows=l_inf, max_groups=1).agg(dpf.count())
    return g.explain(epsilon=1.0).plan.measures[0].l1


def test_replacing_k_rows_in_a_group_is_sensitivity_2k(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenDP #2945: k rows replaced inside one group moved the count by k in the analysis,
    but the k rows can leave for another group: two counts move by k each, ℓ1 = 2k."""
    for k in (1, 3, 7):
        assert _replace_l1(k) == 2 * k
    # the broken variant (replace not doubling) is caught by the same check
    import dpkit.frame._query as query_mod

    monkeypatch.setattr(query_mod, "is_replace", lambda n: False)
    assert _replace_l1(3) != 6


def _max_influence(df: pl.DataFrame, unit: int) -> float:
    """Largest change of the bounded sum of the *redefined* x when one unit is removed."""
    q = dpf.Query(df, privacy_unit="user").with_columns(x=pl.col("x") * 1000.0)
    g = q.group_by("key", public_keys=["a"], max_rows=1, max_groups=1).agg(
        dpf.sum("x", bounds=(0, 1))
    )
    mn = g.explain(epsilon=1.0).plan.measures[0]
    d = dpf.Query(df.filter(pl.col("user") != unit), privacy_unit="user")
    d = d.with_columns(x=pl.col("x") * 1000.0)
    g2 = d.group_by("key", public_keys=["a"], max_rows=1, max_groups=1).agg(
        dpf.sum("x", bounds=(0, 1))
    )
    a, b = g.bounded_aggregates(seed=1), g2.bounded_aggregates(seed=1)
    assert isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame)
    col = mn.measure.name
    diff = abs(
        int(a.filter(pl.col("key") == "a")[col][0]) - int(b.filter(pl.col("key") == "a")[col][0])
    )
    return diff / mn.l1


def test_redefined_column_uses_the_bounds_given_at_aggregation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OpenDP #2949: redefining a column kept the old truncation bounds. Here bounds belong to
    the aggregation, so the redefined column is clamped to them: one unit moves the sum by at
    most the sensitivity used for the noise."""
    df = _df()
    assert max(_max_influence(df, u) for u in (1, 2, 3)) <= 1.0
    # broken variant: the per-row value is not clamped to the aggregation's bounds
    orig = pipeline_mod._row_int

    def stale(pl_: Any, m: Any, k: int) -> Any:
        return (pl_.col(m.column) * 2.0**k).floor().cast(pl_.Int64)

    monkeypatch.setattr(pipeline_mod, "_row_int", stale)
    assert max(_max_influence(df, u) for u in (1, 2, 3)) > 1.0
    monkeypatch.setattr(pipeline_mod, "_row_int", orig)


def _missing_key_noise(keys: int = 300) -> np.ndarray[Any, Any]:
    q = dpf.Query(_df(), privacy_unit="user")
    public = [f"missing{i}" for i in range(keys)]
    r = (
        q.group_by("key", public_keys=public, max_groups=1, max_rows=1)
        .agg(dpf.count())
        .release(epsilon=1.0, rng=11)
    )
    return r.frame["count"].to_numpy()


def test_each_missing_public_key_gets_independent_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenDP #2344: one noise value was broadcast to every missing public key."""

    def independent(v: np.ndarray[Any, Any]) -> bool:
        # 300 draws of discrete Laplace(1): P(fewer than 5 distinct values) is astronomically small
        # and the lag-1 correlation of independent draws is within ±5/√300 ≈ 0.29
        c = np.corrcoef(v[:-1], v[1:])[0, 1] if v.std() > 0 else 1.0
        return len(np.unique(v)) >= 5 and abs(c) < 0.29

    assert independent(_missing_key_noise())
    orig = finish_mod._noise

    def broadcast(mn: Any, shape: Any, gen: Any) -> Any:
        one = orig(mn, 1, gen)
        return np.full(shape, int(one[0]), dtype=np.int64)

    monkeypatch.setattr(finish_mod, "_noise", broadcast)
    assert not independent(_missing_key_noise())


class _ChargeFirst(dpf.GroupedQuery):
    """A deliberately broken release that charges before computing (the OpenDP
    ``keep="sample"`` failure mode: the plan fails at collect time after the budget is spent)."""

    def release(self, **kw: Any) -> Any:  # type: ignore[override]
        acct = kw["accountant"]
        plan = self.explain(epsilon=kw["epsilon"]).plan
        acct.charge(plan.event, label="broken")
        self._exact(plan, (1, 2, 3, 4))


def _fails_cleanly(cls: type[dpf.GroupedQuery], tmp_path: Path) -> bool:
    # A plan that fails when it runs: the file changes under a lazy scan after the query is
    # made (a step cannot fail on a value: such steps are refused when added)
    path = tmp_path / "t.csv"
    _df().with_columns(y=pl.lit(1)).write_csv(path)
    q = dpf.Query(pl.scan_csv(path), privacy_unit="user")
    g = q.group_by("key", public_keys=["a"], max_groups=1, max_rows=1).agg(
        dpf.sum("y", bounds=(0, 1))
    )
    _df().with_columns(y=pl.lit("not a number")).write_csv(path)
    g.__class__ = cls
    acct = _acct()
    with pytest.raises(DataError):
        g.release(epsilon=1.0, accountant=acct, rng=0)
    return not acct.ledger


def test_no_failure_after_charge(tmp_path: Path) -> None:
    assert _fails_cleanly(dpf.GroupedQuery, tmp_path)
    assert not _fails_cleanly(_ChargeFirst, tmp_path)


def test_distinct_units_sensitivity_with_a_row_cap_below_the_key_cap() -> None:
    """Units are counted on the pairs kept by L0, so L1 < L0 must not shrink their sensitivity:
    a unit with rows in three keys moves three unit counts even with one row per unit."""
    df = pl.DataFrame({"user": [9, 9, 9, 1], "key": ["a", "b", "c", "a"], "x": [1.0] * 4})
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=["a", "b", "c"], max_groups=3, max_rows_per_unit=1, max_rows=1
    )
    g = q.agg(dpf.count_units())
    claimed = g.explain(epsilon=1.0).plan.measures[0].l1
    without = dpf.Query(df.filter(pl.col("user") != 9), privacy_unit="user").group_by(
        "key", public_keys=["a", "b", "c"], max_groups=3, max_rows_per_unit=1, max_rows=1
    )
    a = g.bounded_aggregates()
    b = without.agg(dpf.count_units()).bounded_aggregates()
    assert isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame)
    joined = a.join(b, on="key", how="left", suffix="_b").fill_null(0)
    moved = int((joined["__units"] - joined["__units_b"]).abs().sum())
    assert moved == 3 and claimed >= moved


def test_quantiles_with_no_selected_key_release_an_empty_table() -> None:
    """Private selection may keep no key (here: every key has one unit, kept w.p. ≤ δ). The
    quantile tree was reshaped with ``-1`` and raised on zero keys — after the charge."""
    df = pl.DataFrame({"user": [1, 2, 3], "key": ["a", "b", "c"], "x": [0.1, 0.2, 0.3]})
    g = (
        _q(df)
        .group_by("key", max_groups=1, max_rows=1)
        .agg(dpf.count(), dpf.quantiles("x", [0.5], bounds=(0, 1)))
    )
    acct = _acct()
    r = g.release(epsilon=1.0, delta=1e-6, accountant=acct, rng=1)
    assert r.frame.height == 0 and "q_x_0.5_lo" in r.frame.columns
    assert len(acct.ledger) == 1


@pytest.mark.parametrize(
    ("by", "aggs"),
    [
        ("count", [dpf.count()]),  # a key column named like an estimate
        ("key", [dpf.count(), dpf.sum("x", bounds=(0, 1), alias="count_lo")]),
        ("key", [dpf.histogram("x", bins=[0, 1, 2]), dpf.count(alias="hist_x_1")]),
        ("key", [dpf.quantiles("x", [0.5], bounds=(0, 1)), dpf.count(alias="q_x_0.5_hi")]),
    ],
)
def test_output_columns_that_would_overwrite_each_other_are_refused(
    by: str, aggs: list[dpf.Aggregation]
) -> None:
    """The released frame was built from a dict: a key column or an interval column sharing a
    name with another output was silently overwritten (the key column lost)."""
    df = _df().with_columns(count=pl.col("key"))
    with pytest.raises(DataError, match="alias="):
        dpf.Query(df, privacy_unit="user").group_by(
            by, public_keys=["a"], max_groups=1, max_rows=1
        ).agg(*aggs)


def test_groups_too_large_for_int64_sums_are_refused_before_charging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Polars (and non-ANSI Spark) int64 sums wrap silently: 2^62 + 2^62 is −2^63. Per-row
    integers reach 2^30, so a group of more than 2^32 rows is refused before the charge. The
    limit is lowered here to exercise the check on a small table."""
    import dpkit.frame._grouped as grouped_mod

    assert pl.DataFrame({"a": [2**62, 2**62]})["a"].sum() < 0  # the wrap being guarded against
    monkeypatch.setattr(grouped_mod, "_MAX_GROUP_ROWS", 3)
    q = _q(_df()).group_by("key", public_keys=["a"], max_rows=3, max_groups=3)
    g = q.agg(dpf.sum("x", bounds=(0, 9)))
    acct = _acct()
    with pytest.raises(DataError, match="2\\^32"):
        g.release(epsilon=1.0, accountant=acct, rng=0)
    assert not acct.ledger
    monkeypatch.setattr(grouped_mod, "_MAX_GROUP_ROWS", 4)  # key "a" has exactly 4 bounded rows
    g.release(epsilon=1.0, accountant=acct, rng=0)
    assert len(acct.ledger) == 1


@pytest.mark.parametrize("column", ["user", "x"])
def test_pandas_with_mixed_types_is_a_data_error_that_does_not_echo_values(column: str) -> None:
    """pyarrow's conversion error (ArrowInvalid) quoted the offending private value."""
    import pandas as pd

    df = pd.DataFrame({"user": [1, 2, 3], "key": ["a", "b", "c"], "x": [1.0, 2.0, 3.0]})
    df[column] = df[column].astype(object)
    df.loc[2, column] = "secret-value"
    # an object column is text whatever it holds (refusing at conversion revealed the record:
    # see test_frame_attack_pandas_object); summing it is refused from the schema
    q = dpf.Query(df, privacy_unit="user").group_by(
        "key", public_keys=["a"], max_groups=1, max_rows=1
    )
    with pytest.raises(DataError) as info:
        q.agg(dpf.sum("x", bounds=(0, 1)), dpf.sum("user", bounds=(0, 9))).release(epsilon=1.0)
    assert "secret-value" not in str(info.value)


def test_object_key_column_is_refused_with_a_clear_message() -> None:
    df = _df().with_columns(pl.Series("key", _df()["key"].to_list(), dtype=pl.Object))
    acct = _acct()
    with pytest.raises(DataError, match="holds Python objects"):
        _q(df).group_by("key", max_groups=2, max_rows=1).agg(dpf.count()).release(
            epsilon=1.0, delta=1e-6, accountant=acct, rng=0
        )
    assert _spent(acct) == 0.0 and not acct.ledger
