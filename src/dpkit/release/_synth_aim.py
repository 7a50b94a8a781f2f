"""AIM and MST as their authors define them, on the jointly fitted graphical model (after the
charge).

* AIM (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022, Alg. 1): measure every one-way marginal
  at σ₀ = Δ·√(T/(2αρ)) (T = 16d, α = 0.9), and again (dpkit's addition, :func:`_top_up`)
  each one whose noisy cells are too shallow for σ₀; then rounds until ρ is spent, starting at
  σ₀ or, where n̂ shows σ₀ too coarse for a typical pair (dpkit's addition,
  :func:`_round_scale`), at a smaller σ with ε in proportion. Each round the
  candidates are the workload's marginals and their subsets (the downward closure) whose
  addition keeps the model's junction tree within ``(ρ_used/ρ)·max_model_cells``; the
  exponential mechanism (ε per round, sensitivity the largest w_r among them) picks one by
  w_r·(‖M_r(D) − M_r(p̂)‖₁ − √(2/π)·σ·n_r), with w_r = Σ_{s ∈ W} |r ∩ s|; it is measured at σ
  and the model refitted jointly (warm-started). When the refitted model moved that marginal by
  less than the noise expected of its measurement, σ halves and ε doubles (annealing); when what
  is left of ρ cannot pay two more rounds, the last round spends it exactly.
* MST (McKenna, Miklau & Sheldon 2021, Alg. 1): ρ/3 on the one-way marginals, ρ/3 on choosing a
  maximum spanning tree of pairs edge by edge (exponential mechanism on the one-way model's L1
  error, :func:`_mst_edges`), ρ/3 on measuring the tree's pairs; then one joint fit.

The model's marginals M_r(p̂) come from the fitted model (:mod:`dpkit.release._pgm`), never from
the data; only the scores M_r(D) read the data, through the exponential mechanism.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from dpkit.mechanisms import Exponential
from dpkit.noise import sampled_sigma
from dpkit.release._graphical import BayesNet, Family, conditional, one_way
from dpkit.release._junction import graph_cells, model_graph
from dpkit.release._marginals import marginal, measure
from dpkit.release._pgm import MarkovModel, NoisyMarginal, fit_markov, potentials_from_net
from dpkit.release._synth_fit import _mst_edges, _tree_families
from dpkit.release._synth_plan import AIM_ALPHA, AIM_ONE_WAY_TOP_UP, Plan

__all__ = ["RoundRecord", "fit_aim", "fit_mst_pgm", "workload_weights"]

IntArray = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]
Cols = tuple[int, ...]

ROUND_ITERATIONS = 25
"""Mirror-descent steps after each measurement (warm-started, so few are needed)."""

FINAL_ITERATIONS = 200
"""Mirror-descent steps of the final estimate."""

FIT_TOLERANCE = 1.0
"""A fit stops when ten mirror-descent steps lowered the loss by less than this. The loss is
the measurements' negative Gaussian log-likelihood (up to a constant), so the model those steps
would still gain makes the noisy measurements less than e times likelier: a change the noise
cannot tell apart."""

ONE_WAY_SNR = 16.0
"""A one-way table is measured again until its average cell holds this many noise standard
deviations (n̂/(cells·σ)). AIM's start spends about 6% of ρ on the one-way tables (σ₀ at the
round scale); on a small table at a small ε their cells are then a few σ deep, every later
marginal's error inherits theirs, and the rounds, whose selections are nearly uniform at that
budget, rarely measure them again. On Fair's affairs data at ε = 0.3 (δ = 1e-6, 16 seeds)
the repeats lowered the mean 3-way TVD from 0.141 to 0.135; at ε = 1 and above no column there
needs one. Measured against fixed shares: 15% of ρ on the one-way tables scored 0.134 at
ε = 0.3 but 0.086 against 0.084 at ε = 1; a third, 0.133 and 0.093."""

ROUND_SNR = 4.0
"""The rounds start at a σ under which a typical pair's average cell (n̂ over the median number
of cells of a pair of columns) holds at least this many noise standard deviations. AIM's σ₀ is
set by T = 16d alone; on a small table at a small ε it leaves every pair's cells below one σ
deep, and the rounds measure noise until annealing catches up. With the rounds starting
shallower-but-fewer, Fair's affairs data at ε = 0.3 (δ = 1e-6) scored 0.128 against 0.133 over
48 seeds, and 0.083 against 0.085 at ε = 1 (32 seeds); at ε = 3, and on ``randhie`` at every ε,
σ₀ is already below the cap and nothing changes. Thresholds 3 to 8 scored alike at ε = 0.3."""

RoundRecord = tuple[Cols, float, float]
"""One AIM round: the marginal measured, its σ and the selection ε."""


def workload_weights(d: int, workload: list[Cols]) -> dict[Cols, float]:
    """AIM's candidates (the workload's downward closure) and weights w_r = Σ_s |r ∩ s|."""
    closure = {
        sub for s in workload for k in range(1, len(s) + 1) for sub in itertools.combinations(s, k)
    }
    del d
    return {r: float(sum(len(set(r) & set(s)) for s in workload)) for r in sorted(closure)}


def _total(noisy: list[IntArray]) -> float:
    # n̂: the one-way tables' noisy totals weighted by 1/cells (their variances), at least 1
    w = np.array([1.0 / t.size for t in noisy])
    s = np.array([float(t.sum()) for t in noisy])
    return max(1.0, float((w * s).sum() / w.sum()))


def _total_of(meas: list[NoisyMarginal]) -> float:
    # n̂ from every one-way table, weighted by the inverse variance of its total, 1/(σ²·cells)
    ones = [m for m in meas if len(m.cols) == 1]
    w = np.array([1.0 / (m.sigma**2 * m.values.size) for m in ones])
    s = np.array([float(m.values.sum()) for m in ones])
    return max(1.0, float((w * s).sum() / w.sum()))


def _top_up(
    codes: IntArray, shape: tuple[int, ...], plan: Plan, meas: list[NoisyMarginal],
    n_hat: float, gen: np.random.Generator,
) -> list[RoundRecord]:  # fmt: skip
    """Measure again each one-way marginal whose first table is too noisy for its cells.

    A column's target σ is n̂/(ONE_WAY_SNR·cells): its average cell at least ONE_WAY_SNR noise
    standard deviations. A column above it is measured again at the σ that brings the pooled
    (inverse-variance) noise to the target; the repeats cost at most AIM_ONE_WAY_TOP_UP of ρ
    (scaled down together when they would cost more), and a repeat noisier than σ₀ is left to
    the rounds. n̂ is the noisy total of tables already paid for, so the choice is
    post-processing; each repeat is a Gaussian step of the rounds' budget."""
    sens, s0 = plan.sensitivity, plan.sigma_one_way
    want: dict[int, float] = {}  # column -> variance of its repeat
    for c, k in enumerate(shape):
        target = n_hat / (ONE_WAY_SNR * k)
        if s0 > target:
            want[c] = 1.0 / (1.0 / target**2 - 1.0 / s0**2)
    cost = sum(sens**2 / (2 * v) for v in want.values())
    scale = min(1.0, AIM_ONE_WAY_TOP_UP * plan.rho / cost) if cost else 1.0
    out: list[RoundRecord] = []
    for c, v in want.items():
        sigma = sampled_sigma(math.sqrt(v / scale))
        if sigma > s0:
            continue
        m = measure(codes, shape, (c,), sigma, gen)
        meas.append(NoisyMarginal.of((c,), m.noisy, sigma))
        out.append(((c,), sigma, 0.0))
    return out


def _round_scale(
    shape: tuple[int, ...], n_hat: float, sigma: float, eps: float, sens: float, left: float
) -> tuple[float, float]:
    """The rounds' starting σ and ε: AIM's σ₀ and ε₀, or, where σ₀ would leave a typical pair's
    cells less than ROUND_SNR σ deep, a smaller σ with ε grown in proportion (each round keeps
    AIM's α split of its ρ). n̂ is the noisy one-way tables' total, already paid for, so the
    choice is post-processing; a round never takes more than a quarter of what is left, and the
    loop still spends exactly the rest of ρ."""
    d = len(shape)
    pairs = sorted(shape[a] * shape[b] for a, b in itertools.combinations(range(d), 2))
    if not pairs or left <= 0:
        return sigma, eps
    cap = n_hat / (ROUND_SNR * pairs[len(pairs) // 2])
    if cap >= sigma:
        return sigma, eps
    floor = sens / math.sqrt(2 * AIM_ALPHA * left / 4)
    new = sampled_sigma(max(cap, floor))
    if new >= sigma:
        return sigma, eps
    return new, eps * sigma / new


def _one_ways(
    codes: IntArray, shape: tuple[int, ...], sigma: float, gen: np.random.Generator
) -> tuple[list[NoisyMarginal], float, BayesNet]:
    tabs = [measure(codes, shape, (c,), sigma, gen).noisy for c in range(len(shape))]
    n_hat = _total(tabs)
    net = BayesNet(shape, tuple(Family(c, (), one_way(t, n_hat)) for c, t in enumerate(tabs)))
    return [NoisyMarginal.of((c,), t, sigma) for c, t in enumerate(tabs)], n_hat, net


def fit_aim(
    codes: IntArray,
    shape: tuple[int, ...],
    plan: Plan,
    workload: list[Cols],
    gen: np.random.Generator,
    progress: Progress | None = None,
) -> tuple[MarkovModel, float, list[RoundRecord]]:
    """AIM's loop; returns the final model, n̂ and each round's (marginal, σ, ε)."""
    d = len(shape)
    sens = plan.sensitivity
    sigma, eps = plan.sigma_one_way, plan.select_epsilon
    meas, n_hat, closed = _one_ways(codes, shape, sigma, gen)
    budget = plan.rho  # the whole plan; the one-way tables are its first d measurements
    used = d * sens**2 / (2 * sigma**2)
    rounds = _top_up(codes, shape, plan, meas, n_hat, gen)
    if rounds:
        used += sum(sens**2 / (2 * s**2) for _, s, _ in rounds)
        n_hat = _total_of(meas)
    sigma, eps = _round_scale(shape, n_hat, sigma, eps, sens, budget - used)
    weights = workload_weights(d, workload)
    cands = [r for r in weights if math.prod(shape[c] for c in r) <= plan.max_cells]
    exact = {r: marginal(codes, shape, r).astype(np.float64) for r in cands}
    pairs = {r: model_graph([r]) for r in cands}
    inside: set[Cols] = {r for r in cands if len(r) == 1}  # within a measured set
    warm = potentials_from_net(closed, [(c,) for c in range(d)])
    model = _fit(shape, meas, n_hat, warm=warm, iterations=ROUND_ITERATIONS)
    final = not cands
    while not final:
        left = budget - used
        step = sens**2 / (2 * sigma**2) + eps**2 / 8
        if left < 2 * step:
            # The last round spends what is left exactly (α to measurement, as every round);
            # the hair below keeps float rounding from tipping the sum over the charge. A
            # round before it left at least one round's ρ, so σ ≤ σ₀/√α (checked at planning).
            final = True
            last = left * (1 - 1e-12)
            sigma = sampled_sigma(sens / math.sqrt(2 * AIM_ALPHA * last))
            # σ is rounded up to one the exact sampler draws; ε takes what that leaves
            eps = math.sqrt(8 * (last - sens**2 / (2 * sigma**2)))
            step = sens**2 / (2 * sigma**2) + eps**2 / 8
        used += step
        cap = used / budget * plan.max_model_cells
        # A marginal inside a measured set adds nothing to the model and is always a candidate
        # (every one-way marginal is), so the list is never empty.
        graph = model_graph(m.cols for m in meas)
        ok = [r for r in cands if r in inside or graph_cells(shape, graph | pairs[r]) <= cap]
        bias = math.sqrt(2 / math.pi) * sigma
        scores = np.array(
            [
                weights[r]
                * (float(np.abs(exact[r] - model.project(r)).sum()) - bias * exact[r].size)
                for r in ok
            ]
        )
        # the largest weight among this round's candidates, as the authors' code has it: the
        # filter reads only the model and the budget spent, so the set is public given them
        score_sens = plan.score_sensitivity * max(weights[r] for r in ok)
        em = Exponential(epsilon=eps, sensitivity=score_sens)
        r = ok[em.select_index(scores, rng=gen)]
        m = measure(codes, shape, r, sigma, gen)
        meas.append(NoisyMarginal.of(r, m.noisy, sigma))
        inside.update(c for c in cands if set(c) <= set(r))
        rounds.append((r, sigma, eps))
        before = model.project(r)
        model = _fit(shape, meas, n_hat, warm=_carry(model), iterations=ROUND_ITERATIONS)
        if float(np.abs(model.project(r) - before).sum()) <= bias * before.size:
            sigma, eps = sampled_sigma(sigma / 2), eps * 2
        if progress is not None:  # steps: the one-way tables, then ρ spent in T-ths
            progress(1 + min(plan.rounds - 1, int(plan.rounds * used / budget)), 1 + plan.rounds)
    model = _fit(shape, meas, n_hat, warm=_carry(model), iterations=FINAL_ITERATIONS)
    if progress is not None:
        progress(1 + plan.rounds, 1 + plan.rounds)
    return model, n_hat, rounds


def _fit(
    shape: tuple[int, ...], meas: list[NoisyMarginal], n_hat: float,
    warm: dict[Cols, npt.NDArray[np.float64]], iterations: int,
) -> MarkovModel:  # fmt: skip
    return fit_markov(shape, meas, n_hat, warm=warm, iterations=iterations, tolerance=FIT_TOLERANCE)


def _carry(model: MarkovModel) -> dict[Cols, npt.NDArray[np.float64]]:
    return dict(zip(model.sets, model.potentials, strict=True))


def fit_mst_pgm(
    codes: IntArray,
    shape: tuple[int, ...],
    plan: Plan,
    gen: np.random.Generator,
    progress: Progress | None = None,
) -> tuple[MarkovModel, float, list[Cols]]:
    """MST's measure–select–measure, then one joint fit warm-started from the tree's closed
    form (each edge's conditional read from its own noisy table)."""
    d = len(shape)
    meas, n_hat, closed = _one_ways(codes, shape, plan.sigma_one_way, gen)
    priors = [f.table for f in closed.families]
    if progress is not None:
        progress(1, 1 + plan.rounds)
    edges = _mst_edges(codes, shape, priors, n_hat, plan, gen, progress)
    fams: list[Family] = []
    for child, parents in _tree_families(d, edges):
        if not parents:
            fams.append(Family(child, (), priors[child]))
            continue
        m = measure(codes, shape, (*parents, child), plan.sigma_round, gen)
        meas.append(NoisyMarginal.of((*parents, child), m.noisy, plan.sigma_round))
        fams.append(Family(child, parents, conditional(m.noisy, m.sigma, n_hat, priors[child])))
    sets = [m.cols for m in meas]
    warm = potentials_from_net(BayesNet(shape, tuple(fams)), sets)
    model = _fit(shape, meas, n_hat, warm=warm, iterations=FINAL_ITERATIONS)
    return model, n_hat, sets
