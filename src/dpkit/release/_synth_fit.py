"""Closed-form fitting loops (``estimator="closed"``): measure, select, estimate, after the charge.

* ``independent``: every one-way marginal, nothing else (the baseline every method must beat).
* ``mst``: one-way marginals, then a maximum spanning tree chosen by the exponential mechanism
  one edge at a time, Kruskal-style, each edge scored by how badly the one-way model gets its
  pair marginal wrong (McKenna, Miklau & Sheldon 2021, Alg. 1, "select"); then the tree's pair
  marginals are measured.
* ``aim``: one-way marginals, then rounds; each round the exponential mechanism picks the next
  column *and* its parents (one or two columns already placed) with AIM's quality
  ‖M_r(D) − M_r(p̂)‖₁ − √(2/π)·σ·|cells(r)| (McKenna et al., PVLDB 2022, Alg. 2), which weighs the
  current model's error on the marginal against the noise its measurement would add, so that
  large marginals are picked only when the data show strong dependence. The current model's
  marginals come from a running sample of the model (free post-processing).

Scores have sensitivity 1 under add/remove (one record moves one count of one cell of M_r(D)
by one; the model term is fixed by earlier noisy measurements) and 2 under replace-one.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt

from dpkit._progress import Progress
from dpkit.mechanisms import Exponential
from dpkit.release._graphical import BayesNet, Family, conditional, one_way, sample_child
from dpkit.release._marginals import marginal, measure
from dpkit.release._synth_plan import Plan

__all__ = ["MODEL_SAMPLE", "fit_model"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

MODEL_SAMPLE = 20_000
"""Rows of the running model sample that AIM's scores read the model's marginals from."""


def _noisy_total(noisy: list[IntArray], sigma: float) -> float:
    """n̂: the mean of the one-way tables' noisy totals (equal variances σ²·cells, so weight
    each by 1/cells), at least 1."""
    w = np.array([1.0 / t.size for t in noisy])
    s = np.array([float(t.sum()) for t in noisy])
    del sigma
    return max(1.0, float((w * s).sum() / w.sum()))


def fit_model(
    codes: IntArray,
    shape: tuple[int, ...],
    plan: Plan,
    gen: np.random.Generator,
    progress: Progress | None = None,
) -> tuple[BayesNet, float, list[tuple[int, ...]]]:
    """Fit ``plan.method`` to encoded records; returns the model, n̂ and the measured sets."""
    d = len(shape)
    total_steps = 1 + plan.rounds
    ones = [measure(codes, shape, (c,), plan.sigma_one_way, gen).noisy for c in range(d)]
    n_hat = _noisy_total(ones, plan.sigma_one_way)
    priors = [one_way(t, n_hat) for t in ones]
    if progress is not None:
        progress(1, total_steps)
    if plan.method == "independent":
        fams = tuple(Family(c, (), priors[c]) for c in range(d))
        return BayesNet(shape, fams), n_hat, [(c,) for c in range(d)]
    if plan.method == "mst":
        edges = _mst_edges(codes, shape, priors, n_hat, plan, gen, progress)
        fitted = _fit_tree(codes, shape, _tree_families(d, edges), priors, n_hat, plan, gen)
    else:
        fitted = _aim_families(codes, shape, priors, n_hat, plan, gen, progress)
    # A family whose table is not its prior was measured in a round (a fresh one-way table
    # when it has no parents).
    measured = [(c,) for c in range(d)] + [
        (*f.parents, f.child) for f in fitted if f.parents or f.table is not priors[f.child]
    ]
    return BayesNet(shape, tuple(fitted)), n_hat, measured


def _fit_tree(
    codes: IntArray,
    shape: tuple[int, ...],
    families: list[tuple[int, tuple[int, ...]]],
    priors: list[FloatArray],
    n_hat: float,
    plan: Plan,
    gen: np.random.Generator,
) -> list[Family]:
    """Measure each tree edge once and turn it into its conditional."""
    fitted: list[Family] = []
    for child, parents in families:
        if not parents:
            fitted.append(Family(child, (), priors[child]))
            continue
        m = measure(codes, shape, (*parents, child), plan.sigma_round, gen)
        fitted.append(Family(child, parents, conditional(m.noisy, m.sigma, n_hat, priors[child])))
    return fitted


def _l1(counts: IntArray, model: FloatArray) -> float:
    return float(np.abs(counts - model).sum())


def _mst_edges(
    codes: IntArray,
    shape: tuple[int, ...],
    priors: list[FloatArray],
    n_hat: float,
    plan: Plan,
    gen: np.random.Generator,
    progress: Progress | None,
) -> list[tuple[int, int]]:
    d = len(shape)
    pairs = [
        (i, j)
        for i, j in itertools.combinations(range(d), 2)
        if shape[i] * shape[j] <= plan.max_cells
    ]
    scores = np.array(
        [
            _l1(marginal(codes, shape, (i, j)), n_hat * np.outer(priors[i], priors[j]))
            for i, j in pairs
        ]
    )
    em = Exponential(epsilon=plan.select_epsilon, sensitivity=plan.score_sensitivity)
    comp = list(range(d))

    def root(a: int) -> int:
        while comp[a] != a:
            a = comp[a]
        return a

    edges: list[tuple[int, int]] = []
    for r in range(plan.rounds):
        open_idx = [k for k, (i, j) in enumerate(pairs) if root(i) != root(j)]
        k = open_idx[em.select_index(scores[open_idx], rng=gen)]
        i, j = pairs[k]
        comp[root(j)] = root(i)
        edges.append((i, j))
        if progress is not None:
            progress(2 + r, 1 + plan.rounds)
    return edges


def _tree_families(d: int, edges: list[tuple[int, int]]) -> list[tuple[int, tuple[int, ...]]]:
    """Orient a spanning tree from column 0 (breadth first): (child, (parent,)) families."""
    adj: dict[int, list[int]] = {c: [] for c in range(d)}
    for i, j in edges:
        adj[i].append(j)
        adj[j].append(i)
    out: list[tuple[int, tuple[int, ...]]] = [(0, ())]
    seen, queue = {0}, [0]
    while queue:
        a = queue.pop(0)
        for b in sorted(adj[a]):
            if b not in seen:
                seen.add(b)
                queue.append(b)
                out.append((b, (a,)))
    return out


def _aim_families(
    codes: IntArray,
    shape: tuple[int, ...],
    priors: list[FloatArray],
    n_hat: float,
    plan: Plan,
    gen: np.random.Generator,
    progress: Progress | None,
) -> list[Family]:
    d = len(shape)
    em = Exponential(epsilon=plan.select_epsilon, sensitivity=plan.score_sensitivity)
    bias = math.sqrt(2.0 / math.pi) * plan.sigma_round
    sample = np.zeros((MODEL_SAMPLE, d), dtype=np.int64)
    placed: list[int] = []
    families: list[Family] = []
    exact: dict[tuple[int, ...], IntArray] = {}
    for r in range(plan.rounds):
        cands: list[tuple[int, tuple[int, ...]]] = []
        if not placed:
            cands = [(j, (i,)) for i, j in itertools.combinations(range(d), 2)]
            cands += [(a, ()) for a in range(d)]
        else:
            rest = [c for c in range(d) if c not in placed]
            # () is a fresh one-way measurement: the choice when no dependence is worth its
            # noise, and always within max_cells, so every round has a candidate.
            sets = [(), *((p,) for p in placed), *itertools.combinations(sorted(placed), 2)]
            cands = [(a, s) for a in rest for s in sets]
        cands = [
            (a, s) for a, s in cands if math.prod(shape[c] for c in s) * shape[a] <= plan.max_cells
        ]
        scores = np.empty(len(cands))
        for k, (a, s) in enumerate(cands):
            cols = (*s, a)
            if cols not in exact:
                exact[cols] = marginal(codes, shape, cols)
            if not s:
                model = n_hat * priors[a]
            else:
                ps = (
                    marginal(sample, shape, s).astype(np.float64) / MODEL_SAMPLE
                    if placed
                    else priors[s[0]]
                )
                model = n_hat * np.multiply.outer(ps, priors[a])
            scores[k] = _l1(exact[cols], model) - bias * exact[cols].size
        a, s = cands[em.select_index(scores, rng=gen)]
        if s and not placed:  # the first pair: its parent is the root
            families.append(Family(s[0], (), priors[s[0]]))
            placed.append(s[0])
            sample[:, s[0]] = sample_child(sample, families[-1], gen)
        m = measure(codes, shape, (*s, a), plan.sigma_round, gen)
        families.append(Family(a, s, conditional(m.noisy, m.sigma, n_hat, priors[a])))
        sample[:, a] = sample_child(sample, families[-1], gen)
        placed.append(a)
        if progress is not None:
            progress(2 + r, 1 + plan.rounds)
    # A round that chose a bare one-way marginal while nothing was placed places one column,
    # not two, so d − 1 rounds can leave a column out; it keeps its noisy one-way marginal
    # (free post-processing) instead of being sampled as a constant first cell.
    families += [Family(c, (), priors[c]) for c in range(d) if c not in placed]
    return families
