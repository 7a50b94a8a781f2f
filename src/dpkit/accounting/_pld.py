"""Privacy loss distribution (PLD) accounting: discretised PLDs composed by FFT.

The privacy loss of a pair (P, Q) is L = log(P(X)/Q(X)) with X ~ P; the pair is (ε, δ)-DP for
δ(ε) = E[(1 - e^{ε - L})₊] + P[L = ∞], and the loss of a composition is the sum of the losses, so
its distribution is the convolution of theirs (Sommer, Meiser & Mohammadi 2019; Koskela, Jälkö &
Honkela 2020; Doroshenko et al. 2022). Each event is discretised pessimistically
(:mod:`dpkit.accounting._pld_pairs`), self-compositions are done by repeated squaring, convolutions
by real FFT. After each convolution, lower-tail mass below 1e-15 is moved *up* to the first kept
loss, upper-tail mass below 1e-15 is moved to +∞, and any negative round-off is added to the
+∞ mass, so every step can only increase δ(ε).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import fft

from dpkit.accounting._events import Event
from dpkit.accounting._pld_pairs import Pmf, Unsupported, event_pmfs

__all__ = ["PLD", "pld_compose"]

_TAIL = 1e-15
_KEEP_TOP = 64  # top-tail bins kept in place when truncating (cheap; see _truncate)
_MAX_COMPOSED = 1 << 23
FLOOR = 2.0**-52


def _truncate(pmf: Pmf) -> Pmf:
    p = pmf.probs
    neg = p < 0
    inf = pmf.inf
    if neg.any():
        inf += float(-p[neg].sum())
        p = np.where(neg, 0.0, p)
    c = np.cumsum(p)
    lo = int(np.searchsorted(c, _TAIL, side="right"))
    lo = min(lo, p.size - 1)
    r = np.cumsum(p[::-1])
    drop_hi = int(np.searchsorted(r, _TAIL, side="right"))
    if drop_hi <= _KEEP_TOP:
        # A few top bins (e.g. the ulp left over by splitting an atom that lies on the grid) are
        # kept where they are rather than moved to +∞: that would make δ(ε) exceed an event's own
        # δ by float rounding, and ε = ∞ at exactly that δ.
        drop_hi = 0
    hi = p.size - drop_hi
    if hi <= lo:
        hi = lo + 1
    out = p[lo:hi].copy()
    out[0] += c[lo - 1] if lo > 0 else 0.0
    inf += float(r[drop_hi - 1]) if drop_hi > 0 and hi < p.size else 0.0
    return Pmf(pmf.offset + lo, out, min(inf, 1.0))


def _convolve(a: Pmf, b: Pmf) -> Pmf:
    n = a.probs.size + b.probs.size - 1
    if n > _MAX_COMPOSED:
        raise Unsupported("the composed loss distribution is too wide for the grid")
    m = fft.next_fast_len(n, real=True)
    if min(a.probs.size, b.probs.size) < 64:
        out = np.convolve(a.probs, b.probs)
    else:
        out = fft.irfft(fft.rfft(a.probs, m) * fft.rfft(b.probs, m), m)[:n]
    # 1 - (1 - a)(1 - b), exact when either is 0 (the same mass, not one perturbed by rounding),
    # and otherwise rounded up.
    if a.inf == 0.0 or b.inf == 0.0:
        inf = a.inf + b.inf
    else:
        inf = math.nextafter(a.inf + b.inf - a.inf * b.inf, math.inf)
    # FFT round-off is of order ε_mach·‖a‖₂‖b‖₂ per entry; entries below it are noise. Their
    # total is moved to +∞ so that the tails can be truncated and δ only grows.
    floor = FLOOR * float(np.linalg.norm(a.probs) * np.linalg.norm(b.probs))
    small = np.abs(out) < floor
    inf += float(np.abs(out[small]).sum())
    out[small] = 0.0
    return _truncate(Pmf(a.offset + b.offset, out, inf))


def _power(pmf: Pmf, k: int) -> Pmf:
    result: Pmf | None = None
    base = _truncate(pmf)
    while True:
        if k & 1:
            result = base if result is None else _convolve(result, base)
        k >>= 1
        if not k:
            break
        base = _convolve(base, base)
    assert result is not None
    return result


def _delta(pmf: Pmf, h: float, epsilon: float) -> float:
    loss = (pmf.offset + np.arange(pmf.probs.size)) * h
    m = loss > epsilon
    val = pmf.inf + float(np.sum(pmf.probs[m] * -np.expm1(epsilon - loss[m])))
    # The float sum can land an ulp below the exact δ of the discretised (pessimistic) PLD, as
    # for a single Laplace at ε = 0.3; round up by more than its error, as ε is rounded up.
    return min(1.0, math.nextafter(val, math.inf) * (1.0 + 1e-12))


def _epsilon(pmf: Pmf, h: float, delta: float) -> float:
    if pmf.inf > delta:
        return math.inf
    loss = (pmf.offset + np.arange(pmf.probs.size)) * h
    m = loss > 0
    lp, pp = loss[m], pmf.probs[m]
    if lp.size == 0:
        return 0.0
    # Suffix sums A_j = inf + Σ_{i≥j} p_i, B_j = Σ_{i≥j} p_i e^{-ε_i}; δ(ε) = A_j - e^ε B_j on
    # [ε_{j-1}, ε_j]. B_j is kept as its logarithm: e^{-ε_i} underflows and e^{ε_j} overflows
    # once losses pass ~709, which used to clamp ε there (an underestimate). e^{ε_j} B_{j+1}
    # = exp(ε_j + log B_{j+1}) ≤ Σ p_i ≤ 1 never overflows.
    a = pmf.inf + np.cumsum(pp[::-1])[::-1]
    with np.errstate(divide="ignore"):
        log_terms = np.log(pp) - lp
    log_b = np.logaddexp.accumulate(log_terms[::-1])[::-1]
    next_log_b = np.append(log_b[1:], -np.inf)
    at_grid = np.append(a[1:], pmf.inf) - np.exp(lp + next_log_b)  # δ(ε_j)
    if a[0] - math.exp(float(log_b[0])) <= delta:
        return 0.0
    j = int(np.argmax(at_grid <= delta))
    if not at_grid[j] <= delta:  # pragma: no cover - at_grid[-1] = inf mass ≤ δ
        return math.inf
    if log_b[j] == -np.inf or a[j] <= delta:
        eps = float(lp[j])
    else:
        eps = math.log(a[j] - delta) - float(log_b[j])
        lo_edge = float(lp[j - 1]) if j > 0 else 0.0
        eps = min(max(eps, lo_edge), float(lp[j]))
    eps = math.nextafter(eps, math.inf) + 1e-12 * abs(eps)
    if not math.isfinite(eps):  # pragma: no cover - defensive: never report a NaN as a bound
        return math.inf
    return max(eps, 0.0)


class PLD:
    """A composed, discretised privacy loss distribution (both directions of neighbouring).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, PoissonSubsampledEvent
    >>> step = PoissonSubsampledEvent(GaussianEvent(sigma=4.0), sampling_rate=0.01)
    >>> round(pld_compose([(step, 10_000)]).epsilon(1e-5), 2)
    0.95
    """

    def __init__(self, remove: Pmf, add: Pmf | None, h: float) -> None:
        self._remove, self._add, self.h = remove, add, h

    def delta(self, epsilon: float) -> float:
        """δ(ε) of the composition (an upper bound on the exact value)."""
        d = _delta(self._remove, self.h, epsilon)
        if self._add is not None:
            d = max(d, _delta(self._add, self.h, epsilon))
        return d

    def epsilon(self, delta: float) -> float:
        """Smallest ε with δ(ε) ≤ ``delta`` (an upper bound on the exact value)."""
        e = _epsilon(self._remove, self.h, delta)
        if self._add is not None:
            e = max(e, _epsilon(self._add, self.h, delta))
        return e


def pld_compose(groups: Sequence[tuple[Event, int]], *, discretization: float = 1e-4) -> PLD:
    """PLD of the composition of ``count`` runs of each event in ``groups``.

    Raises :class:`Unsupported` when an event has no PLD representation.
    """
    h = float(discretization)
    rem_total: Pmf | None = None
    add_total: Pmf | None = None
    any_add = False
    parts = []
    for event, count in groups:
        rem, add = event_pmfs(event, h)
        any_add |= add is not None
        parts.append((rem, add, count))
    for rem, add, count in parts:
        r = _power(rem, count)
        a = r if add is None else _power(add, count)
        rem_total = r if rem_total is None else _convolve(rem_total, r)
        if any_add:
            add_total = a if add_total is None else _convolve(add_total, a)
    if rem_total is None:
        raise Unsupported("no events")
    return PLD(rem_total, add_total, h)
