"""What SQL queries release: the same as the hand-written frame plan, the whole budget shown and
charged once, post-processing of released values only, BigQuery's per-unit semantics, metadata
from TOML and SmartNoise YAML, and the peers' pitfalls shown not to happen."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from _sql_tables import make_catalog, make_tables

import dpkit.frame as dpf
import dpkit.sql as dps
from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import DataError, PrivacyParameterError, QueryRefusedError
from dpkit.random import seeded


@pytest.fixture(scope="module")
def catalog() -> dps.Catalog:
    return make_catalog()


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    return make_tables()


def test_equal_to_the_hand_written_frame_plan(catalog: dps.Catalog, tables: dict) -> None:
    sql = (
        "SELECT sex, COUNT(*) AS n, AVG(age) AS a, SUM(age + 1) AS s FROM pums "
        "WHERE married GROUP BY sex"
    )
    out = dps.query(sql, tables, catalog=catalog, epsilon=1.0, rng=seeded(7))
    q = (
        dpf.Query(tables["pums"], privacy_unit="pid", missing="drop")
        .filter(pl.col("married"))
        .with_columns(__sql_e1=pl.col("age").cast(pl.Float64).clip(0, 100) + 1)
        .group_by("sex", public_keys=["0", "1"], max_groups=2, max_rows=2)
        .agg(dpf.count(alias="n"), dpf.mean("age", bounds=(0, 100), alias="a"),
             dpf.sum("__sql_e1", bounds=(1, 101), alias="s"))
    )  # fmt: skip
    hand = q.release(epsilon=1.0, rng=seeded(7)).frame.sort("sex")
    assert out["sex"].to_list() == hand["sex"].to_list()
    for c in ("n", "a", "s"):
        for end in ("", "_lo", "_hi"):
            assert out[c + end].to_list() == hand[c + end].to_list()


def test_bigquery_equal_to_per_unit_windows_then_frame(catalog: dps.Catalog, tables: dict) -> None:
    sql = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, privacy_unit_column=pid) "
        "educ, AVG(age, contribution_bounds_per_group => (0, 90)) AS a FROM pums GROUP BY educ"
    )
    out = dps.query(sql, tables, catalog=catalog, rng=seeded(3))
    per_unit = tables["pums"].with_columns(
        u=pl.col("age").cast(pl.Float64).mean().over(["pid", "educ"])
    )
    hand = (
        dpf.Query(per_unit, privacy_unit="pid", missing="drop")
        .group_by("educ", max_groups=1, max_rows=1)
        .agg(dpf.mean("u", bounds=(0, 90), alias="a"))
        .release(epsilon=1.0, delta=1e-5, noise="laplace", selection="laplace",
                 selection_share=0.5, rng=seeded(3))
        .frame.sort("educ")
    )  # fmt: skip
    assert out["educ"].to_list() == hand["educ"].to_list()
    assert out["a"].to_list() == hand["a"].to_list()


def test_bigquery_average_is_of_per_unit_averages(catalog: dps.Catalog) -> None:
    # one unit with 50 rows of 100 and 50 units with one row of 0: SQL's row AVG is 50,
    # BigQuery's average of per-unit averages is 100/51; a loose ε makes the noise negligible
    big = pl.DataFrame({"pid": [0] * 50 + list(range(1, 51)), "age": [100] * 50 + [0] * 50})
    t = big.with_columns(sex=pl.lit("0"), educ=pl.lit("1"), income=pl.lit(1.0),
                         married=pl.lit(True), note=pl.lit("a"), score=pl.lit(0.0))  # fmt: skip
    sql = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1000, delta=1e-3) "
        "AVG(age, contribution_bounds_per_group => (0, 100)) AS a FROM pums"
    )
    bq = dps.query(sql, {"pums": t}, catalog=catalog, rng=seeded(1))["a"][0]
    assert abs(bq - 100 / 51) < 1.0


def test_explain_shows_every_noisy_quantity_and_release_charges_the_total(
    catalog: dps.Catalog, tables: dict
) -> None:
    q = dps.SQLQuery("SELECT educ, AVG(age) FROM pums GROUP BY educ", catalog)
    ex = q.explain(tables, epsilon=1.0, delta=1e-6)
    text = str(ex)
    # the mean's hidden count and the key selection are both listed and priced
    assert "rows:" in text and "centred sum of age" in text and "Key selection" in text
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    before = acct.spent
    assert before.epsilon == 0
    r = q.release(tables, epsilon=1.0, delta=1e-6, accountant=acct, rng=seeded(1))
    spent = acct.spent
    assert isinstance(spent, ApproxDP)
    assert spent.epsilon <= 1.0 + 1e-9 and spent.epsilon > 0.999
    assert r.event == ex.event


def test_bigquery_budget_comes_from_options_only(catalog: dps.Catalog, tables: dict) -> None:
    sql = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) COUNT(*) FROM pums"
    q = dps.SQLQuery(sql, catalog)
    with pytest.raises(PrivacyParameterError):
        q.release(tables, epsilon=2.0)
    ex = q.explain(tables)
    assert (ex.epsilon, ex.delta) == (1.0, 1e-5)


def test_having_order_limit_act_on_released_values(catalog: dps.Catalog, tables: dict) -> None:
    sql = "SELECT educ, COUNT(*) AS n FROM pums GROUP BY educ ORDER BY n DESC LIMIT 2"
    out = dps.query(sql, tables, catalog=catalog, epsilon=1.0, delta=1e-6, rng=seeded(5))
    full = dps.query("SELECT educ, COUNT(*) AS n FROM pums GROUP BY educ", tables,
                     catalog=catalog, epsilon=1.0, delta=1e-6, rng=seeded(5))  # fmt: skip
    assert out["n"].to_list() == sorted(full["n"].to_list(), reverse=True)[:2]
    having = dps.query("SELECT educ, COUNT(*) AS n FROM pums GROUP BY educ HAVING n > 590",
                       tables, catalog=catalog, epsilon=1.0, delta=1e-6, rng=seeded(5))  # fmt: skip
    assert having["n"].to_list() == [v for v in full["n"].to_list() if v > 590]


def test_expression_of_aggregates_has_an_interval(catalog: dps.Catalog, tables: dict) -> None:
    out = dps.query("SELECT AVG(age) + 3 AS a, SUM(age) / 10 AS s FROM pums", tables,
                    catalog=catalog, epsilon=1.0, rng=seeded(2))  # fmt: skip
    assert out["a_lo"][0] <= out["a"][0] <= out["a_hi"][0]
    exact = float(tables["pums"]["age"].mean()) + 3  # type: ignore[arg-type]
    assert abs(out["a"][0] - exact) < 5


def test_toml_and_smartnoise_yaml_metadata(tmp_path: Path) -> None:
    toml = tmp_path / "meta.toml"
    toml.write_text(
        '[tables.pums]\nprivacy_unit = "pid"\nmax_groups = 2\n'
        '[tables.pums.columns]\npid = "int"\nage = { type = "int", bounds = [0, 100] }\n'
        'sex = { type = "string", keys = ["0", "1"] }\n'
    )
    cat = dps.load_catalog(toml)
    t = cat.table("pums")
    assert t is not None and t.max_groups == 2 and t.column("sex").keys == ("0", "1")  # type: ignore[union-attr]
    yml = tmp_path / "meta.yaml"
    yml.write_text(
        "PUMS:\n  PUMS:\n    PUMS:\n      max_ids: 3\n      row_privacy: false\n"
        "      censor_dims: true\n      pid: {type: int, private_id: true}\n"
        "      income: {type: int, lower: 0, upper: 500000, nullable: false}\n"
    )
    sn = dps.load_catalog(yml)
    t2 = sn.table("PUMS")
    assert t2 is not None and t2.privacy_unit == "pid" and t2.max_rows_per_unit == 3
    q = dps.SQLQuery("SELECT AVG(income) FROM PUMS.PUMS", sn)
    assert q._c.aggs[0].stat == "mean"
    with pytest.raises(DataError):
        dps.load_catalog(tmp_path / "missing.toml")


# -- the peers' pitfalls -------------------------------------------------------------------------


def test_keys_are_never_released_without_threshold(catalog: dps.Catalog) -> None:
    """A key held by one unit (educ '9') is not released by private key selection."""
    g = np.random.default_rng(1)
    n = 2000
    t = pl.DataFrame({"pid": np.arange(n), "age": g.integers(0, 100, n), "sex": ["0"] * n,
                      "educ": ["1"] * (n - 1) + ["9"], "income": np.ones(n), "married": [True] * n,
                      "note": ["a"] * n, "score": np.zeros(n)})  # fmt: skip
    for seed in range(5):
        out = dps.query("SELECT educ, COUNT(*) FROM pums GROUP BY educ", {"pums": t},
                        catalog=catalog, epsilon=1.0, delta=1e-6, rng=seeded(seed))  # fmt: skip
        assert out["educ"].to_list() == ["1"]
    with pytest.raises(PrivacyParameterError, match="delta"):
        dps.query("SELECT educ, COUNT(*) FROM pums GROUP BY educ", {"pums": t},
                  catalog=catalog, epsilon=1.0)  # fmt: skip


def test_clamping_follows_the_expression_not_the_column(catalog: dps.Catalog) -> None:
    """SmartNoise #201: clamping columns then summing an expression of them. Here the sum of
    ``age * 1000`` is clamped to (0, 100000), and its noise follows that range."""
    q = dps.SQLQuery("SELECT SUM(age * 1000) FROM pums", catalog)
    assert q._c.aggs[0].bounds == (0.0, 100_000.0)
    narrow = dps.SQLQuery("SELECT SUM(age) FROM pums", catalog)
    assert narrow._c.aggs[0].bounds == (0.0, 100.0)


def test_join_fan_out_is_bounded_after_the_join(catalog: dps.Catalog) -> None:
    """A self-join on the unit multiplies one unit's rows (k² rows for k); the bounds apply after
    the join, so the count moves by at most max_rows · max_groups."""
    base = pl.DataFrame({"pid": list(range(10)), "minutes": [1.0] * 10})
    extra = pl.DataFrame({"pid": [99] * 30, "minutes": [1.0] * 30})
    q = dps.SQLQuery("SELECT COUNT(*) AS n FROM visits a JOIN visits b ON a.pid = b.pid", catalog)
    counts = []
    for d in (base, pl.concat([base, extra])):
        gq = q.frame_query({"visits": d})
        counts.append(int(gq.bounded_aggregates(seed=0)["__rows"][0]))
    assert counts[1] - counts[0] == 1  # max_rows = 1 for visits: 900 joined rows count once


def test_subquery_leakage_is_refused(catalog: dps.Catalog) -> None:
    with pytest.raises(QueryRefusedError, match="subquer"):
        dps.SQLQuery("SELECT COUNT(*) FROM pums WHERE income > (SELECT AVG(income) FROM pums)",
                     catalog)  # fmt: skip


def test_counts_are_rounded_without_bias(catalog: dps.Catalog, tables: dict) -> None:
    """SmartNoise truncates counts (bias −0.5); dpkit's noise is on the integers, unbiased."""
    vals = [
        dps.query("SELECT COUNT(*) AS n FROM pums", tables, catalog=catalog, epsilon=0.5,
                  rng=seeded(s))["n"][0]
        for s in range(100)
    ]  # fmt: skip
    exact = dps.SQLQuery("SELECT COUNT(*) FROM pums", catalog).frame_query(tables)
    true = int(exact.bounded_aggregates(seed=0)["__rows"][0])
    # 100 draws of discrete Laplace with scale 2·2/0.5 = 8 (sd ≈ 11.3): mean within 4 sd/√100
    assert abs(float(np.mean(vals)) - true) < 4 * 11.4 / np.sqrt(100)


def test_post_processing_that_cannot_run_is_refused_before_the_charge(
    catalog: dps.Catalog, tables: dict
) -> None:
    q = dps.SQLQuery("SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex HAVING n > 'many'", catalog)
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
    with pytest.raises(QueryRefusedError, match="released values"):
        q.release(tables, epsilon=1.0, accountant=acct, rng=seeded(0))
    assert acct.spent.epsilon == 0  # type: ignore[attr-defined]
