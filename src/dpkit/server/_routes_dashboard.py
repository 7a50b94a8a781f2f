"""The dashboard's routes: a one-time login link (asked for with a key), the session cookie it
opens, and the page itself."""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time.

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from dpkit.server._dashboard import dashboard_page
from dpkit.server._http import Http
from dpkit.server._outcomes import AuthError

__all__ = ["PAGE_HEADERS", "dashboard_router"]

# The dashboard shows private answers: not kept in caches, not framed by other sites, no script
# or outside resource at all (the page needs only inline styles and SVG), and the one-time login
# link not sent on as a Referer.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}


def dashboard_router(h: Http) -> APIRouter:
    """``/v1/dashboard/token``, ``/dashboard/login`` and ``/dashboard``."""
    curator, sessions, who = h.curator, h.sessions, h.who
    router = APIRouter()

    @router.post("/v1/dashboard/token", summary="A one-time link that opens the dashboard")
    async def token(request: Request) -> Any:
        p = await who(request)
        t = await run_in_threadpool(sessions.new_link, p)
        return {"url": f"/dashboard/login?token={t}"}

    @router.get("/dashboard/login", include_in_schema=False)
    async def login(token: str = "") -> Any:
        sid = await run_in_threadpool(sessions.login, token) if token else None
        if sid is None:
            raise AuthError("this dashboard link is invalid or expired; ask for a new one.")
        resp = RedirectResponse("/dashboard", status_code=303, headers=PAGE_HEADERS)
        resp.set_cookie("dpkit_session", sid, httponly=True, samesite="strict")
        return resp

    @router.get("/dashboard", include_in_schema=False)
    async def dashboard(request: Request) -> Any:
        p = await who(request, cookie=True)
        html = await run_in_threadpool(dashboard_page, curator, p)
        return HTMLResponse(html, headers=PAGE_HEADERS)

    return router
