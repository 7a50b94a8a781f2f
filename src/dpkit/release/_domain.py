"""Public domains of table columns: what a synthesiser may know without looking at the data.

A synthetic table is built from counts over *cells*. The cells of each column must be fixed
before the data are read (Wasserman & Zhou 2010: the histogram's bins are chosen in advance; a bin
edge read from the data is a leak, smartnoise-sdk#473). A :class:`Numeric` column is cut into bins
on public bounds, with public *atoms* (values such as 0 that many records share exactly) kept
as cells of their own; a :class:`Categorical` column lists its categories. Where these are not
known, :func:`dpkit.release.discover_domain` estimates them privately and charges for it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._missing import MISSING_DEFAULT, Missing, check_missing, missing_error, object_to_float
from dpkit.errors import DataError
from dpkit.stats._data import object_records

__all__ = [
    "DROPPED",
    "MISSING",
    "Categorical",
    "Column",
    "Domain",
    "Numeric",
    "as_floats",
    "table_columns",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

DROPPED = -1
"""The code :meth:`Categorical.encode` gives a value outside its list when it has no ``other``:
:meth:`Domain.encode` drops the records holding one."""

MISSING = -2
"""The code a column's ``encode`` gives a missing value (NaN, None, a non-number in a numeric
column), which no cell can hold: :meth:`Domain.encode` refuses or drops its record, by the
caller's ``missing=`` policy (:mod:`dpkit._missing`)."""

DEFAULT_BINS = 16
"""Bins of a numeric column when none are given: 16 keeps 3-way marginals near 4,000 cells."""


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DataError(f"{name} must be a real number, got {type(value).__name__}.")
    x = float(value)
    if not math.isfinite(x):
        raise DataError(f"{name} must be finite.")
    return x


def as_floats(values: object, name: str) -> FloatArray:
    """A numeric column's values as float64, each value that is not a number made NaN.

    Element by element for untyped values (an object column, or a list whose one string made
    numpy type it as text): refusing the column because of one value would make the outcome
    depend on that record. NaN marks a missing value; ±inf stays (the bounds clamp it).
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "US" and not isinstance(values, np.ndarray):
        arr = np.asarray(values, dtype=object)  # a list typed by its values: read each
    if arr.dtype == object or arr.dtype.kind in "US":
        return object_to_float(np.asarray(arr, dtype=object))
    if arr.dtype.kind not in "biuf":  # a declared non-numeric type (dates, ...): the schema
        raise DataError(f"column {name!r} must be numeric.")
    return arr.astype(np.float64)


@dataclass(frozen=True)
class Numeric:
    """A numeric column on public bounds ``[lo, hi]``, cut into bins, with optional atoms.

    Parameters
    ----------
    lo, hi : float
        Public bounds; values outside are clamped to them (see ``Notes``).
    bins : int
        Number of equal-width bins (default 16). Ignored when ``edges`` is given.
    integer : bool
        Whether the column holds integers; synthetic values are then integers, and an integer
        range no wider than ``bins`` gets one cell per value.
    atoms : sequence of float
        Public values held exactly by many records (e.g. 0 hours, 0 income). Each is a cell of
        its own, so a point mass survives synthesis instead of being smeared over a bin (the
        defect of the Wasserman & Zhou 2010 histogram on a column with 24% zeros).
    edges : sequence of float, optional
        Explicit bin edges from ``lo`` to ``hi`` (e.g. private quantiles from
        :func:`~dpkit.release.discover_domain`).

    Notes
    -----
    Out-of-range values (±inf included) are clamped to ``[lo, hi]``, as every dpkit statistic
    clamps; how many were clamped is not reported (that count is itself private). NaN, None and
    non-numbers have no place in the column: they are *missing*, and the caller's ``missing=``
    policy refuses them before anything is charged (such a refusal reveals that the data hold
    one) or drops their records.

    Examples
    --------
    >>> from dpkit.release import Numeric
    >>> Numeric(0, 100, bins=4, atoms=[0]).cells
    5
    >>> Numeric(1, 5, integer=True).cells
    5
    """

    lo: float
    hi: float
    bins: int = DEFAULT_BINS
    integer: bool = False
    atoms: tuple[float, ...] = ()
    edges: tuple[float, ...] | None = None
    _edges: FloatArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        lo, hi = _finite(self.lo, "lo"), _finite(self.hi, "hi")
        if not lo < hi:
            raise DataError(f"a numeric column needs lo < hi, got lo={lo!r}, hi={hi!r}.")
        if not isinstance(self.integer, bool):
            raise DataError("integer must be True or False.")
        if self.integer:
            lo, hi = float(math.ceil(lo)), float(math.floor(hi))
            if not lo < hi:
                raise DataError("an integer column needs at least two integers in [lo, hi].")
        atoms = tuple(sorted({_finite(a, "atom") for a in self.atoms}))
        if any(not lo <= a <= hi for a in atoms):
            raise DataError("every atom must lie within [lo, hi].")
        if self.edges is not None:
            e = np.array([_finite(v, "edge") for v in self.edges], dtype=np.float64)
            if e.size < 2 or e[0] != lo or e[-1] != hi or np.any(np.diff(e) <= 0):
                raise DataError("edges must increase strictly from lo to hi.")
        else:
            k = self.bins
            if isinstance(k, bool) or not isinstance(k, numbers.Integral) or int(k) < 1:
                raise DataError(f"bins must be a positive integer, got {k!r}.")
            if self.integer and hi - lo + 1 <= int(k):
                e = np.arange(lo, hi + 2.0) - 0.5  # one cell per integer
                e[0], e[-1] = lo, hi
            elif self.integer:
                width = math.ceil((hi - lo + 1) / int(k))
                e = np.append(np.arange(lo, hi + 1, width), hi + 1.0) - 0.5
                e[0], e[-1] = lo, hi
            else:
                e = np.linspace(lo, hi, int(k) + 1)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "atoms", atoms)
        object.__setattr__(self, "_edges", e)
        object.__setattr__(self, "bins", int(e.size - 1))

    @property
    def cells(self) -> int:
        """Atoms plus bins."""
        return len(self.atoms) + self.bins

    @property
    def bin_edges(self) -> FloatArray:
        """The bin edges, ``lo`` to ``hi`` (a copy)."""
        return self._edges.copy()

    def encode(self, values: object, name: str) -> IntArray:
        """Cell index of each value (atoms first, then bins); clamps to [lo, hi] (±inf too).

        A missing value (NaN, None, a non-number) gets :data:`MISSING`.
        """
        x = as_floats(values, name)
        if x.ndim != 1:
            raise DataError(f"column {name!r} must be 1-d.")
        nan = np.isnan(x)
        # a per-record map onto [lo, hi] (±inf included): neighbours stay neighbours
        x = np.clip(np.where(nan, self.lo, x), self.lo, self.hi)
        if self.integer:
            x = np.round(x)
        out = np.searchsorted(self._edges, x, side="right") - 1
        out = np.clip(out, 0, self.bins - 1) + len(self.atoms)
        for i, a in enumerate(self.atoms):
            out[x == a] = i
        out[nan] = MISSING
        return out.astype(np.int64)

    def decode(self, cells: IntArray, gen: np.random.Generator) -> FloatArray:
        """Synthetic values: an atom's value, or a uniform draw within the bin."""
        k = len(self.atoms)
        out = np.empty(cells.size, dtype=np.float64)
        is_atom = cells < k
        out[is_atom] = np.asarray(self.atoms, dtype=np.float64)[cells[is_atom]]
        b = cells[~is_atom] - k
        left, right = self._edges[b], self._edges[b + 1]
        if self.integer:
            first = np.ceil(left)
            last = np.where(b == self.bins - 1, np.floor(right), np.ceil(right) - 1)
            last = np.maximum(first, last)
            out[~is_atom] = first + np.floor(gen.random(b.size) * (last - first + 1))
        else:
            out[~is_atom] = left + gen.random(b.size) * (right - left)
        return out

    def spec(self) -> dict[str, Any]:
        """A JSON-ready description (see :meth:`Domain.from_spec`)."""
        return {
            "type": "numeric",
            "lo": self.lo,
            "hi": self.hi,
            "integer": self.integer,
            "atoms": list(self.atoms),
            "edges": self._edges.tolist(),
        }


@dataclass(frozen=True)
class Categorical:
    """A categorical column with its public list of categories.

    A value that is not one of the categories (including a value that cannot be one, such as a
    list) goes to ``other`` when it names one of the categories as a catch-all; without
    ``other``, the record holding it is dropped (:meth:`Domain.encode`). Neither is ever
    refused: whether a release succeeds must not depend on one record's value, or the refusal
    would reveal that a record with an unlisted category exists, at no privacy cost.

    Dropping a record is a per-record filter: under add/remove neighbours a neighbour of the
    data stays a neighbour (or becomes the same data), and under replace-one the encoded data
    differ by at most one removed record, which moves every marginal count by at most the
    replace-one sensitivity. The released counts never say how many records were dropped.
    Missing values (None, NaN) have no place in any list (no category can be None): the
    caller's ``missing=`` policy refuses them before anything is charged (such a refusal
    reveals that the data hold one) or drops their records.

    Examples
    --------
    >>> from dpkit.release import Categorical
    >>> Categorical(["a", "b", "c"]).cells
    3
    >>> Categorical(["a", "other"], other="other").encode(["a", "zzz"], "c").tolist()
    [0, 1]
    >>> Categorical(["a", "b"]).encode(["a", "zzz"], "c").tolist()   # -1: the record is dropped
    [0, -1]
    """

    categories: tuple[Any, ...]
    other: Any = None

    def __post_init__(self) -> None:
        if isinstance(self.categories, str | bytes) or not isinstance(self.categories, Iterable):
            raise DataError("categories must be a list of values.")
        cats = tuple(self.categories)
        if not cats:
            raise DataError("a categorical column needs at least one category.")
        if any(c is None or (isinstance(c, float) and math.isnan(c)) for c in cats):
            raise DataError("categories cannot include None or NaN.")
        try:
            distinct = len(set(cats)) == len(cats)
        except TypeError:  # a list or dict among the categories
            raise DataError("categories must be hashable values (str, int, ...).") from None
        if not distinct:
            raise DataError("categories must be distinct.")
        if self.other is not None and self.other not in cats:
            raise DataError("other must be one of the categories.")
        object.__setattr__(self, "categories", cats)

    @property
    def cells(self) -> int:
        """Number of categories."""
        return len(self.categories)

    def encode(self, values: object, name: str) -> IntArray:
        """Index of each value's category: ``other``'s for values outside the list, else
        :data:`DROPPED` (-1, the record is dropped); :data:`MISSING` for None and NaN."""
        arr = np.asarray(values, dtype=object)
        if arr.ndim != 1:
            raise DataError(f"column {name!r} must be 1-d.")
        index = {c: i for i, c in enumerate(self.categories)}
        fallback = DROPPED if self.other is None else index[self.other]
        out = np.empty(arr.size, dtype=np.int64)
        for j, v in enumerate(arr.tolist()):
            if v is None or (isinstance(v, float) and math.isnan(v)):
                out[j] = MISSING
                continue
            try:
                i = index.get(v)
            except TypeError:  # an unhashable value (a list, a dict): not a category
                i = None
            out[j] = fallback if i is None else i
        return out

    def decode(self, cells: IntArray, gen: np.random.Generator) -> npt.NDArray[Any]:
        """The category of each cell."""
        del gen
        return np.asarray(self.categories, dtype=object)[cells]

    def spec(self) -> dict[str, Any]:
        """A JSON-ready description."""
        out: dict[str, Any] = {"type": "categorical", "categories": list(self.categories)}
        if self.other is not None:
            out["other"] = self.other
        return out


Column = Numeric | Categorical


@dataclass(frozen=True)
class Domain:
    """The public domain of a table: an ordered mapping from column name to its description.

    Examples
    --------
    >>> from dpkit.release import Categorical, Domain, Numeric
    >>> dom = Domain({"age": Numeric(18, 90, bins=8), "sex": Categorical(["f", "m"])})
    >>> dom.names, dom.shape
    (('age', 'sex'), (8, 2))
    """

    columns: Mapping[str, Column]

    def __post_init__(self) -> None:
        if not isinstance(self.columns, Mapping) or not self.columns:
            raise DataError("a Domain needs a non-empty mapping from column name to column.")
        for k, v in self.columns.items():
            if not isinstance(k, str):
                raise DataError("column names must be strings.")
            if not isinstance(v, Numeric | Categorical):
                raise DataError(f"column {k!r} must be a Numeric or a Categorical.")
        object.__setattr__(self, "columns", dict(self.columns))

    @property
    def names(self) -> tuple[str, ...]:
        """Column names, in order."""
        return tuple(self.columns)

    @property
    def shape(self) -> tuple[int, ...]:
        """Cells per column."""
        return tuple(c.cells for c in self.columns.values())

    def encode(self, data: object, missing: Missing = MISSING_DEFAULT) -> IntArray:
        """The (records × columns) matrix of cell indices of a table (see :func:`table_columns`).

        Numeric values are clamped to their bounds (±inf too); a record with a category outside
        a column's list is mapped to the column's ``other`` or, without one, dropped. A record
        with a missing value (None, NaN, a non-number in a numeric column) is refused
        (``missing="raise"``, the default) or dropped (``missing="drop"``); dropping, like an
        unlisted category, is a per-record filter (see :class:`Categorical`).
        """
        by_column = self.encode_columns(data, missing)
        if not by_column:
            return np.zeros((0, len(self.names)), dtype=np.int64)
        out: IntArray = np.stack(by_column, axis=1)
        return out

    def encode_columns(self, data: object, missing: Missing = MISSING_DEFAULT) -> list[IntArray]:
        """:meth:`encode`'s cell indices, one array per column (the records kept, in order)."""
        policy = check_missing(missing)
        cols = table_columns(data, self.names)
        if not cols:
            return []
        sizes = {v.shape[0] for v in cols.values()}
        if len(sizes) != 1:
            raise DataError("every column must have the same number of records.")
        codes = [self.columns[k].encode(cols[k], k) for k in self.names]
        # Every column is encoded before any record is refused or dropped, so which error is
        # raised does not depend on the order of the checks.
        if policy == "raise" and any(bool(np.any(c == MISSING)) for c in codes):
            raise missing_error("the table")
        keep = np.ones(sizes.pop(), dtype=bool)
        for c in codes:
            keep &= c >= 0  # neither DROPPED nor MISSING
        return codes if bool(keep.all()) else [c[keep] for c in codes]

    def spec(self) -> dict[str, Any]:
        """A JSON-ready description, read back by :meth:`from_spec`."""
        return {k: c.spec() for k, c in self.columns.items()}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Mapping[str, Any]]) -> Domain:
        """Build a domain from a JSON-style mapping (as written by :meth:`spec`).

        Numeric columns: ``{"type": "numeric", "lo": 0, "hi": 1, "bins": 8, "integer": false,
        "atoms": [0], "edges": [...]}``; categorical: ``{"type": "categorical", "categories":
        [...]}``.

        Examples
        --------
        >>> Domain.from_spec({"x": {"type": "numeric", "lo": 0, "hi": 10, "bins": 2}}).shape
        (2,)
        """
        if not isinstance(spec, Mapping):
            raise DataError("a domain spec must be a mapping from column name to description.")
        cols: dict[str, Column] = {}
        for name, s in spec.items():
            if not isinstance(s, Mapping) or s.get("type") not in ("numeric", "categorical"):
                raise DataError(f"column {name!r}: type must be 'numeric' or 'categorical'.")
            if s["type"] == "categorical":
                cols[name] = Categorical(tuple(s.get("categories", ())), other=s.get("other"))
                continue
            unknown = set(s) - {"type", "lo", "hi", "bins", "integer", "atoms", "edges"}
            if unknown:
                raise DataError(f"column {name!r}: unknown keys {sorted(unknown)}.")
            edges = s.get("edges")
            cols[name] = Numeric(
                s.get("lo"),  # type: ignore[arg-type]
                s.get("hi"),  # type: ignore[arg-type]
                bins=s.get("bins", DEFAULT_BINS),
                integer=bool(s.get("integer", False)),
                atoms=tuple(s.get("atoms", ())),
                edges=None if edges is None else tuple(edges),
            )
        return cls(cols)


def table_columns(
    data: object, names: Sequence[str], *, allow_extra: bool = False
) -> dict[str, npt.NDArray[Any]]:
    """The named columns of a pandas/Polars DataFrame, a mapping, or a 2-d array (by position).

    Missing columns are refused, and so are columns not named (unless ``allow_extra``); a 2-d
    array must have one column per name.
    """
    if isinstance(data, np.ndarray) and data.dtype.names is None:
        if data.ndim != 2 or data.shape[1] != len(names):
            raise DataError(
                f"a NumPy table must be 2-d with {len(names)} columns (the domain's order)."
            )
        return {k: data[:, i] for i, k in enumerate(names)}
    cols = getattr(data, "columns", None)
    if isinstance(data, np.ndarray):
        cols = data.dtype.names
    elif isinstance(data, Mapping):
        cols = list(data.keys())
    if cols is None:
        raise DataError(
            "data must be a pandas or Polars DataFrame, a mapping of column name to values, "
            f"or a 2-d NumPy array; got {type(data).__name__}."
        )
    have = [str(c) for c in cols]
    missing = [k for k in names if k not in have]
    if missing:
        raise DataError(f"the data lack the domain's columns {missing}.")
    extra = [c for c in have if c not in names]
    if extra and not allow_extra:
        raise DataError(f"the data have columns {extra} that the domain does not describe.")
    out: dict[str, npt.NDArray[Any]] = {}
    for k in names:
        col = data[k]  # type: ignore[index]
        to_numpy = getattr(col, "to_numpy", None)
        try:
            arr = np.asarray(to_numpy() if callable(to_numpy) else col)
        except ValueError:  # ragged nested values
            arr = object_records(col, f"column {k!r} must be 1-d.")
        if arr.dtype.kind in "US" and not isinstance(col, np.ndarray):
            # a list typed by its values (one string makes NaN the text "nan"): keep each value
            arr = np.asarray(col, dtype=object)
        if arr.dtype.kind == "f" and _integer_typed(col) and bool(np.any(np.abs(arr) >= 2**53)):
            # floats hold every integer below 2**53 exactly (each value then reads the same
            # either way: only the speed differs); beyond, each value is kept as it is
            arr = _exact_integers(col)
        elif arr.dtype == object and type(col).__module__.startswith("pandas"):
            # pandas' own missing markers (pd.NA of a "string" or "boolean" column, NaT) are
            # None here: a missing value, not a category outside the list
            arr = np.asarray(col.to_numpy(dtype=object, na_value=None), dtype=object)
        if arr.ndim != 1 and not isinstance(col, np.ndarray):
            # a list whose values are themselves lists: one value per record, whatever they
            # hold (the domain then maps or drops them); refusing here would depend on a value
            arr = object_records(col, f"column {k!r} must be 1-d.")
        if arr.ndim != 1:
            raise DataError(f"column {k!r} must be 1-d.")
        out[k] = arr
    return out


def _integer_typed(col: object) -> bool:
    """Whether a Polars or pandas column is declared integer (NumPy's cannot hold nulls)."""
    if isinstance(col, np.ndarray):
        return False
    dtype = getattr(col, "dtype", None)
    is_integer = getattr(dtype, "is_integer", None)
    if callable(is_integer):  # Polars
        return bool(is_integer())
    return getattr(dtype, "kind", None) in ("i", "u")  # pandas' Int64 and friends


def _exact_integers(col: Any) -> npt.NDArray[Any]:
    """An integer column with nulls, each value kept exactly (None for a null).

    Polars and pandas hand such a column over as floats, where 2**53 + 1 reads as 2**53: a
    category would then depend on whether ANOTHER record is missing (one record's presence
    would move every such record to another cell), and a batch of a streamed table without a
    missing value would encode them unlike the whole table."""
    if type(col).__module__.startswith("polars"):
        return np.asarray(col.to_list(), dtype=object)
    out: npt.NDArray[Any] = np.asarray(col.to_numpy(dtype=object, na_value=None), dtype=object)
    return out
