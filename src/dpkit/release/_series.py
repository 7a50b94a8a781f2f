"""Orthogonal-series density with the cosine basis (Wasserman & Zhou 2010)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt

from dpkit._missing import MISSING_DEFAULT, Missing
from dpkit.accounting import Neighbouring
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.mechanisms._base import SupportsCharge, charge
from dpkit.random import RNGLike, as_generator
from dpkit.release._density_data import (
    FloatArray,
    as_records,
    check_box,
    check_memory,
    check_public_n,
    per_dim_ints,
    to_unit,
)
from dpkit.release._density_grid import (
    DensityRelease,
    midpoints,
    project_density,
    uniform_edges,
)
from dpkit.release._density_noise import (
    IntArray,
    IntegerNoise,
    fixed_point_bits,
    integer_noise,
    split_count,
    total_event,
)
from dpkit.stats._common import check_privacy, warn_large_delta
from dpkit.stats._data import check_n
from dpkit.stats._events import declared, is_replace

__all__ = [
    "chosen_degree",
    "cosine_basis",
    "exact_sums",
    "plan_noise",
    "series_degree",
    "series_density",
]

_EVAL_CELLS = {1: 512, 2: 96, 3: 32}  # evaluation grid per side for the projected density
_BLOCK = 4096  # records per block when forming per-record basis values


def series_degree(n: float, d: int, epsilon: float, smoothness: float = 1.0) -> int:
    """Default number of cosine terms per dimension, m.

    The non-private rule m = n^{1/(2γ+d)} (Wasserman & Zhou 2010, γ the Sobolev smoothness) balances
    bias m^{−2γ} against variance m^d/n; the noise adds about m^{3d}/(nε)², so m is also kept
    below (nε)^{2/(2γ+3d)}. Both depend only on public n (or a noisy n) and ε.

    >>> series_degree(10_000, 1, 1.0), series_degree(10_000, 1, 0.1)
    (21, 15)
    """
    a: float = max(n, 1.0) ** (1.0 / (2 * smoothness + d))
    b: float = max(n * epsilon, 1.0) ** (2.0 / (2 * smoothness + 3 * d))
    return max(1, math.floor(min(a, b)))


def _indices(m: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [j for j in itertools.product(*(range(k + 1) for k in m)) if any(j)]


def cosine_basis(u: FloatArray, m: tuple[int, ...]) -> FloatArray:
    """ψ_J(u) = Π_k φ_{J_k}(u_k), φ_0 = 1, φ_j = √2 cos(π j u), for every J ≠ 0 (n × M).

    Orthonormal on [0, 1]^d; sup |ψ_J| = 2^{(number of non-zero J_k)/2}.
    """
    tables = []
    for k, mk in enumerate(m):
        j = np.arange(mk + 1)
        t = math.sqrt(2.0) * np.cos(math.pi * u[:, k : k + 1] * j[None, :])
        t[:, 0] = 1.0
        tables.append(t)
    out = tables[0]
    for t in tables[1:]:
        out = (out[:, :, None] * t[:, None, :]).reshape(u.shape[0], -1)
    result: FloatArray = out[:, 1:]  # drop J = 0 (the constant, whose coefficient is 1)
    return result


def series_density(
    x: object,
    *,
    bounds: object,
    epsilon: float,
    delta: float = 0.0,
    degree: object = None,
    smoothness: float = 1.0,
    n: int | None = None,
    expected_n: int | None = None,
    count_fraction: float = 0.1,
    outside: str = "clamp",
    missing: Missing = MISSING_DEFAULT,
    accountant: SupportsCharge | None = None,
    rng: RNGLike = None,
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE,
) -> DensityRelease:
    """Private orthogonal-series density with the cosine basis, d ≤ 3 (Wasserman & Zhou 2010).

    The box is mapped to [0, 1]^d and p(u) = 1 + Σ_J β_J ψ_J(u) is estimated with
    β̂_J = (1/n) Σ_i ψ_J(U_i) over the tensor-product cosine basis with indices 0 … m per side.

    **Convention.** The released statistic is the vector of sums S_J = Σ_i ψ_J(U_i) (exact fixed
    point); β̃_J = S̃_J / n with the public n, or a noisy count. The degree is fixed before
    anything is charged, from public inputs only: ``degree=``, or :func:`series_degree` of the
    public ``n`` or, when n is private, of ``expected_n`` (a public guess of it); with neither,
    the call is refused (choose one). So the whole release (count and coefficients) is known,
    and its accuracy given by :func:`series_density_accuracy`, before it is charged, once.

    One record adds or removes ψ_J(x), so the ℓ1 sensitivity is Σ_J sup|ψ_J| (= m·c0 with
    c0 = √2 in 1-d) under add/remove and twice that under replace; ℓ2: (Σ_J sup|ψ_J|²)^{1/2},
    doubled under replace. With δ = 0
    each S_J gets discrete Laplace noise of scale ℓ1/ε, i.e. β̃_J gets noise of scale
    m·c0/(nε) — the seed's calibration, which is this add/remove convention with n as the
    normaliser. With δ > 0, discrete Gaussian noise calibrated through zCDP.

    The estimate is then projected onto densities (the L2-closest ``max(q − c, 0)``, Glad, Hjort
    and Ushakov 2003) on a fine grid, from which ``pdf``, ``cdf`` and ``sample`` work.

    Privacy guarantee: (ε, δ)-DP under the chosen neighbouring relation, the noisy count
    included; everything computed from the result is post-processing.

    Parameters
    ----------
    degree : int or tuple of int, optional
        m, the highest cosine index per dimension; default :func:`series_degree` of the public
        ``n`` (or ``expected_n``) and ε.
    expected_n : int, optional
        A public guess of the number of records when ``n`` is private, used only to choose the
        default degree (the estimate is still normalised by a noisy count).
    smoothness : float
        γ of the Sobolev ellipsoid assumed by the default degree.

    Notes
    -----
    Other parameters are as in :func:`histogram_density`.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.release import series_density
    >>> x = np.random.default_rng(0).beta(2, 5, size=5000)
    >>> dens = series_density(x, bounds=(0, 1), epsilon=1.0, n=5000, rng=1)
    >>> dens.raw.shape, round(float(dens.probabilities.sum()), 6)
    ((17,), 1.0)
    """
    eps, dlt = check_privacy(epsilon, delta)
    replace = is_replace(neighbouring)
    box = check_box(bounds)
    d = len(box)
    if d > 3:
        raise DataError(f"series_density supports d ≤ 3 (tensor cosine basis), got d = {d}.")
    if isinstance(smoothness, bool) or not isinstance(smoothness, int | float) or smoothness <= 0:
        raise DataError(f"smoothness must be a positive number, got {smoothness!r}.")
    data = as_records(x, box, outside, missing, public_size=replace or n is not None)
    public_n = check_public_n(n, data.shape[0])
    if replace and public_n is None:
        public_n = data.shape[0]
    warn_large_delta(dlt, public_n)
    count, eps_s = split_count(
        epsilon=eps, public_n=public_n, replace=replace, needs_n=True, fraction=count_fraction
    )
    m = chosen_degree(degree, d, public_n, expected_n, eps_s, smoothness)
    factor = 2 if replace else 1
    gen = as_generator(rng)
    bits, caps, noise = plan_noise(m, factor, eps_s, dlt)
    event = total_event(count, noise.event)
    event = declared(event, replace)  # (the relation its sensitivities are for)
    charge(accountant, event, "series density", delta=dlt, rng=rng)
    n_hat = count.value(data.shape[0], gen)
    sums = exact_sums(to_unit(data, box), m, bits, caps)
    noisy = sums + noise.draw(sums.size, gen)
    beta = noisy.astype(np.float64) / (math.ldexp(n_hat, bits))
    cells = tuple(_EVAL_CELLS[d] for _ in box)
    centres = [(c - lo) / (hi - lo) for c, (lo, hi) in zip(midpoints(box, cells), box, strict=True)]
    grid = np.stack([g.reshape(-1) for g in np.meshgrid(*centres, indexing="ij")], axis=1)
    # evaluated in blocks: the basis on all 32^3 points of a 3-d grid at once would need
    # 32768 × (number of coefficients) floats, far more than the memory the release checked
    values = np.concatenate(
        [1.0 + cosine_basis(grid[i : i + _BLOCK], m) @ beta for i in range(0, len(grid), _BLOCK)]
    ).reshape(cells)
    volume_unit = 1.0 / math.prod(cells)
    probs = project_density(values, volume_unit)
    return DensityRelease(
        probs,
        uniform_edges(box, cells),
        event,
        "cosine series",
        beta,
        n_hat,
        noise_scale=float(noise.scale) / math.ldexp(n_hat, bits),
    )


def chosen_degree(
    degree: object,
    d: int,
    public_n: int | None,
    expected_n: object,
    eps: float,
    smoothness: float,
) -> tuple[int, ...]:
    """The degree per side, from public inputs only, checked to fit in memory (before a charge).

    ``degree`` if given, else :func:`series_degree` of the public n or of ``expected_n``; with
    neither the degree would depend on the private n, so the caller is asked to choose.
    """
    if degree is not None:
        m = per_dim_ints(degree, d, "degree", 1)
    else:
        size = public_n if public_n is not None else check_n(expected_n)
        if size is None:
            raise PrivacyParameterError(
                "series_density's degree depends on the number of records: pass degree=, the "
                "public n=, or expected_n= (a public guess of it) when n is private."
            )
        m = tuple(series_degree(float(size), d, eps, smoothness) for _ in range(d))
    check_memory(float(math.prod(k + 1 for k in m)) * (_BLOCK + 16), 8, "the cosine basis")
    return m


def plan_noise(
    m: tuple[int, ...], factor: int, eps: float, dlt: float
) -> tuple[int, IntArray, IntegerNoise]:
    """Fixed-point bits, per-coefficient caps and the calibrated noise for degree ``m``."""
    sup = np.array([2.0 ** (sum(1 for v in j if v) / 2) for j in _indices(m)])
    real = float(sup.sum()) if dlt == 0.0 else float(np.sqrt(np.sum(sup**2)))
    bits = fixed_point_bits(factor * real, eps, dlt)
    caps = np.ceil(sup * 2.0**bits).astype(np.int64)
    l1 = factor * int(caps.sum())
    l2 = math.nextafter(factor * math.sqrt(float(np.sum(caps.astype(np.float64) ** 2))), math.inf)
    noise = integer_noise(l1=l1, l2=l2, dimension=int(caps.size), epsilon=eps, delta=dlt)
    return bits, caps, noise


def exact_sums(
    u: FloatArray, m: tuple[int, ...], bits: int, caps: IntArray
) -> npt.NDArray[np.object_]:
    """Exact Σ_i clip(rint(ψ_J(u_i) 2^bits), ±cap_J) as Python ints.

    A block of 2^12 values below 2^(bits+2) ≤ 2^42 sums exactly in int64; the running totals are
    Python ints, so they cannot wrap around however many records there are.
    """
    total = np.zeros(caps.size, dtype=np.int64).astype(object)
    for start in range(0, u.shape[0], _BLOCK):
        vals = np.rint(cosine_basis(u[start : start + _BLOCK], m) * 2.0**bits)
        vals = np.clip(vals, -caps, caps).astype(np.int64)
        total = total + vals.sum(axis=0).astype(object)
    return total
