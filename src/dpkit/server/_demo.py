"""The curator service in a few seconds: start it on loopback with an SQLite ledger and a sample
dataset, run a short analyst session through :class:`dpkit.client.Curator` (including a query the
budget refuses), and stop it."""

from __future__ import annotations

import csv
import socket
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

import dpkit.errors
from dpkit.server._store import DATA_FILE

__all__ = ["demo"]


def _sample(folder: Path, rows: int = 5000) -> None:
    gen = np.random.default_rng(7)
    folder.mkdir(parents=True)
    with (folder / "households.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["age", "income", "region"])
        for i in range(rows):
            age = float(np.clip(gen.normal(45, 15), 18, 95))
            income = float(np.exp(gen.normal(3.6, 0.5)))
            region = ("north", "south", "east", "west")[int(gen.integers(0, 4))]
            # A few dirty cells, cleaned at registration by the schema's policy.
            w.writerow(["" if i % 250 == 0 else f"{age:.1f}", f"{income:.2f}", region])


def demo() -> None:
    """Print the curator section of ``make demo`` (seeded: the same output every run)."""
    import uvicorn

    from dpkit.client import Curator
    from dpkit.server import ServerConfig, create_app, new_key

    print("== Curator service: budgets over HTTP ==")
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        insecure = getattr(dpkit.errors, "InsecureRandomnessWarning", None)
        if insecure is not None:  # the demo seeds its noise on purpose, to be reproducible
            warnings.simplefilter("ignore", insecure)
        root = Path(tmp)
        _sample(root / "imports")
        _, admin_key, admin_hash = new_key("admin")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dataset = {
            "name": "households",
            "source": "households.csv",
            "total_epsilon": 3.0,
            "total_delta": 1e-6,
            "columns": [
                {"name": "age", "type": "float", "bounds": [18, 95]},
                {"name": "income", "type": "float", "bounds": [0, 200]},
                {"name": "region", "type": "category",
                 "categories": ["north", "south", "east", "west"]},
            ],
        }  # fmt: skip
        cfg = ServerConfig(
            ledger=str(root / "ledger.db"),
            data_dir=root / "data",
            import_dir=root / "imports",
            admin_key_hash=admin_hash,
            datasets=(dataset,),
            insecure_seed=2026,
        )
        server = uvicorn.Server(
            uvicorn.Config(create_app(cfg), host="127.0.0.1", port=port, log_level="error")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        try:
            with Curator(url, admin_key) as admin:
                ana = admin.admin("POST", "/v1/admin/analysts", {"name": "ada"})
                grant = {"analyst": ana["id"], "dataset": "households", "epsilon": 1.0}
                admin.admin("PUT", "/v1/admin/budgets", grant)
            print("service on 127.0.0.1 (a free port): SQLite ledger, dataset 'households' "
                  "(5,000 rows; schema public, data not)")  # fmt: skip
            with Curator(url, ana["key"]) as c:
                price = c.query("households", "mean", column="age", epsilon=0.4, dry_run=True)
                print(f"dry run (free): mean(age) would cost ε = {price['epsilon']}")
                m = c.mean("households", "age", epsilon=0.4)
                lo, hi = m.ci()
                print(f"mean(age)      = {m.value:7.2f}   95% CI [{lo:.2f}, {hi:.2f}]  ε = 0.4")
                quote = c.query("households", "histogram", column="region", epsilon=0.3,
                                dry_run=True)  # fmt: skip
                print(f"dry run (free): histogram(region) {quote}")
                h = c.histogram("households", "region", epsilon=0.3)
                counts = ", ".join(f"{k} {v:.0f}" for k, v in zip(h.labels or (), h.value,
                                                                   strict=False))  # fmt: skip
                hw = (h.ci()[1][0] - h.ci()[0][0]) / 2
                print(f"histogram(region): {counts}  ε = 0.3, each ± {hw:g} (95%)")
                g = c.group_by("households", "region", {"stat": "mean", "column": "income"},
                               epsilon=0.2)  # fmt: skip
                means = ", ".join(f"{r['region']} {r['mean_income']:.1f}" for r in g.rows[:4])
                print(f"group_by(region) mean(income): {means}  ε = 0.2")
                again = c.result(m.id or "")
                print(f"fetched again by id (no charge): mean(age) = {again.value:.2f}")
                left = c.budget()[0]["remaining_epsilon"]
                print(f"remaining budget: ε = {left:.2f}")
                ask = c.query("households", "quantiles", column="income", q=[0.5], epsilon=0.5,
                              dry_run=True)  # fmt: skip
                print(f"dry run (free): median(income) {ask.would_be_refused}")
                try:
                    c.median("households", "income", epsilon=0.5)
                except dpkit.errors.BudgetExceededError as exc:
                    print(f"median(income) at ε = 0.5 refused: {str(exc).split('. ')[0]}.")
            _rho_budget(url, admin_key)
        finally:
            server.should_exit = True
            thread.join(timeout=10)
        print("service stopped; the ledger keeps every charge on disk.")
        stored = root / "data" / "households"
        kb = (stored / DATA_FILE).stat().st_size / 1024
        print(f"the data were stored once, at registration: {DATA_FILE} ({kb:.0f} KB, read-only),\n"
              "  mapped by every worker (one copy in the page cache, however many workers),\n"
              "  its SHA-256 checked against data.json when mapped")  # fmt: skip


def _rho_budget(url: str, admin_key: str) -> None:
    """A budget declared in zero-concentrated DP: ρ's add up exactly in the ledger."""
    import dpkit.errors
    from dpkit.client import Curator

    with Curator(url, admin_key) as admin:
        bob = admin.admin("POST", "/v1/admin/analysts", {"name": "bob"})
        admin.set_budget(bob["id"], "households", rho=0.05)
    print("bob's budget is declared in zCDP: rho = 0.05 (charges' rho add up exactly)")
    with Curator(url, bob["key"]) as c:
        n = c.count("households", epsilon=0.2)
        print(f"count          = {n.value}   ε = 0.2, charged rho = ε²/2 = {n.rho:g}")
        s = c.sum("households", "income", rho=0.03, delta=1e-7)
        print(f"sum(income)    = {s.value:.0f}   Gaussian noise, charged rho = {s.rho:g}")
        (b,) = c.budget()
        print(f"remaining: rho = {b['remaining_rho']:g}")
        try:
            c.mean("households", "age", epsilon=0.1, delta=1e-7)
        except dpkit.errors.PrivacyParameterError as exc:
            why = str(exc).split("; ")[1].split(". ")[0]
            print(f"mean(age) at (ε, δ) = (0.1, 1e-7) refused: {why}.")
