"""The HTTP face of the curator: a FastAPI (ASGI) application with OpenAPI docs at ``/docs``.

Every error is a JSON body ``{"error": {"type": ..., "message": ...}}`` with a 4xx status when the
request was at fault; messages never echo data values. Nothing is charged unless the response
carries an answer (or the service failed after charging, which the message says).
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time,
# and Request is imported inside create_app (lazily, for the install hint).

import gc
import sys
import time
from collections.abc import Callable
from typing import Any

from dpkit.errors import DataError, DPKitError
from dpkit.server._audit import AuditWriter
from dpkit.server._config import ServerConfig
from dpkit.server._registry import QueryRegistry
from dpkit.server._sanitize import audit_name, audit_path, audit_text
from dpkit.server._service import Curator
from dpkit.server._status import STATUS as _STATUS  # noqa: F401  (read here by callers)
from dpkit.server._status import BodyTooLarge  # noqa: F401  (read here by callers)

__all__ = ["CONFIG_DIGEST_ENV", "CONFIG_ENV", "MASTER_ENV", "create_app", "worker_app"]

CONFIG_ENV = "DPKIT_SERVER_CONFIG"
"""The environment variable that gives :func:`worker_app` the path of ``curator.toml``."""
CONFIG_DIGEST_ENV = "DPKIT_SERVER_CONFIG_SHA256"
"""The SHA-256 of ``curator.toml`` when the master started (workers started later check it)."""
MASTER_ENV = "DPKIT_SERVER_MASTER_PID"
"""The environment variable that gives each worker the process id of the master that started it."""


class _AuditMiddleware:
    """Queue one audit row per HTTP request (pure ASGI: no per-request task overhead)."""

    def __init__(self, app: Any, writer: Callable[[], AuditWriter | None]) -> None:
        self.app = app
        self.writer = writer

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def send_status(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            w = self.writer()
            if w is not None:
                # Every text from the client made storable and inert (:mod:`._sanitize`).
                st = scope.get("state", {})
                path = audit_path(scope.get("path", ""))
                row = (time.time(), st.get("principal"), audit_text(scope.get("method"), 16), path)
                w.add((*row, audit_name(st.get("dataset")), audit_name(st.get("query")),
                       status[0], audit_text(st.get("outcome"), 100)))  # fmt: skip


def create_app(config: ServerConfig, registry: QueryRegistry | None = None) -> Any:
    """The ASGI application of a curator service configured by ``config``.

    The routes live in one router per area: the analysts' queries and results
    (:mod:`._routes_queries`), the admin's (:mod:`._routes_admin`), and the dashboard
    (:mod:`._routes_dashboard`); what they share is one :class:`~dpkit.server._http.Http`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from dpkit.server import ServerConfig, create_app
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> app = create_app(ServerConfig(ledger=str(d / "l.db"), data_dir=d, import_dir=d))
    >>> app.title
    'dpkit curator'
    """
    try:
        from fastapi import FastAPI, Request
        from fastapi.exceptions import RequestValidationError
        from fastapi.responses import Response
        from starlette.concurrency import run_in_threadpool
    except ImportError as exc:  # pragma: no cover - the server extra installs it
        raise ImportError("the curator service needs pip install 'dpkit[server]'") from exc

    from contextlib import asynccontextmanager

    from dpkit.server._http import Http
    from dpkit.server._routes_admin import admin_router
    from dpkit.server._routes_dashboard import dashboard_router
    from dpkit.server._routes_queries import queries_router

    curator = Curator(config, registry)
    h = Http(config, curator)

    @asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        await run_in_threadpool(curator.start)
        h.audit = AuditWriter(
            curator.ledger,
            anonymous_per_minute=config.audit_anonymous_rows_per_minute,
            retention_days=config.audit_retention_days,
        )
        # Everything allocated so far (modules, routes, schemas) lives as long as the service:
        # moved out of the collector's generations, it is not traversed again by every full
        # collection, whose pauses would otherwise show as latency spikes under load.
        gc.collect()
        gc.freeze()
        # Requests leave no reference cycles behind (their objects are freed as they end), so
        # the collector's young generation is examined every 20,000 allocations instead of 700:
        # under load it ran ~80 times a second, about 4% of the service's CPU.
        gc.set_threshold(20_000, 10, 10)
        # The ledger's writes hand the GIL back around every SQLite statement; with Python's
        # default 5 ms switch interval a writer waiting to take it back behind busy threads
        # held every queued charge for up to 5 ms per statement. 1 ms roughly halves the
        # service's latency under load (benchmarks/server.py); shorter costs more in switches.
        sys.setswitchinterval(0.001)
        yield
        h.audit.close()
        curator.close()

    app = FastAPI(
        title="dpkit curator",
        description="Differentially private queries on datasets the curator keeps, under "
        "per-analyst budgets recorded in a crash-safe ledger.",
        version="1",
        lifespan=lifespan,
    )
    app.state.curator = curator
    app.add_middleware(_AuditMiddleware, writer=lambda: h.audit)

    @app.exception_handler(DPKitError)
    async def _known(request: Request, exc: DPKitError) -> Response:
        return h.error(exc, request)

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> Response:
        return h.error(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own answer lists each input it could not parse, value included: only the
        # names of the parameters (declared here, not sent) are kept.
        names = sorted({str(e.get("loc", ("", "?"))[-1]) for e in exc.errors()})
        msg = f"invalid parameter(s) {', '.join(names)}: see the API's documentation at /docs."
        return h.error(DataError(msg), request)

    # in the order of the former single closure: the OpenAPI document lists the paths alike
    app.include_router(queries_router(h))
    app.include_router(admin_router(h))
    app.include_router(dashboard_router(h))
    return app


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the process that started it dies.

    Worker processes share the listening socket; without this, a master killed with SIGKILL
    would leave its workers answering on the port, and a restarted service could not bind it.
    """
    import ctypes
    import os
    import signal
    import sys

    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        # A master that died before the call above (while this worker was starting) sends no
        # signal: this worker was already handed to another parent, so it ends itself.
        master = os.environ.get(MASTER_ENV)
        if master is not None and os.getppid() != int(master):
            os.kill(os.getpid(), signal.SIGKILL)


def worker_app() -> Any:
    """The application of one worker process of ``dpkit serve`` with ``workers > 1``.

    uvicorn starts each worker as a fresh (spawned) Python process, which calls this factory:
    the worker reads the configuration named by :data:`CONFIG_ENV` and builds its own
    :class:`~dpkit.server._service.Curator` over the service's shared ledger and data
    directory, with its own secure generators (nothing random is inherited from the master).
    """
    import hashlib
    import os

    from dpkit.server._config import load_config

    path = os.environ[CONFIG_ENV]
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    # uvicorn starts a new worker whenever one dies: one started from an edited file (another
    # ledger, say) would spend budgets the others do not see. Every worker uses the master's.
    if digest != os.environ.get(CONFIG_DIGEST_ENV, digest):
        raise DataError(f"{path} changed since the service started; restart the service.")
    _die_with_parent()
    return create_app(load_config(path))
