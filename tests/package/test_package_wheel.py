"""The distribution as a user gets it: build the wheel, install it into a clean virtual
environment, run the README's quick start there, and check what the wheel ships.

The clean environment gets the wheel alone (``--no-deps``); dpkit's three runtime dependencies
(NumPy, SciPy, randomgen) are made visible from this interpreter's site-packages by a ``.pth``
line, so the test needs no network and takes seconds. Directories named in a ``.pth`` file are
only appended to ``sys.path``: the source tree (on ``PYTHONPATH`` for the rest of the suite, or an
editable install's finder) is not, so the import must come from the installed wheel.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("build", reason="the wheel test needs the dev extra's 'build'")


def _quick_start() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match is not None, "README.md's quick start has no python block"
    return match.group(1)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation builds with this environment's setuptools: no download.
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = out.glob("dpkit-*.whl")
    return found


@pytest.fixture(scope="module")
def clean_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The runtime dependencies, from here (appended to sys.path, after the wheel's own copy).
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "_runtime_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-deps",
         "--no-index", str(wheel)],
        env=_clean_env(),  # with the sources on PYTHONPATH, pip would think dpkit installed
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    return py


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def test_wheel_ships_the_package_its_license_and_types(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "dpkit/__init__.py" in names
    assert "dpkit/py.typed" in names
    # the example data, with where they come from and their licence
    assert {"dpkit/release/data/randhie.csv.gz", "dpkit/release/data/README.md"} <= set(names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any(n.startswith(("tests/", "docs/", "benchmarks/")) for n in names)


def test_readme_quick_start_runs_from_the_installed_wheel(clean_python: Path) -> None:
    code = "import dpkit, sys; print('FROM', dpkit.__file__)\n" + _quick_start()
    run = subprocess.run(
        [str(clean_python), "-W", "error", "-c", code],
        cwd=clean_python.parent,  # not the source tree
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    origin = run.stdout.splitlines()[0]
    assert str(clean_python.parents[1]) in origin, origin  # the wheel, not the sources
    assert "0.75" in run.stdout  # the accountant's spent ε, as the README says


def test_console_script_reports_the_version(clean_python: Path) -> None:
    from dpkit._version import __version__

    script = clean_python.parent / ("dpkit.exe" if os.name == "nt" else "dpkit")
    run = subprocess.run(
        [str(script), "--version"], env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"dpkit {__version__}"


def test_wheel_ships_the_compiled_sum_and_it_is_used(wheel: Path, clean_python: Path) -> None:
    # gcc and the Python headers are on the machines that build releases: the wheel carries the
    # one-pass kernel of the exact sum (and its type stub), and the installed package imports it
    # and gives the same integer as its NumPy path.
    names = zipfile.ZipFile(wheel).namelist()
    built = [n for n in names if n.startswith("dpkit/stats/_fixedsum.")]
    assert any(n.endswith((".so", ".pyd")) for n in built), built
    assert "dpkit/stats/_fixedsum.pyi" in names
    assert "dpkit/stats/_fixedsum.c" not in names  # the source ships in the sdist only
    code = (
        "import numpy as np, dpkit.stats._fixed as fx\n"
        "assert fx.kernel is not None, 'no compiled kernel'\n"
        "print('FROM', fx.kernel.__file__)\n"
        "x = np.random.default_rng(0).uniform(-5, 105, 1 << 20)\n"
        "a = fx.fixed_sum(x, (0.0, 100.0), 27)\n"
        "fx.kernel = None\n"
        "assert a == fx.fixed_sum(x, (0.0, 100.0), 27), 'paths differ'\n"
    )
    run = subprocess.run(
        [str(clean_python), "-W", "error", "-c", code],
        cwd=clean_python.parent,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert str(clean_python.parents[1]) in run.stdout, run.stdout  # the wheel's, not the sources'
