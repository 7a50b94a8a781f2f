"""Marginal tables of encoded records, and their measurement with exact discrete Gaussian noise.

A marginal on columns ``S`` counts the records in each cell of the product of their domains.
Under add/remove neighbours one record moves one cell by one, so the table has ℓ2 sensitivity 1
(√2 under replace-one); adding discrete Gaussian noise of scale σ to every cell is then
Δ²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020, Theorem 14), the measurement step of MST
(McKenna, Miklau & Sheldon 2021, §3) and AIM (McKenna et al., PVLDB 2022, Alg. 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError
from dpkit.noise import discrete_gaussian

__all__ = [
    "BYTES_PER_CELL",
    "Measurement",
    "check_cells",
    "marginal",
    "measure",
    "noisy_counts",
    "sub_marginal",
    "tvd",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

BYTES_PER_CELL = 64
"""Working memory per marginal cell while fitting (counts, noise, estimates, scratch copies)."""


def check_cells(cells: int, max_cells: int, what: str) -> None:
    """Refuse a table of more than ``max_cells`` cells, saying how much memory it would take.

    Called while planning, before anything is charged or drawn.
    """
    if cells > max_cells:
        gib = cells * BYTES_PER_CELL / 2**30
        raise DataError(
            f"{what} has {cells:,} cells (about {gib:,.1f} GiB to fit), above max_cells="
            f"{max_cells:,}; use fewer bins or categories, or raise max_cells."
        )


def marginal(codes: IntArray, shape: Sequence[int], cols: Sequence[int]) -> IntArray:
    """Exact counts of the records in each cell of the marginal on ``cols``.

    ``codes`` may also be a table encoded on Spark
    (:class:`~dpkit.release._spark_codes.SparkCodes`) or streamed from Parquet
    (:class:`~dpkit.release._scan_codes.ScanCodes`): counted where the data are."""
    if hasattr(codes, "marginal"):
        return codes.marginal(shape, cols)  # type: ignore[no-any-return]
    dims = tuple(int(shape[c]) for c in cols)
    size = math.prod(dims)
    if codes.shape[0] == 0:
        return np.zeros(dims, dtype=np.int64)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), dims)
    return np.bincount(flat, minlength=size).astype(np.int64).reshape(dims)


def sub_marginal(
    tables: Mapping[tuple[int, ...], IntArray], cols: Sequence[int]
) -> IntArray | None:
    """The marginal on ``cols`` (in that order) summed from a stored table on a superset of
    them (exact int64 sums), or None when none is stored."""
    want = tuple(int(c) for c in cols)
    for s, table in tables.items():
        if set(want) <= set(s):
            drop = tuple(i for i, c in enumerate(s) if c not in want)
            summed = table.sum(axis=drop) if drop else table
            kept = [c for c in s if c in want]
            out: IntArray = np.transpose(summed, [kept.index(c) for c in want])
            return np.ascontiguousarray(out, dtype=np.int64)
    return None


@dataclass(frozen=True)
class Measurement:
    """A noisy marginal: the columns, the noisy counts and the noise scale σ."""

    cols: tuple[int, ...]
    noisy: IntArray
    sigma: float


def measure(
    codes: IntArray, shape: Sequence[int], cols: Sequence[int], sigma: float,
    gen: np.random.Generator,
) -> Measurement:  # fmt: skip
    """The marginal on ``cols`` plus exact discrete Gaussian noise of scale ``sigma`` per cell.

    The caller has already charged Δ²/(2σ²) zCDP for it.
    """
    counts = marginal(codes, shape, cols)
    return Measurement(tuple(cols), noisy_counts(counts, sigma, gen), float(sigma))


def noisy_counts(counts: IntArray, sigma: float, gen: np.random.Generator) -> IntArray:
    """``counts`` plus independent exact discrete Gaussian noise of scale σ in every cell."""
    noise = np.asarray(discrete_gaussian(sigma, size=counts.size, rng=gen), dtype=np.int64)
    return np.asarray(counts + noise.reshape(counts.shape), dtype=np.int64)


def tvd(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """Total variation distance ½‖p/Σp − q/Σq‖₁ between two count or probability tables.

    An empty table (Σ = 0) counts as the uniform distribution.
    """
    a = np.asarray(p, dtype=np.float64).ravel()
    b = np.asarray(q, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise DataError("tables of different shapes cannot be compared.")
    sa, sb = a.sum(), b.sum()
    a = a / sa if sa > 0 else np.full_like(a, 1.0 / a.size)
    b = b / sb if sb > 0 else np.full_like(b, 1.0 / b.size)
    return float(0.5 * np.abs(a - b).sum())
