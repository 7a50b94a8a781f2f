"""A registered dataset is held once, whatever the number of worker processes.

Two worker processes (two :class:`Curator` objects in two Python processes, over one ledger and
one data directory, as ``dpkit serve`` with ``workers = 2`` runs them) answer queries that read
every column of a 200 MB dataset. Their memory is read from ``/proc`` while both are alive:

* the private (anonymous) memory each gained while loading and answering is far below the
  dataset's size (each would hold a whole copy if it loaded the columns into its own memory,
  as the service did before the data were mapped);
* the data file's pages are shared: the proportional set size (PSS: each shared page counted
  once, split between the processes mapping it) of the two mappings of ``data.bin`` adds up
  to at most one copy;
* the workers never import PyArrow (the store needs only NumPy).

And the stored file is what was registered: a file changed behind the service's back is refused.
A dataset stored by an older version (one ``.npy`` file per column, or one Arrow file) is
converted once, with the same values, or refused with a message telling the admin what to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpkit.errors import DataError
from dpkit.server import DatasetSchema, ServerConfig, Table
from dpkit.server._ledger import Ledger
from dpkit.server._outcomes import QueryFailedError
from dpkit.server._service import Curator
from dpkit.server._store import (
    DATA_FILE,
    FORMAT,
    MANIFEST,
    load_table,
    store_table,
    stored_dtype,
)

from _arrow_reference import store_table_arrow  # isort: skip

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

ROWS = 6_250_000  # 4 columns of 8 bytes: 200 MB
MB = 1 << 20

_WORKER = r"""
import json, sys
from pathlib import Path
from dpkit.server import ServerConfig
from dpkit.server._outcomes import QueryFailedError
from dpkit.server._service import Curator

def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024

d = Path(sys.argv[1])
cur = Curator(ServerConfig(ledger=str(d / "l.db"), data_dir=d / "data", import_dir=d))
import polars  # the library's own memory, before the data are read
before = anon()
cur.start()  # maps the file (and sums the bounded columns: every page of x and y is read)
who = cur.authenticate(sys.argv[2])
for q in ({"query": "mean", "column": "x"}, {"query": "mean", "column": "y"},
          {"query": "var", "column": "z"}, {"query": "histogram", "column": "g"},
          {"query": "count"}):
    out = cur.query(who, {"dataset": "big", "epsilon": 1.0, **q})
    assert out["status"] == "released", out
print(json.dumps({"anon_gained": anon() - before, "pyarrow": "pyarrow" in sys.modules}),
      flush=True)
sys.stdin.readline()  # stay alive (and mapped) until the parent has read /proc
"""


def _data_mapping(pid: int) -> tuple[int, int]:
    """(Rss, Pss) in bytes of the process's mappings of ``data.bin``."""
    rss = pss = 0
    inside = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:  # a mapping's header line
                inside = head[-1].endswith(DATA_FILE)
            elif inside and head[0] == "Rss:":
                rss += int(head[1]) * 1024
            elif inside and head[0] == "Pss:":
                pss += int(head[1]) * 1024
    return rss, pss


def _store(tmp_path: Path) -> tuple[str, int]:
    """The 200 MB dataset, stored and registered as the service does; an analyst's key."""
    schema = DatasetSchema.from_dict({"name": "big", "columns": [
        {"name": "x", "type": "float", "bounds": [0, 1]},
        {"name": "y", "type": "float", "bounds": [0, 1]},
        {"name": "z", "type": "float", "bounds": [0, 1]},
        {"name": "g", "type": "category", "categories": ["a", "b", "c"]}]})  # fmt: skip
    i = np.arange(ROWS)  # (any values: the test is about where they are held)
    cols = {"x": (i % 1000) / 1000, "y": (i % 997) / 997, "z": (i % 991) / 991, "g": i % 3}
    store_table(tmp_path / "data", Table(schema, cols))
    del cols
    ledger = Ledger(str(tmp_path / "l.db"))
    ledger.migrate()
    ledger.add_dataset("big", schema.to_dict(), 100.0, 0.0)
    ledger.close()
    cur = Curator(ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                               import_dir=tmp_path))  # fmt: skip
    a = cur.add_analyst("ann")
    cur.ledger.set_budget(a["id"], "big", 100.0, 0.0)
    cur.ledger.close()
    return a["key"], (tmp_path / "data" / "big" / DATA_FILE).stat().st_size


def test_two_workers_hold_one_copy_of_a_200_mb_dataset(tmp_path: Path) -> None:
    key, size = _store(tmp_path)
    assert size > 190 * MB
    cmd = [sys.executable, "-c", _WORKER, str(tmp_path), key]
    pipe = subprocess.PIPE
    workers = [subprocess.Popen(cmd, stdin=pipe, stdout=pipe, text=True) for _ in range(2)]
    try:
        said = [json.loads(w.stdout.readline()) for w in workers]  # type: ignore[union-attr]
        gained = [s["anon_gained"] for s in said]
        mapped = [_data_mapping(w.pid) for w in workers]
    finally:
        for w in workers:
            w.communicate("\n", timeout=60)
    assert all(w.returncode == 0 for w in workers)
    assert not any(s["pyarrow"] for s in said)
    # Each worker read every column in full: what it keeps of its own is its interpreter,
    # modules and buffers, a quarter of the data at most (a worker that loaded the columns
    # would have gained the whole 200 MB).
    assert max(gained) < size / 4, [g // MB for g in gained]
    # The pages it read are the file's, resident once: each worker maps the whole file, and
    # the two mappings' proportional shares add up to one copy, not two.
    assert min(rss for rss, _ in mapped) >= size - MB, [m // MB for m, _ in mapped]
    assert sum(pss for _, pss in mapped) <= 1.05 * max(rss for rss, _ in mapped)


def test_a_stored_file_changed_behind_the_service_is_refused(tmp_path: Path) -> None:
    schema = DatasetSchema.from_dict({"name": "t", "columns": [
        {"name": "x", "type": "float", "bounds": [0, 1]}]})  # fmt: skip
    manifest = store_table(tmp_path, Table(schema, {"x": np.linspace(0, 1, 100)}))
    assert oct((tmp_path / "t" / DATA_FILE).stat().st_mode & 0o777) == oct(0o400)
    stored = json.loads((tmp_path / "t" / MANIFEST).read_text())
    assert stored == manifest and stored["rows"] == 100
    t = load_table(tmp_path, schema)
    assert not t.columns["x"].flags.writeable  # a view on the read-only mapping
    assert float(t.columns["x"][-1]) == 1.0
    path = tmp_path / "t" / DATA_FILE
    os.chmod(path, 0o600)
    raw = bytearray(path.read_bytes())
    raw[-200] ^= 1  # one bit of the file, not of its length
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="does not match its checksum"):
        load_table(tmp_path, schema)


def test_a_dataset_stored_by_an_older_version_is_rewritten_once_at_start(tmp_path: Path) -> None:
    # what an older version left: one .npy file per column and the schema, no manifest
    schema = DatasetSchema.from_dict({"name": "t", "columns": [
        {"name": "x", "type": "float", "bounds": [0, 10]},
        {"name": "c", "type": "category", "categories": ["a", "b"]}]})  # fmt: skip
    old = tmp_path / "data" / "t"
    old.mkdir(parents=True)
    x, c = np.arange(50, dtype=np.float64) % 10, np.arange(50) % 3
    np.save(old / "x.npy", x)
    np.save(old / "c.npy", c)
    (old / "schema.json").write_text(json.dumps(schema.to_dict()))
    ledger = Ledger(str(tmp_path / "l.db"))
    ledger.migrate()
    ledger.add_dataset("t", schema.to_dict(), 1.0, 0.0)
    ledger.close()
    cur = Curator(ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                               import_dir=tmp_path))  # fmt: skip
    cur.start()
    assert sorted(p.name for p in old.iterdir()) == [DATA_FILE, MANIFEST, "schema.json"]
    assert cur.versions["t"] == 1  # the same data: the same version
    assert np.array_equal(cur.tables["t"].columns["x"], x)
    assert np.array_equal(cur.tables["t"].columns["c"], c)
    cur.close()


def _arrow_installation(tmp_path: Path) -> tuple[DatasetSchema, dict[str, np.ndarray], str]:
    """What the Arrow store left: two datasets (one with its source's provenance), a ledger that
    knows them, and an analyst with budget on both."""
    schema = DatasetSchema.from_dict({"name": "t", "columns": [
        {"name": "x", "type": "float", "bounds": [-1, 10]},
        {"name": "c", "type": "category", "categories": ["a", "b"]},
        {"name": "n", "type": "int", "bounds": [0, 5]}]})  # fmt: skip
    x = np.array([-0.0, 0.0, 1e-310, 10.0, -1.0, 2.5] * 5)  # a signed zero, a subnormal
    cols = {"x": x, "c": np.arange(30) % 3, "n": (np.arange(30) % 6).astype(np.float64)}
    (tmp_path / "src.csv").write_text("x\n1\n")
    store_table_arrow(tmp_path / "data", Table(schema, cols), source=tmp_path / "src.csv")
    other = DatasetSchema.from_dict({**schema.to_dict(), "name": "u"})
    store_table(tmp_path / "data", Table(other, cols))  # registered by this version
    ledger = Ledger(str(tmp_path / "l.db"))
    ledger.migrate()
    for s in (schema, other):
        ledger.add_dataset(s.name, s.to_dict(), 10.0, 0.0)
    ledger.close()
    cur = _curator(tmp_path)
    a = cur.add_analyst("ann")
    for s in (schema, other):
        cur.ledger.set_budget(a["id"], s.name, 10.0, 0.0)
    cur.ledger.close()
    return schema, cols, a["key"]


def _curator(tmp_path: Path) -> Curator:
    return Curator(ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                                import_dir=tmp_path))  # fmt: skip


def test_a_dataset_stored_as_an_arrow_file_is_converted_with_the_same_bits(tmp_path: Path) -> None:
    schema, cols, _ = _arrow_installation(tmp_path)
    before = json.loads((tmp_path / "data" / "t" / MANIFEST).read_text())
    cur = _curator(tmp_path)
    cur.start()
    folder = tmp_path / "data" / "t"
    assert sorted(p.name for p in folder.iterdir()) == [DATA_FILE, MANIFEST, "schema.json"]
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["format"] == FORMAT and manifest["source"] == before["source"]
    assert oct((folder / DATA_FILE).stat().st_mode & 0o777) == oct(0o400)
    assert cur.versions["t"] == 1  # the same data: the same version
    for name, values in cols.items():
        stored = cur.tables["t"].columns[name]
        assert stored.dtype == stored_dtype(schema.column(name).type)
        assert stored.tobytes() == values.astype(stored.dtype).tobytes()
    cur.close()


_WITHOUT_PYARROW = r"""
import json, sys
sys.modules["pyarrow"] = None  # an installation without PyArrow: importing it fails
from pathlib import Path
from dpkit.server import ServerConfig
from dpkit.server._outcomes import QueryFailedError
from dpkit.server._service import Curator

d = Path(sys.argv[1])
cur = Curator(ServerConfig(ledger=str(d / "l.db"), data_dir=d / "data", import_dir=d))
cur.start()
who = cur.authenticate(sys.argv[2])
out = {"u": cur.query(who, {"dataset": "u", "query": "count", "epsilon": 1.0})["status"]}
try:
    cur.query(who, {"dataset": "t", "query": "count", "epsilon": 1.0})
except QueryFailedError as exc:
    out["t"] = str(exc)
out["spent"] = {d["name"]: d["spent_epsilon"] for d in cur.ledger.datasets()}
cur.close()
print(json.dumps(out))
"""


def test_an_arrow_file_without_pyarrow_is_refused_with_what_to_do(tmp_path: Path) -> None:
    _, _, key = _arrow_installation(tmp_path)
    run = subprocess.run([sys.executable, "-c", _WITHOUT_PYARROW, str(tmp_path), key],
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["u"] == "released"  # only that dataset is out of service
    assert "integrity check" in out["t"]  # what the analyst is told
    assert out["spent"] == {"t": 0.0, "u": 1.0}  # nothing charged for it
    # the admin is told, in the service's log, what to do
    assert "register the dataset again" in run.stderr and "pyarrow" in run.stderr
    assert (tmp_path / "data" / "t" / "data.arrow").exists()  # left as it was
    with pytest.raises(DataError, match="stored by an older version"):
        load_table(tmp_path / "data", DatasetSchema.from_dict(
            json.loads((tmp_path / "data" / "t" / "schema.json").read_text())))  # fmt: skip


def test_a_changed_arrow_file_is_not_converted(tmp_path: Path) -> None:
    _arrow_installation(tmp_path)
    path = tmp_path / "data" / "t" / "data.arrow"
    os.chmod(path, 0o600)
    raw = bytearray(path.read_bytes())
    raw[-300] ^= 1
    path.write_bytes(bytes(raw))
    cur = _curator(tmp_path)
    cur.start()
    assert "t" not in cur.tables and "u" in cur.tables
    assert path.exists()
    cur.close()


def test_a_worker_refuses_only_the_dataset_whose_file_was_changed(tmp_path: Path) -> None:
    cfg = ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp")  # fmt: skip
    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "x.csv").write_text("x\n" + "".join(f"{i % 10}\n" for i in range(300)))
    one = Curator(cfg)
    one.start()
    column = {"name": "x", "type": "float", "bounds": [0, 10]}
    for name in ("good", "bad"):
        one.register_dataset(
            {"name": name, "source": "x.csv", "total_epsilon": 10.0, "columns": [column]}
        )
    a = one.add_analyst("ann")
    for name in ("good", "bad"):
        one.ledger.set_budget(a["id"], name, 10.0, 0.0)
    assert json.loads((tmp_path / "data" / "bad" / MANIFEST).read_text())["source"]["name"] == (
        "x.csv"
    )
    path = tmp_path / "data" / "bad" / DATA_FILE
    os.chmod(path, 0o600)
    raw = bytearray(path.read_bytes())
    raw[-300] ^= 1
    path.write_bytes(bytes(raw))
    two = Curator(cfg)  # another worker, (re)started after the change
    two.start()  # starts: only that dataset is out of service
    who = two.authenticate(a["key"])
    count = {"query": "count", "epsilon": 1.0}
    assert two.query(who, {"dataset": "good", **count})["status"] == "released"
    with pytest.raises(QueryFailedError, match="integrity check"):
        two.query(who, {"dataset": "bad", **count})
    spent = {d["name"]: d["spent_epsilon"] for d in two.ledger.datasets()}
    assert spent == {"good": 1.0, "bad": 0.0}  # nothing charged for it
    one.register_dataset(
        {"name": "bad", "source": "x.csv", "total_epsilon": 10.0, "columns": [column]}
    )
    assert two.query(who, {"dataset": "bad", **count})["status"] == "released"  # the new version
    one.close()
    two.close()
