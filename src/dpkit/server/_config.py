"""The service's configuration file (``curator.toml``); see ``docs/server.md``.

Example::

    [server]
    host = "127.0.0.1"
    port = 8700
    ledger = "ledger.db"                  # SQLite file, or postgresql://user@host:port/db
    data_dir = "data"                     # cleaned datasets
    import_dir = "imports"                # where the admin's CSV/Parquet files are read from
    admin_key_hash = "sha256:..."         # from `dpkit serve --new-admin-key`
    max_body_bytes = 65536
    max_synthetic_rows = 10000            # most rows one synthesize query may return
    workers = 1                           # processes answering requests (same ledger and data)
    idempotency_wait_seconds = 30         # a repeated key waits this long for its first answer
    max_pricing_seconds = 10              # a query not priced within this is refused (503)
    audit_retention_days = 90             # request audit rows older than this are deleted
    audit_anonymous_rows_per_minute = 60  # requests without a valid key beyond this: counted only

    [spark]                               # optional: Spark-backed datasets (docs/server.md)
    master = "local[4]"
    query_seconds = 300                   # a query's Spark jobs are cancelled after this

    [[datasets]]                          # registered (cleaned) at start if not yet stored
    name = "survey"
    source = "survey.csv"
    total_epsilon = 10.0
    total_delta = 1e-6
    columns = [{name = "age", type = "float", bounds = [0, 100]}]
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpkit.errors import DataError
from dpkit.server._spark_jobs import SparkSettings, spark_settings

__all__ = ["ServerConfig", "load_config"]


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one curator service (paths already resolved)."""

    ledger: str
    data_dir: Path
    import_dir: Path
    admin_key_hash: str | None = None
    host: str = "127.0.0.1"
    port: int = 8700
    max_body_bytes: int = 65536
    dummy_rows: int = 1000
    max_synthetic_rows: int = 10_000
    datasets: tuple[dict[str, Any], ...] = field(default=())
    workers: int = 1
    """Worker processes of ``dpkit serve`` (1 to 64); each loads every dataset into its memory."""
    insecure_seed: int | None = None
    """Seed every answer's noise (reproducible demos and tests only: NOT private in practice).

    Only settable in code (the demo, tests): :func:`load_config` refuses it, so a service started
    with ``dpkit serve`` always draws secure noise. Seeded noise is predictable from the seed, and
    the same sequence of noise starts over at every restart of the service."""
    idempotency_wait_seconds: float = 30.0
    """How long a request repeating an idempotency key whose first request is still being
    answered waits for that answer before it is told to retry (HTTP 409)."""
    max_pricing_seconds: float = 10.0
    """The longest a request may wait for its query to be validated and priced (HTTP 503 after;
    nothing is charged, and a price computed meanwhile is remembered for the retry)."""
    audit_retention_days: float | None = 90.0
    """Request audit rows older than this are deleted (``None``: kept forever). Charges and
    their audit rows are always kept."""
    audit_anonymous_rows_per_minute: int = 60
    """Requests without a valid key written as audit rows per minute and process; the others
    are only counted (per minute and status)."""
    spark: SparkSettings | None = None
    """The ``[spark]`` section: the SparkSession of Spark-backed datasets and their queries'
    time limit (:mod:`dpkit.server._spark_jobs`); ``None``: no Spark."""


def _positive(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000_000:
        raise DataError(f"{name} must be an integer from 1 to 10,000,000.")
    return value


def _workers(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
        raise DataError("workers must be an integer from 1 to 64.")
    return value


def _seconds(value: object, name: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= high:
        raise DataError(f"{name} must be a number of seconds in (0, {high:g}].")
    return float(value)


def _retention(value: object) -> float | None:
    # 0 keeps request rows forever (TOML has no null)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1e5:
        raise DataError("audit_retention_days must be a number of days from 0 (forever) to 1e5.")
    return None if value == 0 else float(value)


def _rows(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
        raise DataError("audit_anonymous_rows_per_minute must be an integer from 0 to 1,000,000.")
    return value


def load_config(path: str | os.PathLike[str]) -> ServerConfig:
    """Read a ``curator.toml``; relative paths are taken from the file's folder.

    The admin key hash may also come from the environment variable ``DPKIT_ADMIN_KEY_HASH``.
    """
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"cannot read the configuration file: {exc}") from exc
    s = raw.get("server", {})
    base = p.resolve().parent
    ledger = str(s.get("ledger", "ledger.db"))
    if not ledger.startswith(("postgresql://", "postgres://", "sqlite:")):
        ledger = str(base / ledger)
    key_hash = s.get("admin_key_hash") or os.environ.get("DPKIT_ADMIN_KEY_HASH")
    if key_hash is not None and not (isinstance(key_hash, str) and key_hash.startswith("sha256:")):
        raise DataError("admin_key_hash must be 'sha256:<hex>' (see dpkit serve --new-admin-key).")
    if "insecure_seed" in s:
        raise DataError(
            "insecure_seed is not accepted in a configuration file: seeded noise is predictable "
            "(and repeats after every restart), so the answers would not be private. It exists "
            "only for demonstrations built in code (ServerConfig(insecure_seed=...))."
        )
    datasets = raw.get("datasets", [])
    if not isinstance(datasets, list):
        raise DataError("[[datasets]] must be an array of tables.")
    return ServerConfig(
        ledger=ledger,
        data_dir=base / str(s.get("data_dir", "data")),
        import_dir=base / str(s.get("import_dir", "imports")),
        admin_key_hash=key_hash,
        host=str(s.get("host", "127.0.0.1")),
        port=int(s.get("port", 8700)),
        max_body_bytes=int(s.get("max_body_bytes", 65536)),
        dummy_rows=int(s.get("dummy_rows", 1000)),
        max_synthetic_rows=_positive(s.get("max_synthetic_rows", 10_000), "max_synthetic_rows"),
        datasets=tuple(datasets),
        workers=_workers(s.get("workers", 1)),
        idempotency_wait_seconds=_seconds(
            s.get("idempotency_wait_seconds", 30.0), "idempotency_wait_seconds", 3600
        ),
        max_pricing_seconds=_seconds(
            s.get("max_pricing_seconds", 10.0), "max_pricing_seconds", 3600
        ),
        audit_retention_days=_retention(s.get("audit_retention_days", 90.0)),
        audit_anonymous_rows_per_minute=_rows(s.get("audit_anonymous_rows_per_minute", 60)),
        spark=spark_settings(raw.get("spark")),
    )
