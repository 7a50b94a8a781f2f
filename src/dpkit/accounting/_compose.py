"""Composition: turn events into ε(δ) and δ(ε) by basic, optimal, zCDP, RDP or PLD accounting."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from scipy import special

from dpkit._checks import check_delta, check_epsilon, check_positive
from dpkit.accounting._bounds import approx_bound, is_scalar_integer, pure_epsilon, zcdp_rho
from dpkit.accounting._events import ApproxDPEvent, Event, flatten
from dpkit.accounting._guarantees import zcdp_delta, zcdp_epsilon
from dpkit.accounting._pld import pld_compose
from dpkit.accounting._pld_pairs import Unsupported
from dpkit.accounting._rdp import ORDERS, rdp_curve, rdp_delta, rdp_epsilon
from dpkit.errors import DPKitError, PrivacyParameterError

__all__ = ["Composition", "compose", "delta_of", "epsilon_of"]

_NUMERIC_FAILURES = (ArithmeticError, ValueError)
"""What a method's numerics may raise at extreme parameters (σ = 1e-300, δ = 1 − 2⁻⁵³, k·ε past
the float range): SciPy root finders, ``math`` domain errors, and NumPy floating-point errors,
which are raised (not warned) inside :func:`_guarded`."""


def _guarded(fn: Callable[[], float], fallback: float) -> float:
    """``fn()``, or the safe-side ``fallback`` (ε = ∞, δ = 1) when its numerics fail.

    A method that overflows or meets a domain error has proved nothing, so it answers with the
    vacuous bound and ``"auto"`` takes another method's; NaN is treated the same way. Overflow
    is made an error rather than a silent ``inf`` so that it can never clamp a result from below.
    """
    try:
        with np.errstate(over="raise", divide="raise", invalid="raise"):
            value = float(fn())
    except DPKitError:
        raise
    except _NUMERIC_FAILURES:
        return fallback
    return fallback if math.isnan(value) else value


METHODS = ("auto", "pld", "rdp", "zcdp", "basic", "optimal")
Groups = list[tuple[Event, int]]


class _Method:
    def epsilon(self, delta: float) -> float:
        raise NotImplementedError

    def delta(self, epsilon: float) -> float:
        raise NotImplementedError


class _Basic(_Method):
    """Basic composition: ε and δ add (Dwork et al. 2006; the "Approximate Differential Privacy"
    notes §"Composition")."""

    def __init__(self, groups: Groups) -> None:
        self.pure = 0.0
        self.fixed_delta = 0.0
        self.flexible: Groups = []
        for e, k in groups:
            eps = pure_epsilon(e)
            if eps is not None:
                self.pure += k * eps
            elif isinstance(e, ApproxDPEvent):
                self.pure += k * e.epsilon
                self.fixed_delta += k * e.delta
            else:
                if approx_bound(e, 0.5) is None:
                    raise Unsupported(f"no (ε, δ) bound for {type(e).__name__}")
                self.flexible.append((e, k))
        self.n_flexible = sum(k for _, k in self.flexible)

    def epsilon(self, delta: float) -> float:
        rest = delta - self.fixed_delta
        if rest < 0 or (self.flexible and rest <= 0):
            return math.inf
        total = self.pure
        for e, k in self.flexible:
            bound = approx_bound(e, rest / self.n_flexible)
            if bound is None:
                return math.inf
            total += k * bound[0]
        return math.nextafter(total, math.inf)

    def delta(self, epsilon: float) -> float:
        return _invert_epsilon(self.epsilon, epsilon)


class _Optimal(_Method):
    """Exact k-fold composition of one (ε₀, δ₀)-DP mechanism (Kairouz, Oh & Viswanath 2015,
    Theorem 3.3; Murtagh & Vadhan 2016):
    δ(ε) = 1 - (1-δ₀)^k (1 - Σ_i C(k,i) [e^{(k-i)ε₀} - e^{ε+iε₀}]₊ / (1+e^{ε₀})^k)."""

    def __init__(self, groups: Groups) -> None:
        if len(groups) != 1:
            raise Unsupported("optimal composition needs identical (ε, δ) events")
        e, self.k = groups[0]
        eps0 = pure_epsilon(e)
        if eps0 is not None:
            self.eps0, self.delta0 = eps0, 0.0
        elif isinstance(e, ApproxDPEvent):
            self.eps0, self.delta0 = e.epsilon, e.delta
        else:
            raise Unsupported("optimal composition needs pure or approximate DP events")

    def delta(self, epsilon: float) -> float:
        k, e0 = self.k, self.eps0
        i = np.arange(k + 1, dtype=np.float64)
        logb = special.gammaln(k + 1) - special.gammaln(i + 1) - special.gammaln(k - i + 1)
        a = (k - i) * e0
        b = epsilon + i * e0
        m = a > b
        terms = logb[m] + a[m] + np.log(-np.expm1(b[m] - a[m])) - k * np.logaddexp(0.0, e0)
        inner = float(np.exp(special.logsumexp(terms))) if terms.size else 0.0
        lo = k * math.log1p(-self.delta0)
        return min(1.0, -math.expm1(lo) + math.exp(lo) * inner)

    def epsilon(self, delta: float) -> float:
        return _invert_delta(self.delta, delta, self.k * self.eps0)


class _ZCDP(_Method):
    """zCDP: ρ adds (Bun & Steinke 2016, Lemma 2.3); converted by Canonne, Kamath & Steinke."""

    def __init__(self, groups: Groups) -> None:
        rho = 0.0
        for e, k in groups:
            r = zcdp_rho(e)
            if r is None:
                raise Unsupported(f"no zCDP bound for {type(e).__name__}")
            rho += k * r
        self.rho = math.nextafter(rho, math.inf)

    def epsilon(self, delta: float) -> float:
        return zcdp_epsilon(self.rho, delta)

    def delta(self, epsilon: float) -> float:
        return zcdp_delta(self.rho, epsilon)


class _RDP(_Method):
    """RDP: curves add (Mironov 2017, Prop. 1); converted by Balle et al. (2020, Theorem 21) at
    the best order of the grid and of a finer search around it."""

    def __init__(self, groups: Groups) -> None:
        # The events are kept so that the conversion can evaluate the summed curve between the
        # grid's orders; the grid curve itself is what composition adds.
        self.groups = list(groups)
        curve = self.evaluate(ORDERS)
        if not np.isfinite(curve).any():
            raise Unsupported("no RDP bound")
        self.curve = curve

    def evaluate(self, orders: np.ndarray) -> np.ndarray:
        """The composed curve at any orders (the sum of each event's curve, times its count)."""
        total = np.zeros(np.shape(orders))
        for e, k in self.groups:
            total = total + k * rdp_curve(e, orders)
        return np.asarray(total, dtype=np.float64)

    def epsilon(self, delta: float) -> float:
        return rdp_epsilon(self.curve, delta, evaluate=self.evaluate)

    def delta(self, epsilon: float) -> float:
        return rdp_delta(self.curve, epsilon, evaluate=self.evaluate)


class _PLDMethod(_Method):
    def __init__(self, groups: Groups, discretization: float) -> None:
        self.pld = pld_compose(groups, discretization=discretization)

    def epsilon(self, delta: float) -> float:
        return self.pld.epsilon(delta)

    def delta(self, epsilon: float) -> float:
        return self.pld.delta(epsilon)


def _invert_delta(delta_fn: Callable[[float], float], target: float, hi: float) -> float:
    """Smallest ε (up to 1e-12 relative, rounded up) with a decreasing δ(ε) ≤ target."""
    if delta_fn(0.0) <= target:
        return 0.0
    hi = max(hi, 1e-6)
    while delta_fn(hi) > target:
        hi *= 2
        if hi > 1e9:
            return math.inf
    lo = 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if delta_fn(mid) <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def _invert_epsilon(eps_fn: Callable[[float], float], target: float) -> float:
    """Smallest δ (rounded up) with a decreasing ε(δ) ≤ target, by bisection in log δ."""
    if eps_fn(1.0 - 1e-16) > target:
        return 1.0
    lo, hi = -745.0, math.log(1.0 - 1e-16)
    if eps_fn(math.exp(lo)) <= target:
        return math.exp(lo)
    for _ in range(200):
        mid = (lo + hi) / 2
        if eps_fn(math.exp(mid)) <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-10:
            break
    return min(1.0, math.exp(hi))


_BUILDERS: dict[str, Callable[[Groups, float], _Method]] = {
    "basic": lambda g, h: _Basic(g),
    "optimal": lambda g, h: _Optimal(g),
    "zcdp": lambda g, h: _ZCDP(g),
    "rdp": lambda g, h: _RDP(g),
    "pld": lambda g, h: _PLDMethod(g, h),
}


@dataclass
class Composition:
    """The privacy of a composition of events, as computed by one or more methods.

    ``epsilon(delta)`` and ``delta(epsilon)`` are upper bounds; with ``method="auto"`` they are the
    smallest over every applicable method (each is valid, so their minimum is).
    """

    method: str
    methods: dict[str, _Method] = field(repr=False)

    def epsilon(self, delta: float = 0.0) -> float:
        """Smallest ε such that the composition is (ε, ``delta``)-DP (never underestimated)."""
        d = check_delta(delta)
        return min(_guarded(partial(m.epsilon, d), math.inf) for m in self.methods.values())

    def delta(self, epsilon: float) -> float:
        """Smallest δ such that the composition is (``epsilon``, δ)-DP (never underestimated)."""
        e = check_positive(epsilon, "epsilon", allow_zero=True)
        return min(_guarded(partial(m.delta, e), 1.0) for m in self.methods.values())


def compose(
    events: Event | Iterable[Event], *, method: str = "auto", discretization: float = 1e-4
) -> Composition:
    """Compose events (sequentially, possibly adaptively chosen) and return their privacy.

    Methods
    -------
    ``"basic"``: ε and δ add; Gaussian-type events share δ equally (Dwork et al. 2006).
    ``"optimal"``: exact composition of k identical (ε₀, δ₀)-DP events (Kairouz, Oh & Viswanath
    2015). ``"zcdp"``: ρ adds, converted with Canonne, Kamath & Steinke (2020). ``"rdp"``: Rényi
    curves add on a grid of orders (Mironov 2017; subsampled Gaussian by Mironov, Talwar & Zhang
    2019, at fractional orders too), converted with Balle et al. (2020) at the best order of the
    grid and of a search between its neighbours. ``"pld"``: privacy loss distributions,
    pessimistically discretised with step ``discretization`` and composed by FFT (Koskela et al.
    2020; Doroshenko et al. 2022). ``"auto"``: every applicable method, and the smallest answer.

    Privacy guarantee: the events together are (ε, δ)-DP for any (ε, δ) on the returned curve,
    also when each event was chosen after seeing earlier results (adaptive composition holds for
    each method when the events themselves are fixed in advance, as here).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, LaplaceEvent, SelfComposedEvent
    >>> compose([LaplaceEvent(scale=6.0)] * 6, method="basic").epsilon()
    1.0000000000000002
    >>> c = compose(SelfComposedEvent(GaussianEvent(sigma=10.0), count=100))
    >>> round(c.epsilon(1e-5), 3)    # exactly one Gaussian with σ = 1: 4.377
    4.377
    """
    if method not in METHODS:
        raise PrivacyParameterError(f"method must be one of {', '.join(METHODS)}; got {method!r}.")
    h = check_positive(discretization, "discretization")
    groups = flatten(events)
    names = [m for m in METHODS[1:] if method in ("auto", m)]
    built: dict[str, _Method] = {}
    reasons = []
    for name in names:
        try:
            with np.errstate(over="raise", divide="raise", invalid="raise"):
                built[name] = _BUILDERS[name](groups, h)
        except Unsupported as exc:
            reasons.append(f"{name}: {exc}")
        except DPKitError:
            raise
        except _NUMERIC_FAILURES:
            reasons.append(f"{name}: the parameters are outside its numerical range")
    if not built:
        raise PrivacyParameterError(
            f"method {method!r} cannot account for these events ({'; '.join(reasons)}); "
            'try method="auto".'
        )
    return Composition(method, built)


def epsilon_of(
    events: Event | Iterable[Event], *, delta: float = 0.0, method: str = "auto"
) -> float:
    """ε of an event or a composition of events at the given δ.

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, LaplaceEvent
    >>> epsilon_of(LaplaceEvent(scale=2.0))
    0.5
    >>> round(epsilon_of(GaussianEvent(sigma=3.7306316348159374), delta=1e-5), 6)
    1.0
    """
    d = check_delta(delta)
    if d == 0:
        # Only pure guarantees survive δ = 0, and for them every method gives the plain sum.
        groups = flatten(events)
        parts = [pure_epsilon(e) for e, _ in groups]
        if any(p is None for p in parts):
            return math.inf
        if len(groups) == 1 and groups[0][1] == 1:
            return float(parts[0])  # type: ignore[arg-type]
        total = math.fsum(k * float(p) for (_, k), p in zip(groups, parts, strict=True))  # type: ignore[arg-type]
        return math.nextafter(total, math.inf)
    single = _single(events)
    if single is not None and method == "auto":
        exact = _guarded(lambda: _nan_if_none(_single_epsilon(single, d)), math.nan)
        if not math.isnan(exact):  # NaN: no exact curve, or its numerics failed
            return exact
    return compose(events, method=method).epsilon(d)


def delta_of(events: Event | Iterable[Event], *, epsilon: float, method: str = "auto") -> float:
    """δ of an event or a composition of events at the given ε.

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent
    >>> round(delta_of(GaussianEvent(sigma=1.0), epsilon=1.0), 6)   # Balle & Wang, exact
    0.126937
    """
    e = check_epsilon(epsilon)
    single = _single(events)
    if single is not None and method == "auto":
        from dpkit.accounting._discrete_gaussian import discrete_gaussian_delta
        from dpkit.accounting._events import DiscreteGaussianEvent, GaussianEvent
        from dpkit.accounting._gaussian import gaussian_delta

        if isinstance(single, GaussianEvent):
            g = single
            return _guarded(lambda: gaussian_delta(e, g.sensitivity / g.sigma), 1.0)
        if isinstance(single, DiscreteGaussianEvent) and is_scalar_integer(single):
            dg = single
            return _guarded(lambda: discrete_gaussian_delta(e, dg.sigma, int(dg.sensitivity)), 1.0)
        pe = pure_epsilon(single)
        if pe is not None and pe <= e:
            return 0.0
    return compose(events, method=method).delta(e)


def _single(events: Event | Iterable[Event]) -> Event | None:
    groups = flatten(events)
    if len(groups) == 1 and groups[0][1] == 1:
        return groups[0][0]
    return None


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value


def _single_epsilon(event: Event, delta: float) -> float | None:
    from dpkit.accounting._events import DiscreteGaussianEvent, GaussianEvent

    if isinstance(event, GaussianEvent | DiscreteGaussianEvent):
        bound = approx_bound(event, delta)
        return None if bound is None else bound[0]
    return None
