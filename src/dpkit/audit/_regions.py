"""Rejection regions: the events an auditor uses to tell ``D`` from ``D'``.

A region ``R`` is a set of outputs; the test "guess ``D'`` when the output is in ``R``" has false
positive rate ``p = P[M(D) ∈ R]`` and false negative rate ``q = P[M(D') ∉ R]`` (Kamath 2020,
"Differential Privacy", the hypothesis-testing view). Each region here is a frozen, picklable
description that can be applied to a batch of outputs, so a region chosen on one sample can be
evaluated on a fresh one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError

__all__ = [
    "Above",
    "Below",
    "Coordinate",
    "InBins",
    "InSet",
    "Interval",
    "LinearScore",
    "OffLattice",
    "OnLattice",
    "Predicate",
    "Region",
    "Residue",
    "RowsIn",
]

BoolArray = npt.NDArray[np.bool_]


@runtime_checkable
class Region(Protocol):
    """Anything that maps a batch of outputs (first axis = trials) to a boolean mask."""

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray: ...


def _scalars(outputs: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return outputs.reshape(outputs.shape[0], -1)[:, 0] if outputs.ndim > 1 else outputs


@dataclass(frozen=True)
class Above:
    """Outputs ``>= threshold`` (scalar outputs).

    >>> Above(1.0)(np.array([0.5, 1.0, 2.0]))
    array([False,  True,  True])
    """

    threshold: float

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        return np.asarray(_scalars(outputs) >= self.threshold, dtype=np.bool_)

    def __str__(self) -> str:
        return f"output >= {self.threshold:.6g}"


@dataclass(frozen=True)
class Below:
    """Outputs ``<= threshold`` (scalar outputs).

    >>> Below(1.0)(np.array([0.5, 1.0, 2.0]))
    array([ True,  True, False])
    """

    threshold: float

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        return np.asarray(_scalars(outputs) <= self.threshold, dtype=np.bool_)

    def __str__(self) -> str:
        return f"output <= {self.threshold:.6g}"


@dataclass(frozen=True)
class InSet:
    """Scalar outputs equal to one of ``values`` (discrete or categorical outputs).

    >>> InSet((0, 2))(np.array([0, 1, 2, 3]))
    array([ True, False,  True, False])
    """

    values: tuple[Any, ...]

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        return np.isin(_scalars(outputs), np.asarray(self.values, dtype=outputs.dtype))

    def __str__(self) -> str:
        shown = ", ".join(f"{v!r}" for v in self.values[:4])
        more = f", … ({len(self.values)} values)" if len(self.values) > 4 else ""
        return f"output in {{{shown}{more}}}"


@dataclass(frozen=True)
class RowsIn:
    """Vector outputs whose whole row equals one of ``rows``.

    >>> RowsIn(((1, 0),))(np.array([[1, 0], [0, 1]]))
    array([ True, False])
    """

    rows: tuple[tuple[Any, ...], ...]

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        flat = outputs.reshape(outputs.shape[0], -1)
        mask = np.zeros(flat.shape[0], dtype=np.bool_)
        for row in self.rows:
            mask |= np.all(flat == np.asarray(row, dtype=flat.dtype), axis=1)
        return mask

    def __str__(self) -> str:
        return f"output row in a set of {len(self.rows)} rows"


@dataclass(frozen=True)
class Coordinate:
    """Vector outputs whose coordinate ``index`` (of the flattened output) is in ``region``.

    >>> Coordinate(1, Above(0.5))(np.array([[0.0, 1.0], [1.0, 0.0]]))
    array([ True, False])
    """

    index: int
    region: Above | Below

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        return self.region(outputs.reshape(outputs.shape[0], -1)[:, self.index])

    def __str__(self) -> str:
        return str(self.region).replace("output", f"output[{self.index}]", 1)


def _on_lattice(values: npt.NDArray[Any], exponent: int) -> BoolArray:
    x = np.ldexp(np.asarray(values, dtype=np.float64), -exponent)
    with np.errstate(invalid="ignore"):
        return np.asarray(np.isfinite(x) & (np.floor(x) == x), dtype=np.bool_)


@dataclass(frozen=True)
class OnLattice:
    """Float outputs that are integer multiples of ``2**exponent``.

    Mironov (2012, "On significance of the least significant bits for differential privacy"):
    naive floating-point noise leaves a data-dependent pattern in the low-order bits; the set of
    floats reachable from one input is not the set reachable from its neighbour.

    >>> OnLattice(-1)(np.array([0.5, 0.25, 3.0]))
    array([ True, False,  True])
    """

    exponent: int

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        return _on_lattice(_scalars(outputs), self.exponent)

    def __str__(self) -> str:
        return f"output is a multiple of 2^{self.exponent}"


@dataclass(frozen=True)
class OffLattice:
    """Float outputs that are *not* integer multiples of ``2**exponent`` (see :class:`OnLattice`).

    >>> OffLattice(-1)(np.array([0.5, 0.25]))
    array([False,  True])
    """

    exponent: int

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        return ~_on_lattice(_scalars(outputs), self.exponent)

    def __str__(self) -> str:
        return f"output is not a multiple of 2^{self.exponent}"


@dataclass(frozen=True)
class LinearScore:
    """Vector outputs whose standardised linear score ``((x − center)/scale)·w`` is on one side
    of ``threshold`` (``side="above"``: ``>=``; ``"below"``: ``<=``).

    >>> r = LinearScore(weights=(1.0, -1.0), center=(0.0, 0.0), scale=(1.0, 1.0), threshold=0.0)
    >>> r(np.array([[2.0, 1.0], [0.0, 3.0]]))
    array([ True, False])
    """

    weights: tuple[float, ...]
    center: tuple[float, ...]
    scale: tuple[float, ...]
    threshold: float
    side: Literal["above", "below"] = "above"

    def score(self, outputs: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        """The classifier score of each output row."""
        flat = np.asarray(outputs, dtype=np.float64).reshape(outputs.shape[0], -1)
        z = (flat - np.asarray(self.center)) / np.asarray(self.scale)
        return np.asarray(z @ np.asarray(self.weights), dtype=np.float64)

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        s = self.score(outputs)
        return s >= self.threshold if self.side == "above" else s <= self.threshold

    def __str__(self) -> str:
        op = ">=" if self.side == "above" else "<="
        return f"linear score {op} {self.threshold:.6g} ({len(self.weights)} features)"


@dataclass(frozen=True)
class Predicate:
    """A region given by a function of the whole batch, e.g. one found by a stronger attack.

    >>> r = Predicate(lambda y: y[:, 0] == 1, name="record 0 published")
    >>> r(np.array([[1, -1], [-1, -1]]))
    array([ True, False])
    >>> str(r)
    'record 0 published'
    """

    function: Callable[[npt.NDArray[Any]], npt.ArrayLike] = field(compare=False)
    name: str = "custom region"

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        mask = np.asarray(self.function(outputs), dtype=np.bool_)
        if mask.shape != (outputs.shape[0],):
            raise DataError(
                f"a region must return one boolean per trial (shape ({outputs.shape[0]},)), "
                f"got shape {mask.shape}."
            )
        return mask

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Interval:
    """Scalar outputs in the closed interval ``[low, high]`` (``inside=False``: outside it).

    A bounded interval catches a mechanism that never (or rarely) outputs values in some window
    on one input — a hole in the middle of the distribution, invisible to one-sided thresholds.

    >>> Interval(0.8, 1.2)(np.array([0.5, 1.0, 1.2, 2.0]))
    array([False,  True,  True, False])
    >>> Interval(0.8, 1.2, inside=False)(np.array([0.5, 1.0]))
    array([ True, False])
    """

    low: float
    high: float
    inside: bool = True

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        x = _scalars(outputs)
        mask = np.asarray((x >= self.low) & (x <= self.high), dtype=np.bool_)
        return mask if self.inside else ~mask

    def __str__(self) -> str:
        op = "in" if self.inside else "not in"
        return f"output {op} [{self.low:.6g}, {self.high:.6g}]"


@dataclass(frozen=True)
class InBins:
    """Scalar outputs falling in one of the chosen ``bins`` of a histogram with ``edges``.

    Bin ``i`` is ``[edges[i], edges[i+1])``; values below ``edges[0]`` or at/above ``edges[-1]``
    are in no bin. With bins ranked by their estimated likelihood ratio this approximates the
    Neyman–Pearson test for a continuous output (the most powerful test at each level).

    >>> InBins(edges=(0.0, 1.0, 2.0, 3.0), bins=(0, 2))(np.array([0.5, 1.5, 2.5, 3.0]))
    array([ True, False,  True, False])
    """

    edges: tuple[float, ...]
    bins: tuple[int, ...]

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        x = np.asarray(_scalars(outputs), dtype=np.float64)
        idx = np.searchsorted(np.asarray(self.edges), x, side="right") - 1
        chosen = np.zeros(len(self.edges), dtype=np.bool_)
        chosen[list(self.bins)] = True
        ok = (idx >= 0) & (idx < len(self.edges) - 1)
        return np.asarray(ok & chosen[np.clip(idx, 0, len(self.edges) - 1)], dtype=np.bool_)

    def __str__(self) -> str:
        return f"output in {len(self.bins)} of {len(self.edges) - 1} likelihood-ranked bins"


@dataclass(frozen=True)
class Residue:
    """Integer-valued outputs whose remainder modulo ``modulus`` is one of ``residues``.

    Catches a leak in the low-order structure of integer outputs (e.g. an output's parity that
    depends on the input), the integer counterpart of :class:`OnLattice`. Non-integral or
    non-finite outputs are in no residue class.

    >>> Residue(2, (1,))(np.array([3, 4, -1, 2.5]))
    array([ True, False,  True, False])
    """

    modulus: int
    residues: tuple[int, ...]

    def __call__(self, outputs: npt.NDArray[Any], /) -> BoolArray:
        return _residue_mask(_scalars(outputs), self.modulus, self.residues)

    def __str__(self) -> str:
        shown = ", ".join(str(r) for r in self.residues[:4])
        more = ", …" if len(self.residues) > 4 else ""
        return f"output mod {self.modulus} in {{{shown}{more}}}"


def residues_of(values: npt.NDArray[Any], modulus: int) -> npt.NDArray[np.int64]:
    """``values mod modulus`` for integral values, ``-1`` for the rest (floats, NaN, inf)."""
    x = np.asarray(values)
    if x.dtype.kind in "iub":
        return np.asarray(np.mod(x.astype(np.int64), modulus), dtype=np.int64)
    f = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        integral = np.isfinite(f) & (np.floor(f) == f) & (np.abs(f) < 2.0**62)
    out = np.full(f.shape, -1, dtype=np.int64)
    out[integral] = np.mod(f[integral].astype(np.int64), modulus)
    return out


def _residue_mask(values: npt.NDArray[Any], modulus: int, residues: tuple[int, ...]) -> BoolArray:
    r = residues_of(values, modulus)
    return np.asarray(np.isin(r, np.asarray(residues, dtype=np.int64)), dtype=np.bool_)
