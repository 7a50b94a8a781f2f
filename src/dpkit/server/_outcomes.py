"""What the curator tells a caller: its refusals (one exception per HTTP status) and the JSON of
a charge (request, cost, status and, once released, the answer)."""

from __future__ import annotations

from typing import Any

from dpkit.errors import DPKitError
from dpkit.server._ledger import Charge

__all__ = [
    "AuthError",
    "ForbiddenError",
    "NotFoundError",
    "QueryFailedError",
    "released",
    "result_json",
]


class AuthError(DPKitError):
    """No key, or a key that matches no one (HTTP 401)."""


class ForbiddenError(DPKitError):
    """The caller may not do this (HTTP 403)."""


class NotFoundError(DPKitError):
    """No such dataset or result, for this caller (HTTP 404)."""


class QueryFailedError(DPKitError):
    """The computation failed after the charge (HTTP 500); the message says if it was refunded."""


def result_json(charge: Charge) -> dict[str, Any]:
    """What an analyst is shown of a charge: request, cost, status and (if released) answer."""
    out: dict[str, Any] = {
        "id": charge.id,
        "dataset": charge.dataset,
        "query": charge.request.get("query"),
        "request": charge.request,
        "epsilon": charge.epsilon,
        "delta": charge.delta,
        "rho": charge.rho,  # paid by budgets in rho (None: a delta > 0 price, which they refuse)
        "status": charge.status,
        "created": charge.created,
        "replayed": charge.replayed,
    }
    if charge.result is not None:
        out.update(charge.result)
    return out


def released(charge: Charge, result: dict[str, Any]) -> dict[str, Any]:
    """A charge's JSON with its computed ``result`` and status ``released``."""
    out = result_json(charge)
    out.update(result, status="released")
    return out
