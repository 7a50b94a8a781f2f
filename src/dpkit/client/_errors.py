"""Errors the client raises for the service's refusals (each also a :class:`DPKitError`)."""

from __future__ import annotations

from dpkit.errors import DPKitError

__all__ = ["AuthenticationError", "CuratorError", "NotFoundError", "PermissionDeniedError"]


class CuratorError(DPKitError):
    """The service refused or failed a request; ``status`` is the HTTP status."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AuthenticationError(CuratorError):
    """No key or a wrong key (HTTP 401)."""


class PermissionDeniedError(CuratorError):
    """The key may not do this, or has no budget on the dataset (HTTP 403)."""


class NotFoundError(CuratorError):
    """No such dataset or result for this key (HTTP 404)."""
