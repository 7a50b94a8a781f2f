"""Screenshots for the documentation: the curator's dashboards and a utility report, taken in
headless Chromium (Debian's ``chromium``) from a real service on loopback.

    python tools/screenshots.py     # writes docs/img/dashboard_admin.png, dashboard_analyst.png,
                                    # utility_report.png

The service is seeded (``ServerConfig(insecure_seed=...)``) so that the pictures are the same at
every run; a real service draws secure noise.
"""

from __future__ import annotations

import contextlib
import csv
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

IMG = Path(__file__).resolve().parents[1] / "docs" / "img"


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("chromium is needed (apt-get install chromium)")
    return exe


def _shoot(url: str, out: Path, profile: Path, height: int) -> None:
    args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size=1280,{height}",
            f"--screenshot={out}", url]  # fmt: skip
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    print("wrote", out)


def _dataset(folder: Path) -> None:
    g = np.random.default_rng(5)
    folder.mkdir(parents=True)
    with (folder / "households.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["age", "income", "region"])
        for _ in range(5000):
            w.writerow([f"{np.clip(g.normal(45, 15), 18, 95):.1f}",
                        f"{np.exp(g.normal(3.6, 0.5)):.2f}",
                        ("north", "south", "east", "west")[int(g.integers(0, 4))]])  # fmt: skip


def dashboards(tmp: Path) -> None:
    import httpx
    import uvicorn

    import dpkit.errors
    import dpkit.frame as dpf
    from dpkit.client import Curator
    from dpkit.server import ServerConfig, create_app, new_key

    _dataset(tmp / "imports")
    _, admin_key, admin_hash = new_key("admin")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    columns = [
        {"name": "age", "type": "float", "bounds": [18, 95]},
        {"name": "income", "type": "float", "bounds": [0, 200]},
        {"name": "region", "type": "category", "categories": ["north", "south", "east", "west"]},
    ]
    cfg = ServerConfig(
        ledger=str(tmp / "ledger.db"), data_dir=tmp / "data", import_dir=tmp / "imports",
        admin_key_hash=admin_hash, insecure_seed=2026,
        datasets=({"name": "households", "source": "households.csv", "total_epsilon": 4.0,
                   "total_delta": 1e-6, "columns": columns},),
    )  # fmt: skip
    server = uvicorn.Server(
        uvicorn.Config(create_app(cfg), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    try:
        keys = {}
        with Curator(url, admin_key) as admin:
            for name, eps in (("ada", 1.5), ("grace", 1.0)):
                a = admin.admin("POST", "/v1/admin/analysts", {"name": name})
                grant = {"analyst": a["id"], "dataset": "households", "epsilon": eps}
                admin.admin("PUT", "/v1/admin/budgets", grant)
                keys[name] = a["key"]
        with Curator(url, keys["ada"]) as c:
            c.mean("households", "age", epsilon=0.3)
            c.mean("households", "income", epsilon=0.3)
            c.count("households", epsilon=0.2)
            c.group_by("households", "region", dpf.count(), dpf.mean("income", bounds=(0, 200)),
                       epsilon=0.4)  # fmt: skip
            with contextlib.suppress(dpkit.errors.BudgetExceededError):
                c.median("households", "income", epsilon=0.5)  # refused: over ada's budget
        with Curator(url, keys["grace"]) as c:
            c.mean("households", "age", epsilon=0.25)
            c.histogram("households", "region", epsilon=0.25)
        for who, key, height in (("admin", admin_key, 1600), ("analyst", keys["ada"], 1400)):
            link = httpx.post(url + "/v1/dashboard/token", headers={"X-API-Key": key}).json()
            _shoot(url + link["url"], IMG / f"dashboard_{who}.png", tmp / who, height)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def report(tmp: Path) -> None:
    from dpkit.random import seeded
    from dpkit.release import Synthesizer, utility_report
    from dpkit.release._examples import load_randhie, randhie_domain

    real, domain = load_randhie(), randhie_domain()
    synth = Synthesizer(domain, epsilon=1.0, delta=1e-6)
    model = synth.fit(real, rng=seeded(1))
    synthetic = model.sample(len(real), rng=2, output="pandas")
    rep = utility_report(real, synthetic, domain, target="idp", synthesizer=synth)
    page = rep.to_html(tmp / "r.html")
    _shoot(page.as_uri(), IMG / "utility_report.png", tmp / "report", 1600)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        dashboards(Path(d) / "service")
        report(Path(d))
