"""Junction trees and exact inference for discrete graphical models over table columns.

A model whose log-density is a sum of potentials on column sets ("cliques") is a Markov random
field; its marginals are computed exactly by belief propagation on a junction tree: the cliques'
graph is triangulated (greedy elimination, each step removing the column whose neighbourhood has
the fewest cells), its maximal cliques are joined by a maximum spanning tree on the sizes of their
intersections (which has the running-intersection property), and two passes of sum-product
messages (Koller & Friedman 2009, "Probabilistic Graphical Models", ch. 10) give every clique's
marginal. Potentials and messages are kept in log space. Everything here is arithmetic on public
shapes and on estimates from noisy measurements: it never sees records.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "Factor",
    "JunctionTree",
    "graph_cells",
    "junction_tree",
    "model_cells",
    "model_graph",
]

FloatArray = npt.NDArray[np.float64]
Cols = tuple[int, ...]
_Axes = tuple[tuple[int, ...], tuple[int, ...]]

PROB_SPACE_RANGE = 700.0
"""Largest summed potential range that belief propagation runs in probability space."""


@dataclass(frozen=True)
class Factor:
    """A table over sorted columns ``cols``: one axis per column, in that order."""

    cols: Cols
    values: FloatArray

    def expand(self, cols: Cols) -> FloatArray:
        """The values broadcastable over the (sorted, superset) ``cols``."""
        shape = [self.values.shape[self.cols.index(c)] if c in self.cols else 1 for c in cols]
        return self.values.reshape(shape)

    def sum_to(self, keep: Iterable[int]) -> Factor:
        """Sum out every column not in ``keep``."""
        ks = set(keep)
        kept = tuple(c for c in self.cols if c in ks)
        axes = tuple(i for i, c in enumerate(self.cols) if c not in ks)
        return Factor(kept, np.asarray(self.values.sum(axis=axes), dtype=np.float64))

    def logsumexp_to(self, keep: Iterable[int]) -> Factor:
        """Log of the sum of ``exp(values)`` over every column not in ``keep``."""
        ks = set(keep)
        kept = tuple(c for c in self.cols if c in ks)
        axes = tuple(i for i, c in enumerate(self.cols) if c not in ks)
        if not axes:
            return self
        top = self.values.max(axis=axes, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        out = np.log(np.exp(self.values - top).sum(axis=axes)) + top.reshape(
            [s for i, s in enumerate(self.values.shape) if i not in axes]
        )
        return Factor(kept, np.asarray(out, dtype=np.float64))

    def __mul__(self, other: Factor) -> Factor:
        cols = tuple(sorted(set(self.cols) | set(other.cols)))
        return Factor(cols, np.asarray(self.expand(cols) * other.expand(cols), dtype=np.float64))


def _cells(shape: Sequence[int], cols: Iterable[int]) -> int:
    return math.prod(int(shape[c]) for c in cols)


def _maximal_cliques(shape: Sequence[int], sets: Sequence[Cols]) -> list[Cols]:
    """Maximal cliques of the triangulated graph of ``sets`` (every column a node)."""
    nbrs: dict[int, set[int]] = {c: set() for c in range(len(shape))}
    for s in sets:
        for a, b in itertools.combinations(s, 2):
            nbrs[a].add(b)
            nbrs[b].add(a)
    cliques: list[set[int]] = []
    left = set(nbrs)
    while left:
        # min-weight elimination: the column whose clique with its neighbours is smallest
        v = min(sorted(left), key=lambda c: _cells(shape, nbrs[c] | {c}))
        clique = nbrs[v] | {v}
        cliques.append(clique)
        for a, b in itertools.combinations(nbrs[v], 2):
            nbrs[a].add(b)
            nbrs[b].add(a)
        for a in nbrs[v]:
            nbrs[a].discard(v)
        left.discard(v)
        del nbrs[v]
    maximal = [c for c in cliques if not any(c < o for o in cliques)]
    out: list[Cols] = []
    for c in maximal:
        t = tuple(sorted(c))
        if t not in out:
            out.append(t)
    return out


def model_cells(shape: Sequence[int], sets: Sequence[Cols]) -> int:
    """Cells of the junction tree of ``sets``: the model's size (AIM's JT-SIZE, in cells)."""
    return graph_cells(tuple(int(k) for k in shape), model_graph(sets))


def model_graph(sets: Iterable[Cols]) -> frozenset[tuple[int, int]]:
    """The edges (column pairs) that ``sets`` draw: all a model's size depends on."""
    return frozenset(p for s in sets for p in itertools.combinations(sorted(s), 2))


def graph_cells(shape: tuple[int, ...], edges: frozenset[tuple[int, int]]) -> int:
    """:func:`model_cells` of the sets drawing ``edges``."""
    return _model_cells(shape, edges)


@functools.lru_cache(maxsize=4096)
def _model_cells(shape: tuple[int, ...], edges: frozenset[tuple[int, int]]) -> int:
    # The junction tree depends on the sets only through the graph they draw: AIM asks about
    # the same graphs round after round.
    return sum(_cells(shape, c) for c in _maximal_cliques(shape, list(edges)))


@dataclass(frozen=True)
class JunctionTree:
    """Cliques and the tree joining them, rooted at clique 0.

    ``order`` lists (child, parent) edges from the leaves up: the upward pass runs it forward,
    the downward pass backward.

    Examples
    --------
    >>> jt = junction_tree((2, 3, 4), [(0, 1), (1, 2)])
    >>> sorted(jt.cliques)
    [(0, 1), (1, 2)]
    """

    shape: tuple[int, ...]
    cliques: tuple[Cols, ...]
    order: tuple[tuple[int, int], ...]

    @property
    def cells(self) -> int:
        return sum(_cells(self.shape, c) for c in self.cliques)

    def home(self, cols: Iterable[int]) -> int:
        """Index of the smallest clique holding every column of ``cols``."""
        s = set(cols)
        fits = [i for i, c in enumerate(self.cliques) if s <= set(c)]
        return min(fits, key=lambda i: _cells(self.shape, self.cliques[i]))

    def separator(self, a: int, b: int) -> Cols:
        return tuple(sorted(set(self.cliques[a]) & set(self.cliques[b])))

    @functools.cached_property
    def _schedule(self) -> list[tuple[tuple[int, int], _Axes, _Axes]]:
        return [
            (
                (c, p),
                self._axes(self.cliques[c], self.cliques[p]),
                self._axes(self.cliques[p], self.cliques[c]),
            )
            for c, p in self.order
        ]

    def _axes(self, src: Cols, dst: Cols) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Axes of ``src`` to sum out to reach ``src ∩ dst``, and the shape that broadcasts
        the result over ``dst``."""
        axes = tuple(i for i, c in enumerate(src) if c not in dst)
        shape = tuple(self.shape[c] if c in src else 1 for c in dst)
        return axes, shape

    def calibrate_log(self, potentials: Sequence[FloatArray]) -> tuple[list[FloatArray], float]:
        """Every clique's log-belief (unnormalised) and the log of the partition function."""
        up = [np.asarray(p, dtype=np.float64) for p in potentials]
        msg: dict[tuple[int, int], FloatArray] = {}
        for (child, parent), (axes, shape), _ in self._schedule:  # leaves first
            msg[(child, parent)] = _lse(up[child], axes).reshape(shape)
            up[parent] = up[parent] + msg[(child, parent)]
        full = list(up)
        for (child, parent), _, (axes, shape) in reversed(self._schedule):  # root first
            out = _lse(full[parent] - msg[(child, parent)], axes).reshape(shape)
            full[child] = up[child] + out
        log_z = float(_lse(full[0], tuple(range(full[0].ndim))).ravel()[0])
        return full, log_z

    def calibrate_prob(self, potentials: Sequence[FloatArray]) -> list[FloatArray] | None:
        """Every clique's marginal (summing to one) of exp(Σ potentials), or ``None`` when the
        potentials span too wide a range for probability space.

        The same two passes as :meth:`calibrate_log` on exponentiated potentials: one
        exponential per clique instead of two log-sum-exps per edge. When the cliques' ranges
        (max − min of each potential) sum to at most ``PROB_SPACE_RANGE``, every product of one
        cell per clique lies within a factor e^-700 of the largest; as each message is scaled
        to a maximum of one, no table entry underflows or overflows (e^±700 is inside float64's
        e^±709), and the result equals log space's to rounding. Otherwise the caller works in
        log space.
        """
        lo = [float(p.min()) for p in potentials]
        hi = [float(p.max()) for p in potentials]
        if not sum(h - low for h, low in zip(hi, lo, strict=True)) <= PROB_SPACE_RANGE:
            return None  # also NaN
        up = [np.exp(p - h) for p, h in zip(potentials, hi, strict=True)]
        msg: dict[tuple[int, int], FloatArray] = {}
        for (child, parent), (axes, shape), _ in self._schedule:  # leaves first
            m = up[child].sum(axis=axes).reshape(shape) if axes else up[child].reshape(shape)
            msg[(child, parent)] = m = m / m.max()
            up[parent] = up[parent] * m
        full = list(up)
        for (child, parent), _, (axes, shape) in reversed(self._schedule):  # root first
            # the parent's belief without the child's own message, which is positive
            rest = full[parent] / msg[(child, parent)]
            down = rest.sum(axis=axes).reshape(shape) if axes else rest.reshape(shape)
            full[child] = up[child] * (down / down.max())
        return [b / b.sum() for b in full]

    def calibrate(self, potentials: Sequence[FloatArray], total: float) -> list[Factor]:
        """Every clique's marginal (summing to ``total``) of exp(Σ potentials)."""
        full, log_z = self.calibrate_log(potentials)
        return [
            Factor(c, np.asarray(np.exp(b - log_z) * total, dtype=np.float64))
            for c, b in zip(self.cliques, full, strict=True)
        ]


def _lse(values: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    if not axes:
        return values
    top = values.max(axis=axes, keepdims=True)
    out = np.log(np.exp(values - top).sum(axis=axes, keepdims=True)) + top
    return np.asarray(out, dtype=np.float64)


def junction_tree(shape: Sequence[int], sets: Sequence[Cols]) -> JunctionTree:
    """The junction tree of a model with potentials on ``sets`` (every column included)."""
    shape = tuple(int(s) for s in shape)
    cliques = _maximal_cliques(shape, sets)
    # Maximum spanning tree on separator sizes (Kruskal); empty separators join components.
    pairs = sorted(
        itertools.combinations(range(len(cliques)), 2),
        key=lambda ij: -len(set(cliques[ij[0]]) & set(cliques[ij[1]])),
    )
    comp = list(range(len(cliques)))

    def root(a: int) -> int:
        while comp[a] != a:
            a = comp[a]
        return a

    adj: dict[int, list[int]] = {i: [] for i in range(len(cliques))}
    for i, j in pairs:
        if root(i) != root(j):
            comp[root(j)] = root(i)
            adj[i].append(j)
            adj[j].append(i)
    # Breadth first from clique 0; reversed, that is a leaves-up schedule.
    seen, queue, down = {0}, [0], []
    while queue:
        a = queue.pop(0)
        for b in adj[a]:
            if b not in seen:
                seen.add(b)
                queue.append(b)
                down.append((b, a))
    return JunctionTree(shape, tuple(cliques), tuple(reversed(down)))
