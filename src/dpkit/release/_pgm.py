"""One graphical model consistent with every noisy marginal at once (Private-PGM's estimator).

McKenna, Sheldon & Miklau (2019, "Graphical-model based estimation and inference for
differential privacy") estimate a table from noisy marginals y_i = M_i(D) + N(0, σ_i²) by the
distribution p̂ that minimises the weighted least-squares loss

    L(μ) = Σ_i ‖M_i(μ) − y_i‖² / (2σ_i²)

over the marginal polytope. The minimiser is a Markov random field whose potentials live on the
measured column sets, so the problem is solved in the potentials θ by mirror descent: θ ← θ −
α·∇_μ L(μ(θ)), with μ(θ) the model's marginals computed exactly by belief propagation on a
junction tree (:mod:`dpkit.release._junction`), and α set by Armijo backtracking. Every
measurement informs every overlapping one, which the closed form of
:mod:`dpkit.release._graphical` (each conditional read from its own table) cannot do.

Everything here reads only the noisy measurements, their σ and the public shape: it is
post-processing and changes no privacy guarantee.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.release._graphical import BayesNet, Family
from dpkit.release._junction import Factor, JunctionTree, junction_tree

__all__ = ["MarkovModel", "NoisyMarginal", "fit_markov", "potentials_from_net"]

FloatArray = npt.NDArray[np.float64]
Cols = tuple[int, ...]


@dataclass(frozen=True)
class NoisyMarginal:
    """A noisy marginal on sorted columns ``cols`` (axes in that order) and its noise σ."""

    cols: Cols
    values: FloatArray
    sigma: float

    @staticmethod
    def of(cols: Sequence[int], noisy: npt.ArrayLike, sigma: float) -> NoisyMarginal:
        """From a table whose axes follow ``cols`` in any order."""
        order = np.argsort(cols)
        vals = np.transpose(np.asarray(noisy, dtype=np.float64), order)
        return NoisyMarginal(tuple(int(cols[i]) for i in order), vals, float(sigma))


def _maximal(sets: Sequence[Cols]) -> list[Cols]:
    out: list[Cols] = []
    for s in sorted(set(sets), key=len, reverse=True):
        if not any(set(s) <= set(o) for o in out):
            out.append(s)
    return out


@dataclass(frozen=True)
class MarkovModel:
    """A fitted Markov random field: potentials on ``sets`` and its calibrated junction tree."""

    shape: tuple[int, ...]
    sets: tuple[Cols, ...]
    potentials: tuple[FloatArray, ...] = field(repr=False)
    total: float
    tree: JunctionTree = field(repr=False)
    marginals: tuple[Factor, ...] = field(repr=False)

    def project(self, cols: Sequence[int]) -> FloatArray:
        """The model's marginal (counts summing to ``total``) on ``cols``, axes in that order."""
        want = tuple(sorted(int(c) for c in cols))
        fits = [i for i, c in enumerate(self.tree.cliques) if set(want) <= set(c)]
        if fits:
            table = self.marginals[fits[0]].sum_to(want).values
        else:
            table = self._eliminate(want).values
        return np.asarray(np.transpose(table, [want.index(int(c)) for c in cols]), dtype=np.float64)

    @functools.cached_property
    def _conditionals(self) -> dict[int, Factor]:
        """The root clique's marginal and every other clique's conditional given its
        separator: the factorisation the marginal queries eliminate from."""
        tree = self.tree
        factors: dict[int, Factor] = {0: self.marginals[0]}
        for child, par in tree.order:
            sep = tree.separator(child, par)
            mu = self.marginals[child]
            den = mu.sum_to(sep).expand(mu.cols)
            cond = np.divide(mu.values, den, out=np.zeros_like(mu.values), where=den > 0)
            factors[child] = Factor(mu.cols, cond)
        return factors

    def _eliminate(self, want: Cols) -> Factor:
        """Marginal of columns spread over several cliques: the tree's factorisation root
        marginal × Π P(clique − separator | separator), summed by one ``einsum`` whose
        contraction order is worked out once per tree and column set."""
        keep, path = _elimination_plan(self.tree, want)
        factors = self._conditionals
        if isinstance(path, tuple):  # small: one broadcast product summed, no path search
            shapes, axes = path
            out = factors[keep[0]].values.reshape(shapes[0])
            for i, shp in zip(keep[1:], shapes[1:], strict=True):
                out = out * factors[i].values.reshape(shp)
            return Factor(want, np.asarray(out.sum(axis=axes), dtype=np.float64))
        ops: list[Any] = [x for i in keep for x in (factors[i].values, list(factors[i].cols))]
        out = np.einsum(*ops, list(want), optimize=path)
        return Factor(want, np.asarray(out, dtype=np.float64))

    def to_network(self) -> BayesNet:
        """The same distribution as a Bayesian network (for ancestral sampling): each clique's
        new columns given its separator, root first."""
        tree = self.tree
        fams: list[Family] = []
        placed: list[int] = []
        visit = [(0, ())] + [(c, tree.separator(c, p)) for c, p in reversed(tree.order)]
        for idx, sep in visit:
            mu = self.marginals[idx]
            for col in (c for c in mu.cols if c not in sep and c not in placed):
                parents = tuple(sorted(set(sep) | (set(mu.cols) & set(placed))))
                joint = mu.sum_to((*parents, col)).values  # sorted axes
                axes = (*parents, col)
                srt = sorted(axes)
                table = np.transpose(joint, [srt.index(a) for a in axes])
                rows = table.sum(axis=-1, keepdims=True)
                k = table.shape[-1]
                cond = np.divide(table, rows, out=np.full_like(table, 1.0 / k), where=rows > 0)
                fams.append(Family(col, parents, np.asarray(cond, dtype=np.float64)))
                placed.append(col)
        return BayesNet(self.shape, tuple(fams))


@functools.lru_cache(maxsize=8192)
def _elimination_plan(tree: JunctionTree, want: Cols) -> tuple[tuple[int, ...], Any]:
    """The cliques whose conditionals a marginal on ``want`` needs, and how to sum them:
    broadcast shapes and axes when their joint table is small, else einsum's path.

    A leaf whose own columns (those not in its separator) are all summed out is dropped (its
    conditional sums to one), repeatedly. AIM asks the same trees about the same marginals
    round after round, so the plan is cached; the path, by the cliques kept, also serves a
    grown tree whose growth the marginal does not reach."""
    parent, own = _tree_info(tree)
    wanted = set(want)
    children = [0] * len(tree.cliques)
    for c in parent:
        children[parent[c]] += 1
    kept = set(range(len(tree.cliques)))
    # leaves first: a clique whose children were all dropped becomes a leaf in turn
    leaves = [c for c in parent if children[c] == 0]
    while leaves:
        c = leaves.pop()
        if own[c] & wanted:
            continue
        kept.discard(c)
        p = parent[c]
        children[p] -= 1
        if children[p] == 0 and p in parent:
            leaves.append(p)
    keep = tuple(sorted(kept))
    return keep, _einsum_path(tree.shape, tuple(tree.cliques[i] for i in keep), want)


@functools.lru_cache(maxsize=256)
def _tree_info(tree: JunctionTree) -> tuple[dict[int, int], list[frozenset[int]]]:
    """Each non-root clique's parent, and each clique's own columns (not in its separator)."""
    parent = dict(tree.order)
    own = [
        frozenset(cl) - frozenset(tree.separator(i, parent[i])) if i in parent else frozenset(cl)
        for i, cl in enumerate(tree.cliques)
    ]
    return parent, own


DIRECT_CELLS = 50_000
"""Largest joint table of the cliques a marginal needs that is multiplied out in full: below
it one broadcast product beats einsum's overhead, above it einsum's pairwise order wins."""


@functools.lru_cache(maxsize=8192)
def _einsum_path(shape: tuple[int, ...], tables: tuple[Cols, ...], want: Cols) -> Any:
    union = sorted({c for cols in tables for c in cols})
    if math.prod(shape[c] for c in union) <= DIRECT_CELLS:
        shapes = tuple(tuple(shape[c] if c in cols else 1 for c in union) for cols in tables)
        return shapes, tuple(i for i, c in enumerate(union) if c not in want)
    ops: list[Any] = []
    for cols in tables:
        ops += [np.empty([shape[c] for c in cols]), list(cols)]
    return list(np.einsum_path(*ops, list(want), optimize="greedy")[0])


def potentials_from_net(net: BayesNet, sets: Sequence[Cols]) -> dict[Cols, FloatArray]:
    """Log-potentials on ``sets`` that reproduce a Bayesian network whose every family lies
    within one of them: the closed form's estimate, as a warm start for mirror descent."""
    pots = {s: np.zeros([net.shape[c] for c in s]) for s in sets}
    for fam in net.families:
        fcols = (*fam.parents, fam.child)
        home = min((s for s in sets if set(fcols) <= set(s)), key=len)
        logt = np.log(np.maximum(fam.table, 1e-300))
        f = NoisyMarginal.of(fcols, logt, 1.0)
        pots[home] = pots[home] + Factor(f.cols, f.values).expand(home)
    return pots


def _model(
    shape: tuple[int, ...], sets: list[Cols], pots: list[FloatArray], tree: JunctionTree,
    total: float,
) -> MarkovModel:  # fmt: skip
    clique_pots = [np.zeros([shape[c] for c in cl]) for cl in tree.cliques]
    for s, p in zip(sets, pots, strict=True):
        h = tree.home(s)
        clique_pots[h] = clique_pots[h] + Factor(s, p).expand(tree.cliques[h])
    margs = tree.calibrate(clique_pots, total)
    return MarkovModel(shape, tuple(sets), tuple(pots), total, tree, tuple(margs))


def _pooled(measurements: Sequence[NoisyMarginal]) -> list[NoisyMarginal]:
    """Measurements of the same columns merged into their inverse-variance mean, whose loss
    differs from theirs by a constant: the same minimiser, fewer terms."""
    groups: dict[Cols, list[NoisyMarginal]] = {}
    for m in measurements:
        groups.setdefault(m.cols, []).append(m)
    out = []
    for cols, ms in groups.items():
        w = [1.0 / m.sigma**2 for m in ms]
        y = sum(wi * m.values for wi, m in zip(w, ms, strict=True)) / sum(w)
        out.append(NoisyMarginal(cols, np.asarray(y, dtype=np.float64), 1.0 / math.sqrt(sum(w))))
    return out


STALL_STEPS = 10
"""Window of mirror-descent steps over which the loss's decrease is compared with the
tolerance."""


class _Loss:
    """The loss, its gradient by set and the clique marginals, with every axis and broadcast
    shape worked out once (mirror descent evaluates them hundreds of times)."""

    def __init__(
        self, shape: tuple[int, ...], sets: list[Cols], tree: JunctionTree,
        measurements: Sequence[NoisyMarginal], total: float,
    ) -> None:  # fmt: skip
        self.tree, self.total, self.sets = tree, total, sets
        self.set_home = [tree.home(s) for s in sets]
        homes = [tree.cliques[h] for h in self.set_home]
        self.set_shape = [tree._axes(s, c)[1] for s, c in zip(sets, homes, strict=True)]
        self.set_axes = [tree._axes(c, s)[0] for s, c in zip(sets, homes, strict=True)]
        self.clique_shape = [tuple(shape[c] for c in cl) for cl in tree.cliques]
        self.meas: list[tuple[int, tuple[int, ...], tuple[int, ...], FloatArray, float]] = []
        for m in _pooled(measurements):
            i = min(
                (k for k, s in enumerate(sets) if set(m.cols) <= set(s)),
                key=lambda k: len(sets[k]),
            )
            axes, bshape = tree._axes(sets[i], m.cols)[0], tree._axes(m.cols, sets[i])[1]
            self.meas.append((i, axes, bshape, m.values, 1.0 / m.sigma**2))

    def cliques(self, by_set: Sequence[FloatArray]) -> list[FloatArray]:
        """Tables by set summed into their cliques (broadcast): potentials or a gradient."""
        pots = [np.zeros(s) for s in self.clique_shape]
        for t, h, bs in zip(by_set, self.set_home, self.set_shape, strict=True):
            pots[h] = pots[h] + t.reshape(bs)
        return pots

    def __call__(self, pots: list[FloatArray]) -> tuple[float, list[FloatArray], list[FloatArray]]:
        """(loss, gradient by set, model marginal by set) at clique potentials ``pots``."""
        beliefs = self.tree.calibrate_prob(pots)
        if beliefs is not None:
            probs = {h: beliefs[h] * self.total for h in set(self.set_home)}
        else:  # a table under- or overflowed: log space, one exponential per clique
            full, log_z = self.tree.calibrate_log(pots)
            shift = log_z - math.log(self.total)
            probs = {h: np.exp(full[h] - shift) for h in set(self.set_home)}
        mus = [
            probs[h].sum(axis=ax) if ax else probs[h]
            for h, ax in zip(self.set_home, self.set_axes, strict=True)
        ]
        grads = [np.zeros_like(m) for m in mus]
        loss = 0.0
        for i, axes, bshape, y, w in self.meas:
            diff = mus[i].sum(axis=axes) - y if axes else mus[i] - y
            loss += 0.5 * w * float((diff * diff).sum())
            grads[i] = grads[i] + (w * diff).reshape(bshape)
        return loss, grads, mus


def fit_markov(
    shape: Sequence[int],
    measurements: Sequence[NoisyMarginal],
    total: float,
    *,
    warm: dict[Cols, FloatArray] | None = None,
    iterations: int = 200,
    tolerance: float = 0.0,
) -> MarkovModel:
    """The model minimising Σ ‖M_i(μ) − y_i‖²/(2σ_i²) by mirror descent (Armijo steps).

    Parameters
    ----------
    shape : sequence of int
        Cells of every column (public).
    measurements : sequence of NoisyMarginal
        The noisy marginals; each weighs 1/σ².
    total : float
        The (estimated) number of records: every model marginal sums to it.
    warm : dict, optional
        Starting log-potentials by column set (a set contained in a measured one is added into
        it), e.g. from :func:`potentials_from_net` or an earlier fit; zero elsewhere.
    iterations : int
        Most mirror-descent steps.
    tolerance : float
        Stop early once ``STALL_STEPS`` steps lowered the loss by less than this (0: never).

    Examples
    --------
    >>> import numpy as np
    >>> y = NoisyMarginal((0, 1), np.array([[40.0, 10.0], [10.0, 40.0]]), 1.0)
    >>> m = fit_markov((2, 2), [y], 100.0, iterations=300)
    >>> np.round(m.project((0, 1))).tolist()
    [[40.0, 10.0], [10.0, 40.0]]
    """
    shape = tuple(int(s) for s in shape)
    sets = _maximal([m.cols for m in measurements] + [(c,) for c in range(len(shape))])
    tree = junction_tree(shape, sets)
    pots = {s: np.zeros([shape[c] for c in s]) for s in sets}
    for s, p in (warm or {}).items():
        home = min((o for o in sets if set(s) <= set(o)), key=len)
        pots[home] = pots[home] + Factor(s, np.asarray(p, dtype=np.float64)).expand(home)
    theta = [pots[s] for s in sets]
    evaluate = _Loss(shape, sets, tree, measurements, total)
    clique_pots = evaluate.cliques(theta)
    loss, grads, mus = evaluate(clique_pots)
    step = evaluate.cliques(grads)  # the gradient in the cliques: θ − αg there is one update
    # A step of α changes a cell's mass μ by about α·μ·gradient; σ²/n̂ keeps the first step
    # inside the region where the quadratic model of the loss holds, and Armijo adapts it.
    alpha = min(m.sigma for m in measurements) ** 2 / max(total, 1.0)
    grow = True
    history = [loss]
    for _ in range(iterations):
        # α doubles after a step taken at once and stays after a backtrack: doubling every
        # time spends one rejected evaluation per step where the largest safe α holds still.
        if grow:
            alpha *= 2.0
        backtracked = False
        for _ in range(30):
            cand = [p - alpha * g for p, g in zip(clique_pots, step, strict=True)]
            new_loss, new_grads, new_mus = evaluate(cand)
            gain = sum(
                float((g * (a - b)).sum()) for g, a, b in zip(grads, mus, new_mus, strict=True)
            )
            if loss - new_loss >= 0.5 * gain:
                break
            alpha *= 0.5
            backtracked = True
        else:
            break  # no step decreases the loss: converged to rounding
        grow = not backtracked
        theta = [t - alpha * g for t, g in zip(theta, grads, strict=True)]
        clique_pots, mus, loss, grads = cand, new_mus, new_loss, new_grads
        step = evaluate.cliques(grads)
        history.append(loss)
        if len(history) > STALL_STEPS and history[-1 - STALL_STEPS] - loss < tolerance:
            break
    return _model(shape, sets, theta, tree, total)
