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

from dpkit.errors import BudgetExceededError, DataError, DPKitError, PrivacyParameterError
from dpkit.server._audit import AuditWriter
from dpkit.server._audit_limits import request_counts
from dpkit.server._auth import Principal
from dpkit.server._config import ServerConfig
from dpkit.server._dashboard import dashboard_page
from dpkit.server._json import compact, parse_strict
from dpkit.server._ledger import NoBudgetError
from dpkit.server._numbers import real
from dpkit.server._outcomes import (
    AuthError,
    ForbiddenError,
    NotFoundError,
    QueryFailedError,
    result_json,
)
from dpkit.server._pricing import PricingBusyError
from dpkit.server._recovery import AnswerLostError, InProgressError
from dpkit.server._registry import QueryRegistry
from dpkit.server._sanitize import audit_name, audit_path, audit_text
from dpkit.server._service import Curator
from dpkit.server._sessions import SessionStore

__all__ = ["CONFIG_DIGEST_ENV", "CONFIG_ENV", "MASTER_ENV", "create_app", "worker_app"]

CONFIG_ENV = "DPKIT_SERVER_CONFIG"
"""The environment variable that gives :func:`worker_app` the path of ``curator.toml``."""
CONFIG_DIGEST_ENV = "DPKIT_SERVER_CONFIG_SHA256"
"""The SHA-256 of ``curator.toml`` when the master started (workers started later check it)."""
MASTER_ENV = "DPKIT_SERVER_MASTER_PID"
"""The environment variable that gives each worker the process id of the master that started it."""


class BodyTooLarge(DPKitError):
    """The request body is larger than ``max_body_bytes`` (HTTP 413)."""


_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (BodyTooLarge, 413),
    (AuthError, 401),
    (NoBudgetError, 403),
    (ForbiddenError, 403),
    (NotFoundError, 404),
    (BudgetExceededError, 402),
    (InProgressError, 409),
    (AnswerLostError, 410),
    (QueryFailedError, 500),
    (PricingBusyError, 503),
    (PrivacyParameterError, 400),
    (DataError, 400),
)


# The dashboard shows private answers: not kept in caches, not framed by other sites, no script
# or outside resource at all (the page needs only inline styles and SVG), and the one-time login
# link not sent on as a Referer.
_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}


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
        from fastapi.responses import HTMLResponse, RedirectResponse, Response
        from starlette.concurrency import run_in_threadpool
    except ImportError as exc:  # pragma: no cover - the server extra installs it
        raise ImportError("the curator service needs pip install 'dpkit[server]'") from exc

    from contextlib import asynccontextmanager

    curator = Curator(config, registry)
    state: dict[str, Any] = {"audit": None}
    # in the ledger: every worker process sees them, and a new key ends them (:mod:`._sessions`)
    sessions = SessionStore(curator.ledger)

    async def ledger_call(fn: Callable[..., Any], *args: Any) -> Any:
        if curator.ledger.postgres:  # a network round trip: in a worker thread
            return await run_in_threadpool(fn, *args)
        return fn(*args)  # a read or write of the embedded ledger: on the loop, as queries do

    @asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        await run_in_threadpool(curator.start)
        state["audit"] = AuditWriter(
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
        state["audit"].close()
        curator.close()

    app = FastAPI(
        title="dpkit curator",
        description="Differentially private queries on datasets the curator keeps, under "
        "per-analyst budgets recorded in a crash-safe ledger.",
        version="1",
        lifespan=lifespan,
    )
    app.state.curator = curator
    app.add_middleware(_AuditMiddleware, writer=lambda: state["audit"])

    def json_response(content: Any, status_code: int = 200) -> Response:
        # JSONResponse's bytes and headers, from the service's one compact encoder
        body = compact(content).encode("utf-8")
        return Response(body, status_code=status_code, media_type="application/json")

    def error(exc: BaseException, request: Request) -> Response:
        code = next((c for t, c in _STATUS if isinstance(exc, t)), 500)
        if code == 500 and not isinstance(exc, QueryFailedError):
            msg, name = "internal error; nothing was released.", "InternalError"
        else:
            msg, name = str(exc), type(exc).__name__
        request.state.outcome = f"{name}"
        body: dict[str, Any] = {"error": {"type": name, "message": msg}}
        if isinstance(exc, BudgetExceededError) and isinstance(exc.remaining, tuple):
            body["error"]["remaining"] = {"epsilon": exc.remaining[0], "delta": exc.remaining[1]}
        return json_response(body, status_code=code)

    @app.exception_handler(DPKitError)
    async def _known(request: Request, exc: DPKitError) -> Response:
        return error(exc, request)

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> Response:
        return error(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own answer lists each input it could not parse, value included: only the
        # names of the parameters (declared here, not sent) are kept.
        names = sorted({str(e.get("loc", ("", "?"))[-1]) for e in exc.errors()})
        msg = f"invalid parameter(s) {', '.join(names)}: see the API's documentation at /docs."
        return error(DataError(msg), request)

    def presented_key(request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        return key or request.headers.get("x-api-key")

    async def who(request: Request, cookie: bool = False) -> Principal:
        key = presented_key(request)
        if key is None and cookie:
            sid = request.cookies.get("dpkit_session", "")
            sess: Principal | None = await ledger_call(sessions.principal, sid)
            if sess is not None:
                request.state.principal = sess.id
                return sess
        if curator.ledger.postgres:  # a network round trip: in a worker thread
            p = await run_in_threadpool(curator.authenticate, key)
        else:  # a read of the embedded ledger (microseconds): on the loop, as queries do
            p = curator.authenticate(key)
        request.state.principal = p.id
        return p

    def admin(p: Principal) -> None:
        if p.role != "admin":
            raise ForbiddenError("this needs the admin's key.")

    async def raw_body(request: Request) -> bytes:
        limit = config.max_body_bytes
        length = request.headers.get("content-length")
        # (a header of thousands of digits is refused before int(), which would raise on it)
        if length is not None and (not length.isdigit() or len(length) > 18 or int(length) > limit):
            raise BodyTooLarge(f"the request body is larger than {limit} bytes.")
        buf = bytearray()
        async for chunk in request.stream():
            buf += chunk
            if len(buf) > limit:
                raise BodyTooLarge(f"the request body is larger than {limit} bytes.")
        return bytes(buf)

    def parse(buf: bytes) -> Any:
        try:
            return parse_strict(buf)
        except (ValueError, RecursionError) as exc:
            raise DataError(
                "the request body is not valid JSON (NaN and Infinity are not allowed)."
            ) from exc

    async def body(request: Request) -> Any:
        return parse(await raw_body(request))

    query_schema = {
        "type": "object",
        "required": ["dataset", "query"],  # local_frequencies is free: it takes no epsilon
        "properties": {
            "dataset": {"type": "string"},
            "query": {"type": "string", "enum": curator.registry.names()},
            "epsilon": {"type": "number", "exclusiveMinimum": 0},
            "delta": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
            "column": {"type": "string"},
            "columns": {"type": "array", "items": {"type": "string"}},
            "bounds": {"type": "array"},
            "q": {"type": "array", "items": {"type": "number"}},
            "bins": {},
            "alpha": {"type": "number"},
            "by": {"type": "array", "items": {"type": "string"}},  # group_by (docs/server.md)
            "aggregations": {"type": "array", "items": {"type": "object"}},
            "keys": {},
            "max_rows": {"type": "integer"},
            "max_groups": {"type": "integer"},
            "max_rows_per_unit": {"type": "integer"},
            "rows": {"type": "integer"},  # synthesize
            "sql": {"type": "string"},  # sql (docs/sql.md)
            "method": {"type": "string"},
            "dry_run": {"type": "boolean"},
            "dummy": {"type": "boolean"},
            "idempotency_key": {"type": "string"},
        },
    }
    content = {"application/json": {"schema": query_schema}}
    json_body = {"requestBody": {"required": True, "content": content}}

    async def answer(request: Request, sql: bool) -> Any:
        key, idem = presented_key(request), request.headers.get("idempotency-key")
        too_large: BodyTooLarge | None = None
        try:
            buf = await raw_body(request)  # at most max_body_bytes, not parsed before the key
        except BodyTooLarge as exc:
            buf, too_large = b"", exc

        def checked() -> tuple[Principal, Any]:
            # A bad key is answered first, whatever the body.
            p = curator.authenticate(key)
            request.state.principal = p.id
            if too_large is not None:
                raise too_large
            b = parse(buf)
            if sql:  # POST /v1/sql: the query type is the path's
                if not isinstance(b, dict) or "query" in b:
                    raise DataError('POST /v1/sql takes {"dataset", "sql", ...} (no "query").')
                b = {**b, "query": "sql"}
            if isinstance(b, dict):
                request.state.dataset = b.get("dataset")  # made safe for the audit there
                request.state.query = b.get("query")
            return p, b

        def run() -> dict[str, Any]:
            # One trip to a worker thread for the key check and the query (each trip costs a
            # thread hand-off).
            return curator.query(*checked(), idem)

        if curator.ledger.postgres:  # reading the key is a network round trip: not on the loop
            out = await run_in_threadpool(run)
        else:
            p, b = checked()
            if curator.answers_inline(b):  # noise on a remembered aggregate: on the loop
                out = await curator.query_async(p, b, idem)
            else:
                out = await run_in_threadpool(curator.query, p, b, idem)
        request.state.outcome = "released" if "id" in out else "free"
        return json_response(out)  # plain JSON already: no second encoding pass

    @app.post("/v1/query", openapi_extra=json_body, summary="Run (or dry-run) a private query")
    async def query(request: Request) -> Any:
        return await answer(request, sql=False)

    sql_schema = {
        "type": "object",
        "required": ["dataset", "sql"],
        "properties": {k: v for k, v in query_schema["properties"].items()  # type: ignore[attr-defined]
                       if k in ("dataset", "sql", "epsilon", "delta", "alpha", "max_rows",
                                "max_groups", "max_rows_per_unit", "dry_run", "dummy",
                                "idempotency_key")},
    }  # fmt: skip
    sql_content = {"application/json": {"schema": sql_schema}}
    sql_body = {"requestBody": {"required": True, "content": sql_content}}

    @app.post("/v1/sql", openapi_extra=sql_body, summary="Run (or dry-run) a private SQL query")
    async def sql_query(request: Request) -> Any:
        return await answer(request, sql=True)

    @app.get("/v1/noop", summary="Authenticate and do nothing (the service's speed limit)")
    async def noop(request: Request) -> Any:
        await who(request)
        return json_response({"ok": True})

    @app.get("/v1/datasets", summary="Public schemas of the datasets and the query types")
    async def datasets(request: Request) -> Any:
        await who(request)
        await run_in_threadpool(curator.refresh)  # those registered through other workers too
        return {"datasets": [t.schema.to_dict() for t in list(curator.tables.values())],
                "queries": curator.registry.names()}  # fmt: skip

    @app.get("/v1/me", summary="Who you are and your budgets")
    async def me(request: Request) -> Any:
        p = await who(request)
        budgets = await run_in_threadpool(curator.ledger.budgets, p.id)
        return {"id": p.id, "name": p.name, "role": p.role, "budgets": budgets}

    @app.get("/v1/results", summary="Your past answers (the admin: everyone's)")
    async def results(request: Request, limit: int = 100) -> Any:
        p = await who(request)
        mine = None if p.role == "admin" else p.id
        rows = await run_in_threadpool(curator.ledger.charges, mine, max(1, min(limit, 1000)))
        return {"results": [result_json(c) for c in rows]}

    @app.get("/v1/results/{cid}", summary="One past answer, fetched again (no new charge)")
    async def result(request: Request, cid: str) -> Any:
        p = await who(request)
        return await run_in_threadpool(curator.result, p, cid)

    @app.post("/v1/admin/analysts", summary="Create an analyst (the key is shown once)")
    async def add_analyst(request: Request) -> Any:
        admin(await who(request))
        b = await body(request)
        if not isinstance(b, dict) or set(b) != {"name"}:
            raise DataError('send {"name": "..."}.')
        return await run_in_threadpool(curator.add_analyst, b["name"])

    @app.post("/v1/admin/analysts/{pid}/key", summary="Replace an analyst's key (shown once)")
    async def rotate_key(request: Request, pid: str) -> Any:
        admin(await who(request))
        out = await run_in_threadpool(curator.new_analyst_key, pid)
        # The old key's dashboard sessions and links ended with it (they are checked against
        # the principal's key); their rows are freed here.
        await run_in_threadpool(sessions.end, out["id"])
        return out

    @app.get("/v1/admin/analysts", summary="Every principal")
    async def analysts(request: Request) -> Any:
        admin(await who(request))
        return {"principals": await run_in_threadpool(curator.ledger.principals)}

    @app.post("/v1/admin/datasets", summary="Register a dataset from the import directory")
    async def add_dataset(request: Request) -> Any:
        admin(await who(request))
        return await run_in_threadpool(curator.register_dataset, await body(request))

    @app.get("/v1/admin/datasets", summary="Datasets with their total and spent budgets")
    async def admin_datasets(request: Request) -> Any:
        admin(await who(request))
        return {"datasets": await run_in_threadpool(curator.ledger.datasets)}

    @app.put("/v1/admin/budgets", summary="Set an analyst's budget on a dataset")
    async def set_budget(request: Request) -> Any:
        admin(await who(request))
        b = await body(request)
        if not isinstance(b, dict) or set(b) - {"analyst", "dataset", "epsilon", "delta"}:
            raise DataError('send {"analyst": id, "dataset": name, "epsilon": e, "delta": d}.')
        eps = real(b.get("epsilon"), "epsilon", low=0, high=1e6, high_open=True)
        dlt = real(b.get("delta", 0.0), "delta", low=0, high=1, high_open=True)
        await run_in_threadpool(
            curator.ledger.set_budget, str(b.get("analyst")), str(b.get("dataset")), eps, dlt
        )
        return {"ok": True}

    @app.get("/v1/admin/budgets", summary="Every budget")
    async def budgets(request: Request) -> Any:
        admin(await who(request))
        return {"budgets": await run_in_threadpool(curator.ledger.budgets)}

    @app.get("/v1/admin/ledger", summary="The latest charges")
    async def ledger(request: Request, limit: int = 100) -> Any:
        admin(await who(request))
        rows = await run_in_threadpool(curator.ledger.charges, None, max(1, min(limit, 10_000)))
        return {"charges": [result_json(c) for c in rows]}

    @app.get("/v1/admin/audit", summary="The audit log of requests and charges")
    async def audit(request: Request, principal: str | None = None, limit: int = 200) -> Any:
        admin(await who(request))
        if state["audit"] is not None:
            await run_in_threadpool(state["audit"].flush)
        rows = await run_in_threadpool(curator.ledger.audit, principal, max(1, min(limit, 10_000)))
        return {"audit": rows}

    @app.get("/v1/admin/audit/anonymous", summary="Counts of requests without a valid key")
    async def anonymous(request: Request, limit: int = 1440) -> Any:
        admin(await who(request))
        if state["audit"] is not None:
            await run_in_threadpool(state["audit"].flush)
        rows = await run_in_threadpool(request_counts, curator.ledger, max(1, min(limit, 100_000)))
        return {"counts": rows}

    @app.post("/v1/dashboard/token", summary="A one-time link that opens the dashboard")
    async def token(request: Request) -> Any:
        p = await who(request)
        t = await run_in_threadpool(sessions.new_link, p)
        return {"url": f"/dashboard/login?token={t}"}

    @app.get("/dashboard/login", include_in_schema=False)
    async def login(token: str = "") -> Any:
        sid = await run_in_threadpool(sessions.login, token) if token else None
        if sid is None:
            raise AuthError("this dashboard link is invalid or expired; ask for a new one.")
        resp = RedirectResponse("/dashboard", status_code=303, headers=_PAGE_HEADERS)
        resp.set_cookie("dpkit_session", sid, httponly=True, samesite="strict")
        return resp

    @app.get("/dashboard", include_in_schema=False)
    async def dashboard(request: Request) -> Any:
        p = await who(request, cookie=True)
        html = await run_in_threadpool(dashboard_page, curator, p)
        return HTMLResponse(html, headers=_PAGE_HEADERS)

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
