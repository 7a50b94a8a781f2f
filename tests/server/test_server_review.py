"""Regression tests from an independent review of the curator service."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkit.errors import DataError
from dpkit.server import ServerConfig, hash_key, load_config, new_key
from dpkit.server._auth import key_id
from dpkit.server._schema import check_name
from dpkit.server._service import AuthError, Curator


def test_config_file_refuses_the_demo_seed(tmp_path: Path) -> None:
    # A seeded service draws predictable noise, and the same noise again after every restart
    # (the seed sequence starts over), so `dpkit serve` must not accept it from curator.toml.
    cfg = tmp_path / "curator.toml"
    cfg.write_text('[server]\nledger = "l.db"\ninsecure_seed = 2026\n')
    with pytest.raises(DataError, match="insecure_seed"):
        load_config(cfg)


def test_a_new_admin_key_in_the_config_revokes_the_old_one(tmp_path: Path) -> None:
    # Rotating a leaked admin key is done by putting a new hash in the configuration; the key
    # stored at the first start must stop working at the next start.
    _, old, old_hash = new_key("admin")
    _, new, new_hash = new_key("admin")
    base = {"ledger": str(tmp_path / "l.db"), "data_dir": tmp_path, "import_dir": tmp_path}
    first = Curator(ServerConfig(**base, admin_key_hash=old_hash))  # type: ignore[arg-type]
    first.start()
    assert first.authenticate(old).role == "admin"
    second = Curator(ServerConfig(**base, admin_key_hash=new_hash))  # type: ignore[arg-type]
    second.start()
    assert second.authenticate(new).role == "admin"
    with pytest.raises(AuthError):
        second.authenticate(old)
    assert hash_key(new) == new_hash


@pytest.mark.parametrize("name", ["survey\n", "age\n"])
def test_names_with_a_trailing_newline_are_refused(name: str) -> None:
    # `$` in a Python pattern also matches before a final newline.
    with pytest.raises(DataError):
        check_name(name, "name")


def test_keys_and_idempotency_keys_with_a_trailing_newline_are_refused(tmp_path: Path) -> None:
    _, key, _ = new_key("a1")
    assert key_id(key) == "a1" and key_id(key + "\n") is None
    base = {"ledger": str(tmp_path / "l.db"), "data_dir": tmp_path, "import_dir": tmp_path}
    cur = Curator(ServerConfig(**base))  # type: ignore[arg-type]
    cur.start()
    a = cur.add_analyst("ann")
    who = cur.authenticate(a["key"])
    body = {"dataset": "none", "query": "count", "epsilon": 1.0, "idempotency_key": "k1\n"}
    with pytest.raises(DataError, match="idempotency key"):
        cur.query(who, body)
