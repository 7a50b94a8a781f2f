"""The `dpkit audit` command: table, progress bar on stderr, exit status."""

from __future__ import annotations

import pytest

from dpkit.cli import ProgressBar, main


def test_audit_one_mechanism_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "--mechanism", "RandomizedResponse", "--epsilon", "1", "--trials",
                 "20000", "--seed", "3"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["mechanism", "claimed"]
    assert len(lines) == 3  # binary and 4-ary randomized response
    assert all(line.endswith("ok") for line in lines[1:])
    assert "100.0%" in err and "[" in err  # the progress bar went to stderr


def test_controls_are_caught_and_status_reflects_it(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "--controls", "--mechanism", "half scale", "naive", "--epsilon", "1",
                 "--trials", "20000", "--quiet"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    rows = out.strip().splitlines()[1:]
    assert len(rows) == 2 and all(r.endswith("caught") for r in rows)


def test_violation_gives_status_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Present a broken mechanism as a built-in one: the command must flag it and exit 1.
    import dpkit.cli as cli
    from dpkit.audit._controls import laplace_half_scale

    monkeypatch.setattr(cli, "builtin_cases", lambda eps: [laplace_half_scale(eps)])
    code = main(["audit", "--epsilon", "1", "--trials", "20000", "--quiet"])
    out, _ = capsys.readouterr()
    assert code == 1
    assert out.strip().splitlines()[-1].endswith("VIOLATION")


def test_list_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--list", "--controls", "--epsilon", "1"]) == 0
    out, _ = capsys.readouterr()
    assert "Laplace" in out and "control: Name & Shame" in out and "stats.median" in out
    assert main(["audit", "--mechanism", "no-such-thing"]) == 2
    assert main(["audit", "--epsilon", "-1", "--mechanism", "Laplace"]) == 2
    _, err = capsys.readouterr()
    assert "epsilon" in err
    with pytest.raises(SystemExit):
        main(["frobnicate"])


def test_progress_bar_draws_in_place() -> None:
    import io

    s = io.StringIO()
    bar = ProgressBar(10, stream=s, width=10)
    bar.advance(5, "x")
    bar.advance(5)
    bar.close()
    text = s.getvalue()
    assert "[#####.....]  50.0%" in text and "[##########] 100.0%" in text
    assert text.endswith("\n")
