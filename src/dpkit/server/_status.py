"""The HTTP status of each refusal the service answers with (fastapi-free, so it can be read and
tested without the server extra)."""

from __future__ import annotations

from dpkit.errors import BudgetExceededError, DataError, DPKitError, PrivacyParameterError
from dpkit.server._ledger import NoBudgetError
from dpkit.server._outcomes import AuthError, ForbiddenError, NotFoundError, QueryFailedError
from dpkit.server._pricing import PricingBusyError
from dpkit.server._recovery import AnswerLostError, InProgressError

__all__ = ["STATUS", "BodyTooLarge"]


class BodyTooLarge(DPKitError):
    """The request body is larger than ``max_body_bytes`` (HTTP 413)."""


STATUS: tuple[tuple[type[BaseException], int], ...] = (
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
"""The first class an error is an instance of gives its status; anything else is a 500."""
