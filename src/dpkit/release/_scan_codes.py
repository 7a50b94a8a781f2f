"""The synthesizer's encoded table streamed from Parquet: every marginal it needs in one pass.

:meth:`Synthesizer.fit <dpkit.release.Synthesizer.fit>` reads the data only through exact
marginal counts of the encoded table. A table larger than memory (a Parquet file, a directory or
glob of them, or a Polars ``LazyFrame``) is therefore never held whole: it is read in batches of
rows, each batch encoded by :meth:`Domain.encode <dpkit.release.Domain.encode>` (the very code
of the in-memory path) and added, cell by cell, to the counts of every marginal the fit may ask
for (``np.bincount`` on each marginal's combined cell index). Memory is one batch plus the count
tables, whatever the number of rows; counts are exact int64 sums, so the fit, its noise and its
synthetic data are those of the in-memory path for the same data and seed.

Which marginals a fit may ask for is public (the method, the estimator, the workload and
``max_cells``); only the largest are kept (a subset's counts are sums of a superset's). A
marginal outside them is counted by another pass, the same way.
"""

from __future__ import annotations

import importlib
import itertools
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._missing import Missing, check_missing
from dpkit.errors import DataError
from dpkit.release._domain import Domain
from dpkit.release._marginals import sub_marginal

__all__ = ["BATCH_ROWS", "ScanCodes", "is_scan", "needed_marginals", "prefetched", "scan_codes"]

IntArray = npt.NDArray[np.int64]
Cols = tuple[int, ...]

BATCH_ROWS = 1 << 20
"""Rows read and encoded at a time: about 8 bytes × columns × 3 of working memory per row."""

PREFETCH_CELLS = 1 << 25
"""Largest total of count cells kept from the first pass (256 MiB of int64); the rest of the
marginals a fit may need are counted by a pass of their own when asked for."""


def is_scan(data: object) -> bool:
    """Whether ``data`` is read by streaming: a Parquet path (``str`` or ``os.PathLike``) or a
    Polars ``LazyFrame`` (by type name: Polars is not imported for other inputs)."""
    if isinstance(data, str | os.PathLike):
        return True
    cls = type(data)
    return cls.__name__ == "LazyFrame" and cls.__module__.startswith("polars")


def needed_marginals(
    method: str, estimator: str, shape: Sequence[int], workload: Iterable[Cols], max_cells: int
) -> list[Cols]:
    """The largest marginals a fit may read, from public parameters only.

    ``"independent"``: the one-way marginals; ``"mst"``: every pair; AIM with the closed form:
    every triple (a column and at most two parents); AIM with the joint fit: the workload's
    sets. Sets larger than ``max_cells`` are never measured and are left out (their subsets are
    kept); a set inside another is left out too (it is summed from it).
    """
    d = len(shape)
    size = {
        "independent": 1,
        "mst": 2,
        "aim": 3 if estimator == "closed" else 0,
    }[method]
    sets: set[Cols] = {(c,) for c in range(d)}
    for k in range(2, min(size, d) + 1):  # a set too large for max_cells leaves its subsets
        sets.update(itertools.combinations(range(d), k))
    if not size:
        for s in workload:
            sets.update(sub for k in range(1, len(s) + 1) for sub in itertools.combinations(s, k))
    fits = {tuple(sorted(s)) for s in sets if math.prod(int(shape[c]) for c in s) <= max_cells}
    fits.update((c,) for c in range(d))  # one-way tables are always measured
    # every subset of a set that fits is in ``fits`` too (the sets are closed under subsets and
    # so is the cell bound): a set is inside another iff it grows by one column into one, a
    # check linear in the sets (comparing every pair took minutes for AIM on 40 columns)
    maximal = [
        s for s in fits if not any(tuple(sorted((*s, c))) in fits for c in range(d) if c not in s)
    ]
    return sorted(maximal, key=lambda s: (len(s), s))


def prefetched(sets: Sequence[Cols], shape: Sequence[int]) -> list[Cols]:
    """The sets counted by the first pass: every one-way set, then the others in order while
    their cells total at most :data:`PREFETCH_CELLS` (public: the shape and the sets)."""
    kept: list[Cols] = []
    cells = 0
    for s in sets:
        size = math.prod(int(shape[c]) for c in s)
        if len(s) == 1 or cells + size <= PREFETCH_CELLS:
            kept.append(s)
            cells += size
    return kept


def _failure(exc: BaseException) -> DataError:
    return DataError(
        f"reading the table failed ({type(exc).__name__}); the reader's own message is not "
        "repeated (it may quote data)."
    )


class ScanCodes:
    """Exact marginal counts of a streamed table, filled by one pass over its batches."""

    def __init__(self, frame: Any, domain: Domain, missing: Missing, sets: Sequence[Cols]) -> None:
        self._frame = frame
        self._domain = domain
        self._missing: Missing = missing
        self.shape = (-1, len(domain.names))  # the number of records is private
        self._tables: dict[Cols, IntArray] = {}
        self._tables = self._count(prefetched(sets, domain.shape))

    def _batches(self) -> Iterator[list[IntArray]]:
        try:
            for batch in self._frame.collect_batches(chunk_size=BATCH_ROWS, maintain_order=False):
                yield self._domain.encode_columns(batch, self._missing)
        except DataError:
            raise
        except Exception as exc:
            raise _failure(exc) from None

    def _count(self, sets: Sequence[Cols]) -> dict[Cols, IntArray]:
        shape = self._domain.shape
        dims = {s: tuple(int(shape[c]) for c in s) for s in sets}
        flat = {s: np.zeros(math.prod(dims[s]), dtype=np.int64) for s in sets}
        for by_col in self._batches():
            if not by_col or by_col[0].size == 0:
                continue
            for s in sets:
                idx = by_col[s[0]].copy()
                for c in s[1:]:  # row-major cell index, as np.ravel_multi_index
                    idx *= shape[c]
                    idx += by_col[c]
                flat[s] += np.bincount(idx, minlength=flat[s].size)
        return {s: flat[s].reshape(dims[s]) for s in sets}

    def marginal(self, shape: Sequence[int], cols: Sequence[int]) -> IntArray:
        """Exact counts per cell of the marginal on ``cols`` (in that order)."""
        got = sub_marginal(self._tables, cols)
        if got is not None:
            return got
        key = tuple(sorted(int(c) for c in cols))
        self._tables.update(self._count([key]))
        return self.marginal(shape, cols)  # shape: the domain's, fixed at encoding

    def release(self) -> None:
        """Drop the count tables."""
        self._tables = {}


def scan_codes(domain: Domain, data: object, missing: Missing, sets: Sequence[Cols]) -> ScanCodes:
    """Read ``data`` (a Parquet path or a LazyFrame) once, validating every record by the
    missing-value policy and counting the marginals ``sets``; before anything is charged."""
    check_missing(missing)
    try:
        pl = importlib.import_module("polars")
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("reading Parquet needs polars: pip install 'dpkit[frame]'") from None
    try:
        frame: Any = pl.scan_parquet(data) if isinstance(data, str | os.PathLike) else data
        # the schema first (the domain's columns, no others), from no rows
        empty = frame.head(0).collect()
    except Exception as exc:
        raise _failure(exc) from None
    domain.encode(empty, missing)
    return ScanCodes(frame.select(list(domain.names)), domain, missing, sets)
