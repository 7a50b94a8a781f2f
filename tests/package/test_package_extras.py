"""The extras install what their layer imports: an analyst's `client` is httpx alone, and the
client imports nothing of the server's."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER_SIDE = ("fastapi", "uvicorn", "starlette", "psycopg", "pyarrow", "polars", "dpkit.server")


def test_client_extra_is_httpx_alone() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert [r.split(">")[0] for r in extras["client"]] == ["httpx"]


def test_the_client_imports_nothing_server_side() -> None:
    code = (
        "import sys\n"
        "from dpkit.client import Curator\n"
        "with Curator('http://127.0.0.1:9', 'key') as c:\n"
        "    pass\n"
        f"print(sorted(m for m in {SERVER_SIDE!r} if m in sys.modules))\n"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
