"""The example notebooks of docs/notebooks/: each runs from top to bottom in a fresh kernel, and
the outputs stored for the site (plots included) are those of a clean run.

Run on a copy in memory, in a temporary working folder, so that nothing in the tree changes;
``python tools/make_notebooks.py`` rewrites the stored outputs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebooks need the docs extra")
nbclient = pytest.importorskip("nbclient", reason="the notebooks need the docs extra")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "docs" / "notebooks").glob("*.ipynb"))


def _outputs(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def _has_plot(nb: nbformat.NotebookNode) -> bool:
    return any("image/png" in o.get("data", {}) for o in _outputs(nb))


def test_the_four_notebooks_are_there() -> None:
    names = {p.stem for p in NOTEBOOKS}
    assert names == {"quickstart", "groupby", "curator", "synthetic"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_outputs_are_complete(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), "a cell was never run"
    assert not any(o.get("output_type") == "error" for o in _outputs(nb))
    assert _has_plot(nb), "the site shows each notebook's plot"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws the plots
    # The kernel runs in another folder: it must import this tree's dpkit, not an installed one.
    src = str(Path(__file__).resolve().parents[2] / "src")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
    assert not any(o.get("output_type") == "error" for o in _outputs(nb))
    assert _has_plot(nb)
