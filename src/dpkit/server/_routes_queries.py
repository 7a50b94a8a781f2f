"""The analysts' routes: queries (JSON and SQL), the datasets' public schemas, one's budgets and
past answers."""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time.

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from dpkit.errors import DataError
from dpkit.server._auth import Principal
from dpkit.server._http import Http
from dpkit.server._outcomes import result_json
from dpkit.server._status import BodyTooLarge

__all__ = ["queries_router"]


def queries_router(h: Http) -> APIRouter:
    """``/v1/query``, ``/v1/sql``, ``/v1/noop``, ``/v1/datasets``, ``/v1/me``, ``/v1/results``."""
    curator = h.curator
    presented_key, raw_body, parse, who = h.presented_key, h.raw_body, h.parse, h.who
    json_response = h.json_response
    router = APIRouter()

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

    @router.post("/v1/query", openapi_extra=json_body, summary="Run (or dry-run) a private query")
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

    @router.post("/v1/sql", openapi_extra=sql_body, summary="Run (or dry-run) a private SQL query")
    async def sql_query(request: Request) -> Any:
        return await answer(request, sql=True)

    @router.get("/v1/noop", summary="Authenticate and do nothing (the service's speed limit)")
    async def noop(request: Request) -> Any:
        await who(request)
        return json_response({"ok": True})

    @router.get("/v1/datasets", summary="Public schemas of the datasets and the query types")
    async def datasets(request: Request) -> Any:
        await who(request)
        await run_in_threadpool(curator.refresh)  # those registered through other workers too
        return {"datasets": [t.schema.to_dict() for t in list(curator.tables.values())],
                "queries": curator.registry.names()}  # fmt: skip

    @router.get("/v1/me", summary="Who you are and your budgets")
    async def me(request: Request) -> Any:
        p = await who(request)
        budgets = await run_in_threadpool(curator.ledger.budgets, p.id)
        return {"id": p.id, "name": p.name, "role": p.role, "budgets": budgets}

    @router.get("/v1/results", summary="Your past answers (the admin: everyone's)")
    async def results(request: Request, limit: int = 100) -> Any:
        p = await who(request)
        mine = None if p.role == "admin" else p.id
        rows = await run_in_threadpool(curator.ledger.charges, mine, max(1, min(limit, 1000)))
        return {"results": [result_json(c) for c in rows]}

    @router.get("/v1/results/{cid}", summary="One past answer, fetched again (no new charge)")
    async def result(request: Request, cid: str) -> Any:
        p = await who(request)
        return await run_in_threadpool(curator.result, p, cid)

    return router
