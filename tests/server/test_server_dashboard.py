"""The web dashboard in a real headless browser (Debian's chromium): screenshots and DOM."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.client import Curator

BLUE = np.array([0x2A, 0x7A, 0xE2])  # interval lines and budget bars
RED = np.array([0xD6, 0x27, 0x28])  # released values


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is required (make system-deps installs it)")
    return exe


def _browse(server: Any, key: str, tmp: Path, mode: str) -> Any:
    """Open the dashboard with a one-time login link; a screenshot (PNG path) or the DOM."""
    link = server.http.post("/v1/dashboard/token", headers={"X-API-Key": key}).json()["url"]
    out = tmp / f"{mode}-{abs(hash(link))}.png"
    args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp / 'profile'}", "--window-size=1400,900"]  # fmt: skip
    args += [f"--screenshot={out}"] if mode == "png" else ["--dump-dom"]
    r = subprocess.run(
        [*args, server.url + link], capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return out if mode == "png" else r.stdout


def _pixels(path: Path) -> Any:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB")).astype(int)


def _count(img: Any, colour: Any) -> int:
    return int((np.abs(img - colour).sum(axis=2) < 30).sum())


@pytest.fixture(scope="module")
def session(server: Any) -> tuple[str, str]:
    aid, key = server.analyst("frank", 5.0)
    with Curator(server.url, key) as c:
        c.mean("survey", "age", epsilon=0.5)
        c.mean("survey", "income", epsilon=0.5)
        c.count("survey", epsilon=0.5)
    return aid, key


def test_analyst_dashboard(server: Any, session: tuple[str, str], tmp_path: Path) -> None:
    dom = _browse(server, session[1], tmp_path, "dom")
    assert "frank (analyst)" in dom and "Your budgets" in dom
    assert dom.count('aria-label="error bar"') == 3
    assert "Ledger" not in dom  # an analyst sees only their own page
    img = _pixels(_browse(server, session[1], tmp_path, "png"))
    assert img.shape[0] >= 600 and img.shape[1] >= 1000
    assert img.std() > 10  # not a blank page
    assert _count(img, RED) > 3 * 20  # three value dots (about 50 px each)
    assert _count(img, BLUE) > 100  # interval lines and the budget bar


def test_admin_dashboard(server: Any, session: tuple[str, str], tmp_path: Path) -> None:
    dom = _browse(server, server.admin_key, tmp_path, "dom")
    for section in ("Datasets", "Analysts", "Budgets", "Ledger"):
        assert f"<h2>{section}" in dom
    assert "frank" in dom and "survey" in dom
    img = _pixels(_browse(server, server.admin_key, tmp_path, "png"))
    assert img.std() > 10 and _count(img, BLUE) > 100


def test_dashboard_needs_a_valid_link(server: Any) -> None:
    r = server.http.get("/dashboard")
    assert r.status_code == 401
    r = server.http.get("/dashboard/login?token=forged")
    assert r.status_code == 401
    link = server.http.post("/v1/dashboard/token", headers={"X-API-Key": server.admin_key}).json()[
        "url"
    ]
    assert server.http.get(link, follow_redirects=False).status_code == 303
    server.http.cookies.clear()
    assert server.http.get(link).status_code == 401  # a link works once


def test_values_are_escaped(server: Any, tmp_path: Path) -> None:
    from dpkit.server._dashboard import error_bar

    assert error_bar(1.0, [0.0, 2.0]).startswith("<svg")
    assert "no interval" in error_bar(1.0, None)
    assert "no interval" in error_bar("<script>", [0, 1])
