"""The compiled sum's C source refuses the compiler flags under which its NaN refusal is lost."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

import dpkit.stats._fixed as fx

SOURCE = Path(fx.__file__).with_name("_fixedsum.c")


@pytest.mark.parametrize("flag", ["-ffast-math", "-ffinite-math-only"])
def test_the_c_source_refuses_to_compile_where_nan_may_be_assumed_away(flag: str) -> None:
    # Compiled so, the loop dropped the NaN flag (every NaN was summed as a record, unrefused).
    # setup.py passes -fno-fast-math last; the source itself refuses such flags from any build,
    # which then leaves the optional module out (the NumPy path sums instead).
    cc = shutil.which("cc") or shutil.which("gcc")
    include = sysconfig.get_paths()["include"]
    if cc is None or not SOURCE.exists() or not (Path(include) / "Python.h").exists():
        pytest.skip("no C compiler, Python headers or C source here (an installed wheel)")
    args = [cc, "-O3", "-std=c99", "-fsyntax-only", f"-I{include}", str(SOURCE)]
    assert subprocess.run(args, capture_output=True).returncode == 0  # the plain build compiles
    run = subprocess.run([*args[:-1], flag, str(SOURCE)], capture_output=True, text=True)
    assert run.returncode != 0
    assert "NaN" in run.stderr
