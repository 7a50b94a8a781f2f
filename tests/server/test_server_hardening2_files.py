"""The service's files are private whatever the umask: the data directory and every folder in it
0700; the ledger, its -wal and -shm, manifests, schemas and lock files 0600; a dataset's Arrow file,
written once, 0400."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpkit.server import ServerConfig
from dpkit.server._service import Curator

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning")


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)  # the usual default, which makes new files 0644 and folders 0755
    try:
        yield
    finally:
        os.umask(old)


def _modes(root: Path) -> dict[str, int]:
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder) / name
            out[str(p.relative_to(root))] = stat.S_IMODE(p.lstat().st_mode)
    return out


def _service(tmp_path: Path) -> tuple[Curator, Path]:
    imp = tmp_path / "imp"
    imp.mkdir(exist_ok=True)
    (imp / "t.csv").write_text("x,c\n" + "".join(f"{i % 10},{'ab'[i % 2]}\n" for i in range(50)))
    state = tmp_path / "state"
    state.mkdir(exist_ok=True, mode=0o700)
    cfg = ServerConfig(
        ledger=str(state / "ledger.db"),
        data_dir=state / "data",
        import_dir=imp,
        insecure_seed=1,
    )
    cur = Curator(cfg)
    cur.start()
    return cur, state


def _register_and_query(cur: Curator) -> None:
    cols = [
        {"name": "x", "type": "float", "bounds": [0, 10]},
        {"name": "c", "type": "category", "categories": ["a", "b"]},
    ]
    spec = {"name": "t", "source": "t.csv", "total_epsilon": 10.0, "columns": cols}
    cur.register_dataset(spec)
    a = cur.add_analyst("ann")
    cur.ledger.set_budget(a["id"], "t", 10.0, 0.0)
    out = cur.query(cur.authenticate(a["key"]), {"dataset": "t", "query": "mean",
                                                 "column": "x", "epsilon": 1.0})  # fmt: skip
    assert out["status"] == "released"


def _mode(path: Path) -> int:
    """What the service makes of each of its files: the Arrow data read-only, others 0600."""
    return 0o700 if path.is_dir() else 0o400 if path.name == "data.bin" else 0o600


def test_new_files_are_private_under_umask_022(tmp_path: Path, umask_022: None) -> None:
    cur, state = _service(tmp_path)
    _register_and_query(cur)
    cur.register_dataset(  # a replacement goes through the .tmp / .old folders
        {
            "name": "t",
            "source": "t.csv",
            "total_epsilon": 10.0,
            "columns": [{"name": "x", "type": "float", "bounds": [0, 5]}],
        }
    )
    modes = _modes(state)
    for must in ("ledger.db", "ledger.db-wal", "ledger.db-shm", "data", "data/t",
                 "data/t/data.bin", "data/t/data.json", "data/t/schema.json",
                 "data/.dpkit.lock"):  # fmt: skip
        assert must in modes, (must, sorted(modes))
    loose = {k: oct(m) for k, m in modes.items() if m != _mode(state / k)}
    assert loose == {}
    cur.ledger.stop_checkpoints()


def test_an_older_installation_is_made_private_at_start(tmp_path: Path, umask_022: None) -> None:
    cur, state = _service(tmp_path)
    _register_and_query(cur)
    cur.ledger.stop_checkpoints()
    cur.ledger.close()
    # what an older version left: everything readable by all
    for p in [state / "data", *(state / "data").rglob("*"), *state.glob("ledger.db*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    cur2, _ = _service(tmp_path)
    cur2.refresh()
    modes = _modes(state)
    loose = {k: oct(m) for k, m in modes.items() if m != _mode(state / k)}
    assert loose == {}
    cur2.ledger.stop_checkpoints()
