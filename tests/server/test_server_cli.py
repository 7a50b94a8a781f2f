"""`dpkit serve` and the configuration file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpkit.cli import main
from dpkit.errors import DataError
from dpkit.server import hash_key, load_config


def test_new_admin_key_prints_the_key_and_only_its_hash_for_the_config(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--new-admin-key"]) == 0
    out = capsys.readouterr().out
    key = re.search(r"(dpk_admin_\S+)", out)
    h = re.search(r'admin_key_hash = "(sha256:[0-9a-f]{64})"', out)
    assert key and h and hash_key(key.group(1)) == h.group(1)


def test_serve_needs_a_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "--config" in capsys.readouterr().out


def test_config_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "curator.toml"
    cfg.write_text('[server]\nport = 9000\nledger = "l.db"\nadmin_key_hash = "sha256:ab"\n')
    c = load_config(cfg)
    assert c.port == 9000 and c.ledger == str(tmp_path / "l.db")
    assert c.data_dir == tmp_path / "data" and c.import_dir == tmp_path / "imports"
    cfg.write_text('[server]\nledger = "postgresql://u@127.0.0.1:5432/db"\n')
    assert load_config(cfg).ledger.startswith("postgresql://")


@pytest.mark.parametrize(
    "text", ["[server\n", '[server]\nadmin_key_hash = "plaintext-key"\n', "datasets = 3\n"]
)
def test_bad_configs_are_refused(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "curator.toml"
    cfg.write_text(text)
    with pytest.raises(DataError):
        load_config(cfg)
