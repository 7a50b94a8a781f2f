"""`dpkit serve` says where it is on start: address, dashboard link and ledger, never a secret."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from dpkit.server._auth import new_key
from dpkit.server._banner import ledger_description

ROOT = Path(__file__).resolve().parents[2]


def test_ledger_is_named_without_its_password() -> None:
    assert ledger_description("/srv/dp/ledger.db") == "SQLite /srv/dp/ledger.db"
    assert ledger_description("sqlite:/srv/dp/l.db") == "SQLite /srv/dp/l.db"
    shown = ledger_description("postgresql://curator:p%40ss:word@db.local:5432/dp")
    assert shown == "PostgreSQL postgresql://curator:***@db.local:5432/dp"
    assert "p%40ss" not in shown and "word" not in shown
    assert ledger_description("postgres://u@h/db") == "PostgreSQL postgres://u@h/db"


def test_serve_prints_address_dashboard_and_ledger_then_answers(tmp_path: Path) -> None:
    _, key, key_hash = new_key("admin")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "curator.toml"
    cfg.write_text(
        f'[server]\nport = {port}\nledger = "ledger.db"\nadmin_key_hash = "{key_hash}"\n'
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpkit.cli", "serve", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(6)]
        text = "".join(lines)
        url = f"http://127.0.0.1:{port}"
        assert f"address:    {url}" in text
        assert f"dashboard:  {url}/dashboard" in text
        assert f"ledger:     SQLite {tmp_path / 'ledger.db'}" in text
        assert key not in text and key_hash not in text
        # The address printed is the one that answers.
        for _ in range(600):
            try:
                if httpx.get(url + "/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.1)
        else:
            raise AssertionError("the service did not answer at the printed address")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
