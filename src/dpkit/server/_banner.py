"""What ``dpkit serve`` prints when it starts: where the service listens, where the dashboard is,
and which ledger holds the budgets — never a key, and never a database password.

>>> from pathlib import Path
>>> from dpkit.server import ServerConfig
>>> cfg = ServerConfig(ledger="postgresql://curator:s3cret@db:5432/dp", data_dir=Path("data"),
...                    import_dir=Path("imports"))
>>> print(startup_banner(cfg, "127.0.0.1", 8700, version="1.2.3"))
dpkit 1.2.3 curator service
  address:    http://127.0.0.1:8700  (API description: /openapi.json, interactive: /docs)
  dashboard:  http://127.0.0.1:8700/dashboard  (sign in by a link from POST /v1/dashboard/token)
  ledger:     PostgreSQL postgresql://curator:***@db:5432/dp
  workers:    1
  datasets:   none registered from the configuration
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from dpkit.server._config import ServerConfig

__all__ = ["ledger_description", "startup_banner"]


def ledger_description(ledger: str) -> str:
    """The ledger in words, with any password in its URL replaced by ``***``."""
    if ledger.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(ledger)
        netloc = parts.netloc
        if "@" in netloc:
            user, host = netloc.rsplit("@", 1)
            if ":" in user:
                user = user.split(":", 1)[0] + ":***"
            netloc = f"{user}@{host}"
        return "PostgreSQL " + urlunsplit(parts._replace(netloc=netloc))
    return "SQLite " + ledger.removeprefix("sqlite:")


def startup_banner(cfg: ServerConfig, host: str, port: int, *, version: str | None = None) -> str:
    """The lines ``dpkit serve`` prints on start."""
    if version is None:
        from dpkit._version import __version__ as version
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
    url = f"http://{shown}:{port}"
    names = [str(d.get("name", "?")) for d in cfg.datasets if isinstance(d, dict)]
    lines = [
        f"dpkit {version} curator service",
        f"  address:    {url}  (API description: /openapi.json, interactive: /docs)",
        f"  dashboard:  {url}/dashboard  (sign in by a link from POST /v1/dashboard/token)",
        f"  ledger:     {ledger_description(cfg.ledger)}",
        f"  workers:    {cfg.workers}",
        "  datasets:   "
        + (", ".join(names) if names else "none registered from the configuration"),
    ]
    if host not in ("127.0.0.1", "localhost", "::1"):
        lines.append(
            "  note:       not on loopback: serve it behind a TLS-terminating proxy (keys travel "
            "in headers)"
        )
    return "\n".join(lines)
