"""Negative controls: mechanisms that claim an ε they do not meet, for tests and docs.

An auditor that passes every correct mechanism proves little unless it also fails broken ones.
Each control here is a known bug; the audit must report a lower bound clearly above its claim.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta, check_epsilon
from dpkit.audit._cases import AuditCase
from dpkit.audit._pairs import count_pair, histogram_pair
from dpkit.errors import PrivacyParameterError
from dpkit.noise import laplace

__all__ = [
    "histogram_scale_epsilon",
    "laplace_half_scale",
    "naive_float_laplace",
    "name_and_shame",
    "negative_controls",
    "noisy_max_value",
]

FloatArray = npt.NDArray[np.float64]


def laplace_half_scale(epsilon: float = 1.0) -> AuditCase:
    """A count with Laplace noise of scale ``1/(2ε)``: half the scale ε-DP needs (really 2ε).

    >>> case = laplace_half_scale(1.0)
    >>> case.run(trials=20_000, rng=0).epsilon > 1.3
    True
    """
    eps = check_epsilon(epsilon)
    d0, d1 = count_pair(10)
    scale = 1.0 / (2.0 * eps)

    def mech(d: FloatArray, n: int, rng: np.random.Generator) -> FloatArray:
        return np.asarray(laplace(np.full(n, float(d.size)), scale, rng=rng))

    return AuditCase(
        "control: Laplace at half scale",
        mech,
        d0,
        d1,
        claimed_epsilon=eps,
        description=f"count + Laplace(1/(2ε)); really {2 * eps:g}-DP",
    )


def histogram_scale_epsilon(epsilon: float = 0.5, bins: int = 8) -> AuditCase:
    """A histogram noised with Laplace scale ``ε`` instead of ``1/ε`` (a bug DP auditors found in
    the wild; Ding et al. 2018). Really ``1/ε``-DP, so worse than claimed when ε < 1.

    >>> histogram_scale_epsilon(0.5).run(trials=20_000, rng=0).epsilon > 1.0
    True
    """
    eps = check_epsilon(epsilon)
    if eps >= 1.0:
        raise PrivacyParameterError("the scale-ε histogram bug only shows for epsilon < 1.")
    edges = np.arange(bins + 1, dtype=np.float64)
    d0, d1 = histogram_pair(edges, 10)

    def mech(d: FloatArray, n: int, rng: np.random.Generator) -> FloatArray:
        counts = np.histogram(d, bins=edges)[0].astype(np.float64)
        return np.asarray(laplace(np.tile(counts, (n, 1)), eps, rng=rng))

    return AuditCase(
        "control: histogram, scale ε",
        mech,
        d0,
        d1,
        claimed_epsilon=eps,
        description=f"{bins}-bin histogram + Laplace(ε); really {1 / eps:g}-DP",
    )


def noisy_max_value(epsilon: float = 1.0, k: int = 10) -> AuditCase:
    """Report-noisy-max on ``k`` counting queries (Laplace ``2/ε``) that returns the noisy
    maximum *value* instead of its index (Ding et al. 2018). The index is ε-DP; the value is not:
    one person moves all ``k`` counts, and the lower tail of the maximum of ``k`` noisy counts
    has a privacy loss of ``kε/2``.

    >>> noisy_max_value(1.0).run(trials=20_000, rng=0).epsilon > 1.5
    True
    """
    eps = check_epsilon(epsilon)
    d0, d1 = np.zeros(k), np.ones(k)
    scale = 2.0 / eps

    def mech(d: FloatArray, n: int, rng: np.random.Generator) -> FloatArray:
        noisy = np.asarray(laplace(np.tile(d, (n, 1)), scale, rng=rng))
        return np.asarray(noisy.max(axis=1))

    return AuditCase(
        "control: noisy max value",
        mech,
        d0,
        d1,
        claimed_epsilon=eps,
        description=f"max of {k} counts + Laplace(2/ε), value released; really {k * eps / 2:g}-DP",
    )


def naive_float_laplace(epsilon: float = 1.0) -> AuditCase:
    """A count plus ``rng.laplace(0, 1/ε)`` in floating point (Mironov 2012; McSherry's (2016)
    warning).

    With input 0 the output is the raw noise, a float of any magnitude; with input 1 it is
    ``fl(1 + noise)``, always a multiple of ``2^-53``. The region "output is a multiple of
    ``2^-53``" is hit by every output of 1 and few of 0: the claim is broken for any ε.

    >>> naive_float_laplace(1.0).run(trials=20_000, rng=0).epsilon > 5
    True
    """
    eps = check_epsilon(epsilon)
    d0 = np.zeros(0)
    d1 = np.ones(1)

    def mech(d: FloatArray, n: int, rng: np.random.Generator) -> FloatArray:
        return np.asarray(float(d.size) + rng.laplace(0.0, 1.0 / eps, size=n))

    return AuditCase(
        "control: naive float Laplace",
        mech,
        d0,
        d1,
        claimed_epsilon=eps,
        description="count + numpy's float Laplace(1/ε) (Mironov 2012)",
    )


def name_and_shame(epsilon: float = 1.0, n: int = 100, delta: float | None = None) -> AuditCase:
    """The "Name & Shame" mechanism of the lecture notes "Approximate Differential Privacy": publish
    each record with probability δ, claimed (ε, δ)-DP.

    To the letter it is (0, δ)-DP, so no audit at δ can refute it. But with δ ≥ 1/n it publishes
    about δn records in the clear every time (the "Approximate Differential Privacy" notes: δ must
    be ≪ 1/n). dpkit treats such a δ as void and audits the claim at δ = 1/n², where the true ε is
    infinite; the result's :meth:`~dpkit.audit.AuditResult.delta_lower_bound` at the claimed ε also
    shows δ ≥ 1/n. Records are 0/1; the neighbour flips record 0; unpublished records are -1.

    >>> r = name_and_shame(1.0, n=100).run(trials=20_000, rng=0)
    >>> r.epsilon > 3, r.delta_lower_bound(1.0) > 1 / 100
    (True, True)
    """
    eps = check_epsilon(epsilon)
    if n < 2:
        raise PrivacyParameterError(f"n must be at least 2, got {n!r}.")
    d = 5.0 / n if delta is None else check_delta(delta, allow_zero=False)
    d0 = np.zeros(n)
    d1 = d0.copy()
    d1[0] = 1.0

    def mech(x: FloatArray, m: int, rng: np.random.Generator) -> FloatArray:
        shown = rng.random((m, x.size)) < d
        return np.where(shown, x, -1.0)

    return AuditCase(
        "control: Name & Shame",
        mech,
        d0,
        d1,
        claimed_epsilon=eps,
        delta=d,
        audit_delta=1.0 / n**2,
        description=f"each of {n} records published w.p. δ={d:g} ≥ 1/n; audited at δ=1/n²",
    )


def negative_controls(epsilon: float = 1.0) -> list[AuditCase]:
    """All built-in controls at claimed ``epsilon`` (the histogram one at ``min(ε, 1)/2``).

    >>> [c.name for c in negative_controls()][:2]
    ['control: Laplace at half scale', 'control: histogram, scale ε']
    """
    eps = check_epsilon(epsilon)
    hist_eps = min(eps, 1.0) / 2.0
    cases: list[Any] = [
        laplace_half_scale(eps),
        histogram_scale_epsilon(hist_eps),
        noisy_max_value(eps),
        naive_float_laplace(eps),
        name_and_shame(eps),
    ]
    assert all(math.isfinite(c.claimed_epsilon) for c in cases)
    return cases
