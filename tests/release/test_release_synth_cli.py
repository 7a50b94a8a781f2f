"""``dpkit release`` end to end on a CSV file, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpkit.cli import main
from dpkit.release._examples import fair_domain, load_fair


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("release")
    load_fair().to_csv(d / "fair.csv", index=False)
    (d / "domain.json").write_text(json.dumps(fair_domain().spec()))
    return d


def test_release_writes_a_synthetic_csv_and_a_report(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, rep = files / "syn.csv", files / "report.html"
    argv = ["release", str(files / "fair.csv"), "--domain", str(files / "domain.json"),
            "--epsilon", "1", "--out", str(out), "--rows", "1234", "--report", str(rep),
            "--target", "occupation", "--seed", "3", "--estimator", "closed"]  # fmt: skip
    assert main(argv) == 0
    syn = pd.read_csv(out)
    assert len(syn) == 1234 and list(syn.columns) == list(fair_domain().names)
    assert set(syn["religious"]) <= {1, 2, 3, 4}
    assert np.mean(syn["affairs"] == 0) > 0.5  # the atom survives the CSV round trip
    captured = capsys.readouterr()
    assert "wrote 1234 synthetic rows" in captured.out
    assert "mean 3-way TVD" in captured.out
    assert "step 9 of 9" in captured.err  # the progress bar reached the end
    assert "data:image/png" in rep.read_text()


def test_release_refuses_bad_input_with_status_2(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = files / "bad.csv"
    df = load_fair().head(50).copy()
    df.loc[3, "religious"] = None  # a missing value: no category holds it
    df.to_csv(bad, index=False)
    base = ["--domain", str(files / "domain.json"), "--out", str(files / "x.csv"), "--quiet"]
    assert main(["release", str(bad), "--epsilon", "1", *base]) == 2
    assert "missing value" in capsys.readouterr().err
    # A category the domain does not declare is not refused (that would reveal the record):
    # without a catch-all the record is dropped.
    odd = files / "odd.csv"
    df = load_fair().head(50).copy()
    df.loc[3, "religious"] = 9
    df.to_csv(odd, index=False)
    argv = ["release", str(odd), "--epsilon", "1", "--domain", str(files / "domain.json"),
            "--out", str(files / "odd_out.csv"), "--quiet", "--estimator", "closed"]  # fmt: skip
    assert main(argv) == 0
    assert main(["release", str(files / "fair.csv"), "--epsilon", "-1", *base]) == 2
    assert main(["release", str(files / "missing.csv"), "--epsilon", "1", *base]) == 2
    (files / "d2.json").write_text("{not json")
    argv = ["release", str(files / "fair.csv"), "--epsilon", "1", "--domain",
            str(files / "d2.json"), "--out", str(files / "x.csv")]  # fmt: skip
    assert main(argv) == 2
    assert not (files / "x.csv").exists()


def test_release_checks_everything_before_the_fit_and_writes_nothing_on_error(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: a bad --target, a negative --rows or an unwritable --report used to be found
    # only after the fit, with the synthetic CSV already written (or a bare OSError).
    out = files / "never.csv"
    base = ["release", str(files / "fair.csv"), "--domain", str(files / "domain.json"),
            "--epsilon", "1", "--out", str(out), "--quiet"]  # fmt: skip
    assert main([*base, "--report", str(files / "r.html"), "--target", "nope"]) == 2
    assert "not a column" in capsys.readouterr().err
    assert main([*base, "--rows", "-5"]) == 2
    assert main([*base, "--report", str(files / "missing" / "r.html")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main([*base[:-2], str(files / "missing" / "o.csv"), "--quiet"]) == 2
    assert not out.exists() and not (files / "r.html").exists()
    assert not list(files.glob(".*.tmp"))
