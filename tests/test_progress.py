"""The one progress API (dpkit._progress): off by default in library calls, on in the command
line, drawn by tqdm on a terminal or as a plain line elsewhere; a low module with no import
circle."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import numpy as np
import pytest

from dpkit._progress import ProgressBar, progress_bar
from dpkit.audit import epsilon_lower_bound

SRC = Path(__file__).resolve().parents[1] / "src" / "dpkit"


def _dpkit_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dpkit"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("dpkit")}
    return names


def test_progress_is_a_low_module_and_the_commands_do_not_import_upwards() -> None:
    assert _dpkit_imports(SRC / "_progress.py") == set()  # any layer may import it
    for layer_cli in (SRC / "release" / "_cli.py", SRC / "server" / "_cli.py"):
        assert "dpkit.cli" not in _dpkit_imports(layer_cli), layer_cli  # no circle


def _laplace(d: float, n: int, rng: np.random.Generator) -> np.ndarray:
    return d + rng.laplace(0.0, 1.0, n)


def test_library_calls_print_nothing_unless_given_a_bar(capsys: pytest.CaptureFixture[str]) -> None:
    epsilon_lower_bound(_laplace, 0.0, 1.0, trials=2000, rng=1)
    assert capsys.readouterr() == ("", "")
    out = io.StringIO()
    with ProgressBar(1, stream=out, backend="text") as bar:
        epsilon_lower_bound(_laplace, 0.0, 1.0, trials=2000, rng=1, progress=bar)
    assert bar.done == bar.total == 4000  # both datasets' runs, reported by the call itself
    assert "100.0%" in out.getvalue()


def test_plain_bar_rescales_and_never_runs_backwards() -> None:
    out = io.StringIO()
    bar = ProgressBar(10, stream=out, width=10, backend="text")
    bar(5, 10)
    bar(3, 10)  # a late report does not move the bar back
    assert bar.done == 5
    bar(20, 20)  # a call may learn its total as it goes
    bar.close()
    assert "[##########] 100.0%" in out.getvalue()


def test_tqdm_draws_when_asked_and_the_switch_turns_it_off() -> None:
    pytest.importorskip("tqdm", reason="the progress extra")
    out = io.StringIO()
    with ProgressBar(4, stream=out, label="fit", backend="tqdm") as bar:
        bar(4, 4)
    assert "100%" in out.getvalue() and "4/4" in out.getvalue()
    assert progress_bar(4, enabled=False) is None
    assert isinstance(progress_bar(4, stream=io.StringIO()), ProgressBar)  # not a tty: plain


def test_bad_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="backend"):
        ProgressBar(3, backend="rich")
