"""Answers of the curator's table-shaped queries: group-by tables, synthetic rows, and frequency
estimates from local-model reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit.client._errors import CuratorError
from dpkit.errors import DataError

__all__ = ["RemoteFrequencies", "RemoteTable"]


@dataclass(frozen=True)
class RemoteTable:
    """Rows answered by the curator (``group_by``: one per key with estimates and intervals;
    ``synthesize``: synthetic records), their cost and ledger id.

    ``frame`` gives them as a Polars DataFrame, as :class:`dpkit.frame.FrameRelease` does.
    """

    rows: tuple[dict[str, Any], ...]
    columns: tuple[str, ...]
    alpha: float
    epsilon: float
    delta: float
    statistic: str
    id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def frame(self) -> Any:
        """The rows as a Polars DataFrame (columns in the service's order)."""
        try:
            import polars as pl
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("RemoteTable.frame needs polars: pip install 'dpkit[frame]'") from exc
        return pl.DataFrame({c: [r.get(c) for r in self.rows] for c in self.columns}, strict=False)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class RemoteFrequencies:
    """Estimated counts of each category from local-model reports (like
    :class:`dpkit.local.FrequencyEstimate`), with intervals at ``alpha``; free centrally.

    ``n`` is the number of valid reports, which the answer reveals exactly (the local model
    protects values, not participation).
    """

    counts: Any
    interval: tuple[Any, Any]
    alpha: float
    n: int
    labels: tuple[str, ...]
    protocol: str
    local_epsilon: float
    id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def frequencies(self) -> Any:
        """``counts / n``: the estimated share of each category."""
        if self.n == 0:
            raise CuratorError("there are no valid reports to estimate frequencies from.")
        return self.counts / self.n

    def ci(self, alpha: float | None = None) -> tuple[Any, Any]:
        """The ``1 − alpha`` intervals computed by the service (ask with ``alpha=``)."""
        if alpha is not None and abs(alpha - self.alpha) > 1e-12:
            raise DataError(
                f"the service computed the intervals at alpha={self.alpha:g}; send alpha= with "
                "the query for another level."
            )
        return self.interval


def _floats(v: Any) -> Any:
    return np.asarray([np.nan if t is None else t for t in v], dtype=np.float64)


def table(out: dict[str, Any]) -> RemoteTable:
    """A :class:`RemoteTable` from the service's JSON answer."""
    return RemoteTable(
        rows=tuple(out.get("value") or ()),
        columns=tuple(out.get("labels") or ()),
        alpha=float(out.get("alpha", 0.05)),
        epsilon=float(out.get("epsilon", 0.0)),
        delta=float(out.get("delta", 0.0)),
        statistic=str(out.get("query")),
        id=out.get("id"),
        raw=out,
    )


def frequencies(out: dict[str, Any]) -> RemoteFrequencies:
    """A :class:`RemoteFrequencies` from the service's JSON answer."""
    v = out.get("value") or {}
    ci: Any = out.get("ci") or ([], [])
    return RemoteFrequencies(
        counts=_floats(v.get("counts", [])),
        interval=(_floats(ci[0]), _floats(ci[1])),
        alpha=float(out.get("alpha", 0.05)),
        n=int(v.get("n", 0)),
        labels=tuple(out.get("labels") or ()),
        protocol=str(v.get("protocol")),
        local_epsilon=float(v.get("local_epsilon", 0.0)),
        id=out.get("id"),
        raw=out,
    )
