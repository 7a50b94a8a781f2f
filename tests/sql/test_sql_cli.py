"""``dpkit sql`` on CSV and Parquet files with a TOML metadata file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from dpkit.cli import main

META = """
[tables.pums]
privacy_unit = "pid"
max_groups = 2
max_rows = 2
[tables.pums.columns]
pid = "int"
age = { type = "int", bounds = [0, 100] }
educ = "string"
[tables.regions]
public = true
[tables.regions.columns]
educ = "string"
region = "string"
"""


def test_cli_runs_a_joined_grouped_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g = np.random.default_rng(0)
    n = 600
    pums = pl.DataFrame({"pid": g.integers(0, 300, n), "age": g.integers(0, 100, n),
                         "educ": g.choice([str(i) for i in range(1, 6)], n)})  # fmt: skip
    pums.write_csv(tmp_path / "pums.csv")
    regions = pl.DataFrame({"educ": ["1", "2", "3", "4", "5"], "region": ["n", "n", "s", "s", "e"]})
    regions.write_parquet(tmp_path / "regions.parquet")
    (tmp_path / "meta.toml").write_text(META)
    sql = "SELECT region, COUNT(*) AS n FROM pums JOIN regions r USING (educ) GROUP BY region"
    args = [
        "sql", "--meta", str(tmp_path / "meta.toml"),
        "--table", f"pums={tmp_path / 'pums.csv'}",
        "--table", f"regions={tmp_path / 'regions.parquet'}",
        "--epsilon", "1", "--delta", "1e-6", "--seed", "1",
        "--output", str(tmp_path / "out.csv"), sql,
    ]  # fmt: skip
    assert main(args) == 0
    out = (tmp_path / "out.csv").read_text().splitlines()
    assert out[0] == "region,n,n_lo,n_hi"
    assert sorted(line.split(",")[0] for line in out[1:]) == ["e", "n", "s"]
    assert main([*args[:-3], "--explain", args[-1]]) == 0
    assert "Total cost: epsilon=1" in capsys.readouterr().out


def test_cli_refusal_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "meta.toml").write_text(META)
    code = main(["sql", "--meta", str(tmp_path / "meta.toml"), "--epsilon", "1",
                 "SELECT MIN(age) FROM pums"])  # fmt: skip
    assert code == 2
    assert "PERCENTILE_CONT" in capsys.readouterr().err
