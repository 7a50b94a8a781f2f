"""What every route of the service shares: who is calling, the body read within its limit, the
one JSON encoder, and the JSON body of an error.

One :class:`Http` per application holds the curator, the dashboard sessions and the audit
writer; the routers of :mod:`._routes_queries`, :mod:`._routes_admin` and
:mod:`._routes_dashboard` are made from it.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time.

from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from dpkit.errors import BudgetExceededError, DataError
from dpkit.server._audit import AuditWriter
from dpkit.server._auth import Principal
from dpkit.server._config import ServerConfig
from dpkit.server._json import compact, parse_strict
from dpkit.server._outcomes import ForbiddenError, QueryFailedError
from dpkit.server._service import Curator
from dpkit.server._sessions import SessionStore
from dpkit.server._status import STATUS, BodyTooLarge

__all__ = ["Http"]


class Http:
    """The service's state as the routes see it, and the helpers they share."""

    def __init__(self, config: ServerConfig, curator: Curator) -> None:
        self.config = config
        self.curator = curator
        # in the ledger: every worker process sees them, and a new key ends them (:mod:`._sessions`)
        self.sessions = SessionStore(curator.ledger)
        self.audit: AuditWriter | None = None  # made when the service starts (lifespan)

    async def ledger_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.curator.ledger.postgres:  # a network round trip: in a worker thread
            return await run_in_threadpool(fn, *args)
        return fn(*args)  # a read or write of the embedded ledger: on the loop, as queries do

    @staticmethod
    def json_response(content: Any, status_code: int = 200) -> Response:
        # JSONResponse's bytes and headers, from the service's one compact encoder
        body = compact(content).encode("utf-8")
        return Response(body, status_code=status_code, media_type="application/json")

    def error(self, exc: BaseException, request: Request) -> Response:
        code = next((c for t, c in STATUS if isinstance(exc, t)), 500)
        if code == 500 and not isinstance(exc, QueryFailedError):
            msg, name = "internal error; nothing was released.", "InternalError"
        else:
            msg, name = str(exc), type(exc).__name__
        request.state.outcome = f"{name}"
        body: dict[str, Any] = {"error": {"type": name, "message": msg}}
        if isinstance(exc, BudgetExceededError) and isinstance(exc.remaining, tuple):
            body["error"]["remaining"] = {"epsilon": exc.remaining[0], "delta": exc.remaining[1]}
        elif isinstance(exc, BudgetExceededError) and isinstance(exc.remaining, dict):
            body["error"]["remaining"] = dict(exc.remaining)  # a budget in rho: {"rho": ...}
        return self.json_response(body, status_code=code)

    @staticmethod
    def presented_key(request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        return key or request.headers.get("x-api-key")

    async def who(self, request: Request, cookie: bool = False) -> Principal:
        key = self.presented_key(request)
        if key is None and cookie:
            sid = request.cookies.get("dpkit_session", "")
            sess: Principal | None = await self.ledger_call(self.sessions.principal, sid)
            if sess is not None:
                request.state.principal = sess.id
                return sess
        if self.curator.ledger.postgres:  # a network round trip: in a worker thread
            p = await run_in_threadpool(self.curator.authenticate, key)
        else:  # a read of the embedded ledger (microseconds): on the loop, as queries do
            p = self.curator.authenticate(key)
        request.state.principal = p.id
        return p

    @staticmethod
    def admin(p: Principal) -> None:
        if p.role != "admin":
            raise ForbiddenError("this needs the admin's key.")

    async def raw_body(self, request: Request) -> bytes:
        limit = self.config.max_body_bytes
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

    @staticmethod
    def parse(buf: bytes) -> Any:
        try:
            return parse_strict(buf)
        except (ValueError, RecursionError) as exc:
            raise DataError(
                "the request body is not valid JSON (NaN and Infinity are not allowed)."
            ) from exc

    async def body(self, request: Request) -> Any:
        return self.parse(await self.raw_body(request))
