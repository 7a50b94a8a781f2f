"""The admin's routes: analysts and their keys, datasets, budgets, the ledger and the audit log.

Every route answers 403 to any key but the admin's."""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time.

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from dpkit.errors import DataError
from dpkit.server._audit_limits import request_counts
from dpkit.server._http import Http
from dpkit.server._numbers import real
from dpkit.server._outcomes import result_json

__all__ = ["admin_router"]


def admin_router(h: Http) -> APIRouter:
    """The routes under ``/v1/admin``."""
    curator, sessions = h.curator, h.sessions
    admin, who, body = h.admin, h.who, h.body
    router = APIRouter()

    @router.post("/v1/admin/analysts", summary="Create an analyst (the key is shown once)")
    async def add_analyst(request: Request) -> Any:
        admin(await who(request))
        b = await body(request)
        if not isinstance(b, dict) or set(b) != {"name"}:
            raise DataError('send {"name": "..."}.')
        return await run_in_threadpool(curator.add_analyst, b["name"])

    @router.post("/v1/admin/analysts/{pid}/key", summary="Replace an analyst's key (shown once)")
    async def rotate_key(request: Request, pid: str) -> Any:
        admin(await who(request))
        out = await run_in_threadpool(curator.new_analyst_key, pid)
        # The old key's dashboard sessions and links ended with it (they are checked against
        # the principal's key); their rows are freed here.
        await run_in_threadpool(sessions.end, out["id"])
        return out

    @router.get("/v1/admin/analysts", summary="Every principal")
    async def analysts(request: Request) -> Any:
        admin(await who(request))
        return {"principals": await run_in_threadpool(curator.ledger.principals)}

    @router.post("/v1/admin/datasets", summary="Register a dataset from the import directory")
    async def add_dataset(request: Request) -> Any:
        admin(await who(request))
        return await run_in_threadpool(curator.register_dataset, await body(request))

    @router.get("/v1/admin/datasets", summary="Datasets with their total and spent budgets")
    async def admin_datasets(request: Request) -> Any:
        admin(await who(request))
        return {"datasets": await run_in_threadpool(curator.ledger.datasets)}

    @router.put("/v1/admin/budgets", summary="Set an analyst's budget on a dataset")
    async def set_budget(request: Request) -> Any:
        admin(await who(request))
        b = await body(request)
        if not isinstance(b, dict) or set(b) - {"analyst", "dataset", "epsilon", "delta", "rho"}:
            raise DataError(
                'send {"analyst": id, "dataset": name, "epsilon": e, "delta": d} or, for a '
                'budget in zCDP, {"analyst": id, "dataset": name, "rho": r}.'
            )
        rho = None
        if "rho" in b:  # a budget in zCDP: its ρ's add up exactly (dpkit.server._rho)
            if "epsilon" in b or "delta" in b:
                raise DataError("a budget is in (epsilon, delta) or in rho, not both.")
            rho = real(b.get("rho"), "rho", low=0, high=1e6, high_open=True)
            eps = dlt = 0.0
        else:
            eps = real(b.get("epsilon"), "epsilon", low=0, high=1e6, high_open=True)
            dlt = real(b.get("delta", 0.0), "delta", low=0, high=1, high_open=True)
        await run_in_threadpool(
            lambda: curator.ledger.set_budget(
                str(b.get("analyst")), str(b.get("dataset")), eps, dlt, rho=rho
            )
        )
        return {"ok": True}

    @router.get("/v1/admin/budgets", summary="Every budget")
    async def budgets(request: Request) -> Any:
        admin(await who(request))
        return {"budgets": await run_in_threadpool(curator.ledger.budgets)}

    @router.get("/v1/admin/ledger", summary="The latest charges")
    async def ledger(request: Request, limit: int = 100) -> Any:
        admin(await who(request))
        rows = await run_in_threadpool(curator.ledger.charges, None, max(1, min(limit, 10_000)))
        return {"charges": [result_json(c) for c in rows]}

    @router.get("/v1/admin/audit", summary="The audit log of requests and charges")
    async def audit(request: Request, principal: str | None = None, limit: int = 200) -> Any:
        admin(await who(request))
        if h.audit is not None:
            await run_in_threadpool(h.audit.flush)
        rows = await run_in_threadpool(curator.ledger.audit, principal, max(1, min(limit, 10_000)))
        return {"audit": rows}

    @router.get("/v1/admin/audit/anonymous", summary="Counts of requests without a valid key")
    async def anonymous(request: Request, limit: int = 1440) -> Any:
        admin(await who(request))
        if h.audit is not None:
            await run_in_threadpool(h.audit.flush)
        rows = await run_in_threadpool(request_counts, curator.ledger, max(1, min(limit, 100_000)))
        return {"counts": rows}

    return router
