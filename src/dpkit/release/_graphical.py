"""A graphical model fitted to noisy marginals: a Bayesian network over the columns' cells.

MST (McKenna, Miklau & Sheldon 2021) and AIM (McKenna et al., PVLDB 2022) estimate a graphical
model from noisy marginals with Private-PGM's mirror descent over a junction tree. When every
measured marginal is one column together with at most two columns placed before it — the
families of a Bayesian network whose cliques have width ≤ 3, which is the model MST's tree is,
and the shape AIM's selection is restricted to here — that model is given in closed form by the
conditionals P(child | parents), each read from its own noisy marginal. Each noisy table is
first projected onto the scaled simplex {p ≥ 0, Σp = n̂} (the least-squares estimate of the
table, Duchi, Shalev-Shwartz, Singer & Chandra 2008), then every parent configuration's row is
shrunk towards the child's one-way marginal in proportion to the noise (a row with few records is
mostly prior, not noise). Everything here is post-processing of noisy measurements: it never
sees the data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["BayesNet", "Family", "conditional", "one_way", "project_simplex", "sample_child"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def project_simplex(y: npt.ArrayLike, total: float) -> FloatArray:
    """Euclidean projection of ``y`` onto {p ≥ 0, Σp = total} (Duchi et al. 2008, Fig. 1).

    Examples
    --------
    >>> project_simplex([3.0, -1.0, 1.0], 2.0).tolist()
    [2.0, 0.0, 0.0]
    """
    v = np.asarray(y, dtype=np.float64).ravel()
    if total <= 0:
        return np.full(v.shape, 0.0)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    k = np.arange(1, v.size + 1)
    r = int(np.nonzero(u - css / k > 0)[0][-1])
    theta = css[r] / (r + 1)
    out = np.maximum(v - theta, 0.0)
    return np.asarray(out.reshape(np.shape(y)), dtype=np.float64)


@dataclass(frozen=True)
class Family:
    """One column (``child``) and the conditional table P(child | parents).

    ``table`` has one axis per parent (in order) and the child's axis last; each row sums to 1.
    """

    child: int
    parents: tuple[int, ...]
    table: FloatArray


def conditional(noisy: IntArray, sigma: float, total: float, prior: FloatArray) -> FloatArray:
    """P(child | parents) from a noisy marginal whose last axis is the child.

    The table is projected onto the simplex of mass ``total`` (the estimated number of records);
    each parent row of estimated mass m becomes (counts + λ·prior)/(m + λ) with λ = σ√k, the
    noise's ℓ2 size over the row's k cells, so that a row the noise dominates falls back to the
    child's one-way distribution ``prior``.
    """
    est = project_simplex(noisy.astype(np.float64), total).reshape(noisy.shape)
    k = noisy.shape[-1]
    lam = sigma * math.sqrt(k)
    rows = est.sum(axis=-1, keepdims=True)
    return np.asarray((est + lam * prior) / (rows + lam), dtype=np.float64)


def sample_child(
    codes: IntArray,
    family: Family,
    gen: np.random.Generator,
    block: int = 1 << 16,
    systematic: bool = False,
) -> IntArray:
    """Draw the child's cell for every row of ``codes`` (parents already filled in).

    With ``systematic=True`` the rows sharing a parent configuration are drawn together by
    systematic sampling: in a random order, the j-th of m rows takes the cell where (j + u)/m
    falls in the conditional's cumulative distribution, u uniform. Each row still has exactly
    the conditional's distribution, but a cell of probability p receives ⌊mp⌋ or ⌈mp⌉ of the m
    rows, so the sample's marginals carry far less sampling noise than independent draws.
    """
    n = codes.shape[0]
    k = family.table.shape[-1]
    cdf = np.cumsum(family.table.reshape(-1, k), axis=1)
    cdf[:, -1] = 1.0  # rows sum to 1 up to rounding; the last cell takes the remainder
    if family.parents:
        dims = family.table.shape[:-1]
        cfg = np.ravel_multi_index(tuple(codes[:, p] for p in family.parents), dims)
    else:
        cfg = np.zeros(n, dtype=np.int64)
    if systematic and n:
        perm = gen.permutation(n)
        order = perm[np.argsort(cfg[perm], kind="stable")]
        counts = np.bincount(cfg, minlength=cdf.shape[0])
        starts = np.cumsum(counts) - counts
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - starts[cfg[order]]
        u = np.asarray(gen.random(cdf.shape[0]), dtype=np.float64)
        pos = (rank + u[cfg]) / counts[cfg]
    else:
        pos = np.asarray(gen.random(n), dtype=np.float64)
    out = np.empty(n, dtype=np.int64)
    for s in range(0, n, block):
        rows = cdf[cfg[s : s + block]]
        out[s : s + block] = np.minimum((rows < pos[s : s + block, None]).sum(axis=1), k - 1)
    return out


@dataclass(frozen=True)
class BayesNet:
    """Families in sampling order: each parent is a child of an earlier family.

    Examples
    --------
    >>> import numpy as np
    >>> net = BayesNet((2, 2), (Family(0, (), np.array([0.5, 0.5])),
    ...                         Family(1, (0,), np.array([[1.0, 0.0], [0.0, 1.0]]))))
    >>> codes = net.sample(1000, np.random.default_rng(0))
    >>> bool(np.all(codes[:, 0] == codes[:, 1]))
    True
    """

    shape: tuple[int, ...]
    families: tuple[Family, ...]

    def sample(self, n: int, gen: np.random.Generator) -> IntArray:
        """``n`` records of cell indices (n × columns), by ancestral sampling (systematic
        within each parent configuration, :func:`sample_child`)."""
        codes = np.zeros((n, len(self.shape)), dtype=np.int64)
        for fam in self.families:
            codes[:, fam.child] = sample_child(codes, fam, gen, systematic=True)
        return codes

    @property
    def edges(self) -> list[tuple[int, int]]:
        """(parent, child) pairs."""
        return [(p, f.child) for f in self.families for p in f.parents]


def one_way(noisy: Sequence[int] | IntArray, total: float) -> FloatArray:
    """A one-way distribution from noisy counts: simplex projection, with a uniform floor.

    The floor (half a record's worth over the whole table) keeps every cell reachable, so a
    category the noise pushed to zero can still appear.
    """
    y = np.asarray(noisy, dtype=np.float64)
    p = project_simplex(y, max(total, 1.0))
    p = p + 0.5 / y.size
    return np.asarray(p / p.sum(), dtype=np.float64)
