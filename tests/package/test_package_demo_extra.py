"""The demo environment stays small: `.[demo]` lists only what `make demo` imports, with the
lower bounds the layers' extras give, and the parts of the demo that once needed PyArrow
(the curator's store) or statsmodels (the synthetic-data example) run without them."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
LARGE = ("pyarrow", "statsmodels", "pyspark", "psycopg", "torch", "uvloop", "mypy", "pytest")

# Imports of these packages fail in the child process, as in an environment without them.
_BLOCK = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyarrow", "statsmodels"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


def _name(req: str) -> str:
    return re.split(r"[<>=\[;! ]", req, maxsplit=1)[0]


def test_the_demo_extra_installs_none_of_the_large_packages() -> None:
    names = [_name(r) for r in EXTRAS["demo"]]
    assert not [r for r in EXTRAS["demo"] if r.startswith("dpkit[")]  # no extra pulled whole
    assert not set(names) & set(LARGE), names


def test_the_demo_extra_keeps_the_layers_lower_bounds() -> None:
    layers = {}
    for extra, reqs in EXTRAS.items():
        if extra not in ("demo", "dev"):
            for r in reqs:
                if not r.startswith("dpkit["):
                    layers.setdefault(_name(r), set()).add(r)
    for r in EXTRAS["demo"]:
        if _name(r) in layers:  # fastapi and uvicorn come from the server extra, as listed
            assert r in layers[_name(r)], r


def _run(code: str) -> str:
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"}
    out = subprocess.run([sys.executable, "-c", _BLOCK + code], env=env, capture_output=True,
                         text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_the_service_registers_and_answers_without_pyarrow(tmp_path: Path) -> None:
    (tmp_path / "imp").mkdir()
    rows = "".join(f"{i % 7},{'abc'[i % 3]}\n" for i in range(200))
    (tmp_path / "imp" / "t.csv").write_text("x,c\n" + rows)
    code = f"""
from pathlib import Path
from dpkit.server import ServerConfig
from dpkit.server._service import Curator
d = Path({str(tmp_path)!r})
cur = Curator(ServerConfig(ledger=str(d / "l.db"), data_dir=d / "data", import_dir=d / "imp"))
cur.start()
cur.register_dataset({{"name": "t", "source": "t.csv", "total_epsilon": 5.0, "columns": [
    {{"name": "x", "type": "float", "bounds": [0, 10]}},
    {{"name": "c", "type": "category", "categories": ["a", "b", "c"]}}]}})
a = cur.add_analyst("ann")
cur.ledger.set_budget(a["id"], "t", 5.0, 0.0)
who = cur.authenticate(a["key"])
for q in ({{"query": "mean", "column": "x"}}, {{"query": "histogram", "column": "c"}}):
    print(cur.query(who, {{"dataset": "t", "epsilon": 1.0, **q}})["status"])
print("pyarrow" in sys.modules)
cur.close()
"""
    assert _run(code).split() == ["released", "released", "False"]


def test_the_example_data_load_without_statsmodels() -> None:
    code = """
from dpkit.release._examples import load_randhie, randhie_domain
df = load_randhie()
print(df.shape, list(df.columns) == list(randhie_domain().names))
"""
    assert _run(code).strip() == "(20190, 10) True"
