"""Shared helpers for the statistics tests."""

from __future__ import annotations

from typing import Any

import pytest


class Recorder:
    """A duck-typed accountant that records every charge (to check nothing was charged)."""

    def __init__(self) -> None:
        self.ledger: list[tuple[Any, str | None]] = []

    def charge(self, event: Any, *, label: str | None = None) -> None:
        self.ledger.append((event, label))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
