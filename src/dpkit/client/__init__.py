"""The Python client of the dpkit curator service (:mod:`dpkit.server`).

>>> from dpkit.client import Curator, RemoteRelease
>>> RemoteRelease(3.0, (2.0, 4.0), 0.05, 0.5, 0.0, "mean").ci()
(2.0, 4.0)

Needs only httpx: ``pip install 'dpkit[client]'`` (an analyst's machine needs no server packages).
"""

from __future__ import annotations

from dpkit.client._curator import Curator, Quote, RemoteRelease
from dpkit.client._errors import (
    AuthenticationError,
    CuratorError,
    NotFoundError,
    PermissionDeniedError,
)
from dpkit.client._results import RemoteFrequencies, RemoteTable

__all__ = [
    "AuthenticationError",
    "Curator",
    "CuratorError",
    "NotFoundError",
    "PermissionDeniedError",
    "Quote",
    "RemoteFrequencies",
    "RemoteRelease",
    "RemoteTable",
]
