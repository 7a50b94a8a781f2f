"""A service started on its own data directory beside a running one that shares its ledger.

Which processes are alive is known from locks in the data directory; a process alone in *its*
data directory resolved every ``reserved`` charge of the ledger, so a second service on the same
ledger (a PostgreSQL database serves several hosts; a maintenance instance on a copy of the
configuration) marked ``lost`` the charges that the first one was answering: their answers were
then sent, and stored nowhere, while the ledger said none ever was, and a retry with the key got
410 instead of the answer. A process alone resolves only the charges of processes that ran in
its own data directory (and those made before charges recorded their process).
"""

from __future__ import annotations

import dataclasses
import gc
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpkit.server import ServerConfig
from dpkit.server._auth import Principal
from dpkit.server._service import Curator

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning")

COLS = [{"name": "x", "type": "float", "bounds": [0, 10]}]
BODY = {"dataset": "t", "query": "count", "epsilon": 0.5, "idempotency_key": "k-1"}


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerConfig]:
    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "t.csv").write_text("x\n" + "\n".join(str(i % 10) for i in range(200)))
    url = request.getfixturevalue("pg_db") if request.param == "postgres" else None
    yield ServerConfig(ledger=url or str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp")  # fmt: skip
    gc.collect()  # a connection left open fails this test (ResourceWarning), not a later one


def test_a_service_on_another_data_directory_leaves_the_charges_in_flight(
    config: ServerConfig, tmp_path: Path
) -> None:
    one = Curator(config)
    one.start()
    one.register_dataset({"name": "t", "source": "t.csv", "total_epsilon": 100.0,
                          "columns": COLS})  # fmt: skip
    a = one.add_analyst("ana")
    one.ledger.set_budget(a["id"], "t", 50.0, 0.0)
    who = Principal(a["id"], "ana", "analyst")
    request = {k: v for k, v in BODY.items() if k != "idempotency_key"}
    charge = one.ledger.reserve(who.id, "t", request, 0.5, 0.0, "k-1", one.versions["t"])
    (tmp_path / "data2").mkdir(mode=0o700)
    shutil.copytree(config.data_dir / "t", tmp_path / "data2" / "t")  # its copy of the data
    two = Curator(dataclasses.replace(config, data_dir=tmp_path / "data2"))
    two.start()  # alone in its data directory, not in the ledger
    assert two.ledger.charge(charge.id).status == "reserved"  # type: ignore[union-attr]
    one.ledger.release(charge.id, {"value": 7.0, "ci": None, "alpha": 0.05, "labels": None})
    assert two.query(who, dict(BODY))["value"] == 7.0  # the key's answer, not a 410
