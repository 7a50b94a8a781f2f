"""``dpkit serve``: run the curator service (uvicorn) from a ``curator.toml``.

``dpkit serve --new-admin-key`` prints a fresh admin key (keep it secret) and the line to put in
the configuration (only its hash). This module imports nothing heavy until the command runs, so
``dpkit`` works without the server extra installed.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``serve`` subcommand to the ``dpkit`` parser's subparsers."""
    p = sub.add_parser(
        "serve",
        help="run the curator service (HTTP API, ledger, dashboard)",
        description="Run the dpkit curator service configured by a TOML file (docs/server.md).",
    )
    p.add_argument("--config", help="path of curator.toml")
    p.add_argument("--host", help="override [server] host")
    p.add_argument("--port", type=int, help="override [server] port")
    p.add_argument(
        "--new-admin-key", action="store_true", help="print a new admin key and its hash, and exit"
    )
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from dpkit.server._auth import new_key

    if args.new_admin_key:
        _, key, h = new_key("admin")
        print(f"admin key (give it to the admin only; it is not stored): {key}")
        print(f'in curator.toml, [server]: admin_key_hash = "{h}"')
        return 0
    if not args.config:
        print("dpkit serve: --config curator.toml is required.")
        return 2
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - the server extra installs it
        print("dpkit serve needs the server extra: pip install 'dpkit[server]'")
        return 2
    from dpkit.server._app import create_app
    from dpkit.server._banner import startup_banner
    from dpkit.server._config import load_config

    cfg = load_config(args.config)
    host: str = args.host or cfg.host
    port: int = args.port or cfg.port
    print(startup_banner(cfg, host, port), flush=True)
    if cfg.workers == 1:
        uvicorn.run(create_app(cfg), host=host, port=port, log_level="warning", access_log=False)
        return 0
    # Several processes: uvicorn spawns each worker, which builds its own service from the
    # configuration file (worker_app) over the same ledger and data directory.
    import hashlib
    import os

    from dpkit.server._app import CONFIG_DIGEST_ENV, CONFIG_ENV, MASTER_ENV

    os.environ[CONFIG_ENV] = str(os.path.abspath(args.config))
    with open(args.config, "rb") as f:  # what was checked above is what every worker runs
        os.environ[CONFIG_DIGEST_ENV] = hashlib.sha256(f.read()).hexdigest()
    os.environ[MASTER_ENV] = str(os.getpid())
    uvicorn.run(
        "dpkit.server._app:worker_app",
        factory=True,
        workers=cfg.workers,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
    )
    return 0
