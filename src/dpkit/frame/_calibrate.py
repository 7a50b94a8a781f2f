"""Sensitivities from the contribution bounds, and the noise that pays for a grouped query.

After bounding, one privacy unit owns at most ``L∞`` rows in each group, rows in at most ``L0``
groups, and (optionally) at most ``L1`` rows in all. For a measure whose per-row integer lies in
``[-a, a]``, the unit's contribution to the vector of per-group (per-bucket) sums therefore has
at most ``c = a · min(L∞, L1)`` in any coordinate and at most ``T = a · r · min(L0·L∞, L1)`` in
all, with ``r`` the coordinates one row touches (1, or the levels of a quantile tree). The ℓ1
sensitivity under add/remove-one-unit is ``T``; the ℓ2 sensitivity is at most ``√(T·c)`` (the
sum of squares of non-negative entries at most ``c`` adding to ``T`` is largest when they are
``T/c`` entries equal to ``c``). Replacing a unit removes its rows and adds others, possibly in
other groups: both sensitivities double (Kamath 2020, bounded vs unbounded neighbours).

Noise: exact discrete Laplace of scale ``T/ε_j`` per coordinate (ε_j-DP for the vector, the
ℓ1 Laplace mechanism; Dwork & Roth 2014) or exact discrete Gaussian with ``ρ_j = Δ₂²/(2σ²)``-zCDP
(Canonne, Kamath and Steinke 2020, Theorem 14), with the budget split equally between the
measures. Fixed-point exponents are chosen from the noise scale, before any data are read, so
that the noise is about ``2^20`` output units wide: exact integer sums at a resolution far below
the noise, with room for 2^33 rows per group in int64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from dpkit._checks import check_positive
from dpkit.accounting import ApproxDPEvent, ComposedEvent, Event, PureDPEvent, ZCDPEvent
from dpkit.accounting._costs import rho_for
from dpkit.errors import PrivacyParameterError
from dpkit.frame._aggs import Measure
from dpkit.frame._selection import KeySelection, count_threshold
from dpkit.mechanisms._tails import discrete_gaussian_quantile, discrete_laplace_quantile
from dpkit.noise import sampled_sigma
from dpkit.noise._discrete import DLAP_MAX_NUMERATOR
from dpkit.noise._scales import rational_at_least

__all__ = ["Bounding", "MeasureNoise", "NoisePlan", "noise_plan", "rho_for", "zcdp_plan"]

_SLACK = 1.0 - 1e-9  # targets are shaved so that float sums of the parts stay below the budget
_WIDTH_BITS = 20  # noise is about 2^20 output units wide
_ROW_BITS = 30  # per-row fixed-point integers stay within ±2^30 (int64 sums: 2^33 rows)
_MAX_SIGMA = float(1 << 30)  # the widest discrete Gaussian dpkit.noise samples


@dataclass(frozen=True)
class Bounding:
    """The public contribution bounds: rows per (unit, group), groups per unit, rows per unit."""

    max_rows: int
    max_groups: int
    max_rows_per_unit: int | None
    replace: bool

    def caps(self, measure: Measure) -> tuple[int, int, int]:
        """``(c, T, coordinates)`` for a per-row integer of magnitude 1 (see module notes)."""
        l1 = self.max_rows_per_unit
        if measure.kind == "units":
            # units are counted on the (unit, key) pairs kept by L0, before the L1 row cap
            c, total = 1, self.max_groups
        else:
            rows = self.max_rows * self.max_groups
            c = self.max_rows if l1 is None else min(self.max_rows, l1)
            total = (rows if l1 is None else min(rows, l1)) * measure.levels
        coords = -(-total // c)
        return c, total, coords


@dataclass(frozen=True)
class MeasureNoise:
    """How one measure is made an integer and noised."""

    measure: Measure
    exponent: int  # per-row integer = f(x) · 2**exponent, stochastically rounded
    row_max: int  # |per-row integer| ≤ row_max
    l1: int  # ℓ1 sensitivity of the vector of sums, integer units
    l2: float  # ℓ2 sensitivity, integer units (rounded up)
    coordinates: int  # coordinates one unit can change
    kind: str  # "laplace" or "gaussian"
    scale: Fraction  # b or σ in integer units
    epsilon: float  # its share (Laplace: ε_j actually spent)
    rho: float  # its share (Gaussian: ρ_j actually spent)

    @property
    def unit(self) -> float:
        return math.ldexp(1.0, -self.exponent)

    @property
    def pair_clip(self) -> tuple[int, int] | None:
        """Integer bounds of a unit's total in a group (``unit_total`` at this exponent)."""
        return pair_clip(self.measure, self.exponent)

    @property
    def real_scale(self) -> float:
        """The noise scale in the measure's real units (b or σ)."""
        return float(self.scale) * self.unit

    @property
    def sd(self) -> float:
        """Standard deviation of the noise per coordinate, real units."""
        if self.kind == "gaussian":
            return self.real_scale
        p = math.exp(-1.0 / float(self.scale))
        return math.sqrt(2.0 * p) / (1.0 - p) * self.unit

    def half_width(self, alpha: float) -> float:
        """h with P(|noise| > h) ≤ alpha per coordinate, real units."""
        if self.kind == "gaussian":
            m = discrete_gaussian_quantile(float(self.scale), alpha)
        else:
            m = discrete_laplace_quantile(float(self.scale), alpha)
        # Rows are rounded to the fixed-point grid stochastically (unbiased; sd ≤ √n/2 units
        # for n rows, at most 1/32 of the ≈2^20-unit noise), so it is not added here.
        return m * self.unit


@dataclass(frozen=True)
class NoisePlan:
    """Calibrated noise for every measure, key selection, and the event paying for all of it."""

    measures: tuple[MeasureNoise, ...]
    selection: KeySelection | None
    event: Event
    epsilon: float
    delta: float
    rho: float | None = None  # the zCDP budget, when the query was given one

    def of(self, measure: Measure) -> MeasureNoise:
        for m in self.measures:
            if m.measure == measure:
                return m
        raise KeyError(measure.name)  # pragma: no cover - internal


def _exponent(measure: Measure, real_scale_per_unit_a: float) -> int:
    """Fixed-point exponent: noise ≈ 2^20 units wide, per-row integers within ±2^30."""
    if measure.kind in ("rows", "units", "bucket"):
        return 0
    cap = _ROW_BITS - math.frexp(measure.max_abs)[1]
    want = _WIDTH_BITS - math.frexp(real_scale_per_unit_a * measure.max_abs)[1]
    return min(cap, want)


def pair_clip(measure: Measure, k: int) -> tuple[int, int] | None:
    """``unit_total`` in integer units at exponent ``k``, rounded inwards (so that a clamped
    total is within ``max(|lower|, |upper|)`` of 0 in real units)."""
    if measure.unit_total is None:
        return None
    lo, hi = measure.unit_total
    a, b = math.ceil(math.ldexp(lo, k)), math.floor(math.ldexp(hi, k))
    return (a, b) if a <= b else (a, a)  # (a window narrower than one unit: its ceiling)


def _caps(
    m: Measure, bounding: Bounding, k: int, a: int, caps: tuple[int, int, int]
) -> tuple[int, int]:
    """``(c, T)`` in integer units: a unit's largest change to one coordinate and to all.

    A ``unit_total`` bounds a unit's change to each group's sum by its larger end, whatever
    its rows; the smaller of that and the rows' bound holds."""
    c, total, _ = caps
    clip = pair_clip(m, k)
    if clip is None:
        return c * a, total * a
    per_group = min(c * a, max(abs(clip[0]), abs(clip[1])))
    return per_group, min(total * a, bounding.max_groups * per_group)


def _row_max(measure: Measure, k: int) -> int:
    if measure.kind != "value":
        return 1
    assert measure.bounds is not None
    if measure.transform == "plain":
        lo, hi = measure.bounds
    elif measure.transform == "centred":
        lo, hi = -1.0, 1.0
    else:
        lo, hi = 0.0, 1.0
    return max(abs(math.floor(math.ldexp(lo, k))), abs(math.floor(math.ldexp(hi, k))))


def _check_row_max(m: Measure, a: int, epsilon: float) -> None:
    """Refuse (before anything is charged) a measure whose per-row integers are all 0: the noise
    is then over 2^20 times its bounds, and its zero sensitivity would divide by zero."""
    if a < 1:
        raise PrivacyParameterError(
            f"epsilon={epsilon} is too small for the bounds of {m.kind} measures (the noise "
            "would be over a million times their width); use a larger epsilon or tighter "
            "contribution bounds."
        )


def _check_laplace(scale: Fraction, m: Measure, epsilon: float) -> None:
    """Refuse at planning a Laplace scale the exact sampler would refuse when drawing, i.e.
    after the charge (the Gaussian branch checks ``_MAX_SIGMA`` for the same reason)."""
    try:
        rational_at_least(scale, "scale", max_numerator=DLAP_MAX_NUMERATOR)
    except PrivacyParameterError:
        raise PrivacyParameterError(
            f"epsilon={epsilon} needs Laplace noise wider than dpkit samples for {m.kind} "
            "measures; use a larger epsilon or tighter contribution bounds."
        ) from None


def noise_plan(
    measures: Sequence[Measure],
    bounding: Bounding,
    *,
    epsilon: float,
    delta: float,
    noise: str,
    selection: KeySelection | None,
    rho: float | None = None,
) -> NoisePlan:
    """Split (ε, δ) between key selection and the measures and calibrate every noise scale
    (or, with ``rho``, a zCDP budget between the measures' Gaussian noise)."""
    eps_m, delta_m = epsilon, delta
    if selection is not None:
        eps_m -= selection.epsilon
        delta_m -= selection.delta
    eps_m *= _SLACK
    factor = 2 if bounding.replace else 1
    out: list[MeasureNoise] = []
    share = 1.0 / len(measures)
    if rho is not None:
        rho_total = rho * _SLACK
    else:
        rho_total = rho_for(eps_m, delta_m) if noise == "gaussian" else 0.0
    if (eps_m * share if noise == "laplace" else rho_total * share) <= 0:
        # a subnormal ε (5e-324) split between measures underflows to 0: no noise is wide enough
        raise PrivacyParameterError(
            "epsilon is too small to be split between the measures (a share of it is 0 in "
            "floating point); use a larger epsilon."
        )
    for m in measures:
        caps = bounding.caps(m)
        c, total, coords = caps
        coords *= factor
        if m.unit_total is not None:  # the exponent from the smaller of the two caps
            ends = max(abs(v) for v in m.unit_total) / m.max_abs
            total = min(total, bounding.max_groups * ends)  # type: ignore[assignment]
        if noise == "laplace":
            eps_j = eps_m * share
            k = _exponent(m, factor * total / eps_j)
            a = _row_max(m, k)
            _check_row_max(m, a, epsilon)
            c_int, t_int = _caps(m, bounding, k, a, caps)
            if t_int < 1:
                _check_row_max(m, 0, epsilon)
            l1 = factor * t_int
            scale = Fraction(l1) / Fraction(eps_j)
            _check_laplace(scale, m, epsilon)
            spent = float(Fraction(l1) / scale)
            out.append(MeasureNoise(m, k, a, l1, float(l1), coords, "laplace", scale, spent, 0.0))
        else:
            rho_j = rho_total * share
            l2_unit = factor * math.sqrt(total * min(c, total))  # (c ≤ total but for unit totals)
            k = _exponent(m, l2_unit / math.sqrt(2.0 * rho_j))
            a = _row_max(m, k)
            _check_row_max(m, a, epsilon)
            c_int, t_int = _caps(m, bounding, k, a, caps)
            if t_int < 1:
                _check_row_max(m, 0, epsilon)
            # √(T·c) in integer units, rounded up (sum of squares of entries ≤ c adding to T)
            if m.unit_total is None:
                l2 = math.nextafter(l2_unit * a, math.inf)
            else:
                l2 = math.nextafter(factor * math.sqrt(t_int * c_int), math.inf)
            if coords == 1 or t_int == c_int:
                l2 = float(factor * t_int)  # exactly an integer then
            sigma = sampled_sigma(math.nextafter(l2 / math.sqrt(2.0 * rho_j), math.inf))
            if sigma > _MAX_SIGMA:
                raise PrivacyParameterError(
                    f"epsilon={epsilon} needs Gaussian noise wider than dpkit samples for "
                    f"{m.kind} measures; use a larger epsilon or tighter contribution bounds."
                )
            spent_rho = l2 * l2 / (2.0 * sigma * sigma)
            out.append(
                MeasureNoise(m, k, a, factor * t_int, l2, coords, "gaussian",
                             Fraction(sigma), 0.0, spent_rho)
            )  # fmt: skip
    if selection is not None and selection.method == "count":
        return _count_selected(out, bounding, selection, epsilon, delta)
    events: list[Event] = []
    if selection is not None:
        events.append(selection.event)
    if noise == "laplace":
        events.append(PureDPEvent(epsilon=math.fsum(m.epsilon for m in out)))
    else:
        events.append(ZCDPEvent(rho=math.fsum(m.rho for m in out) * (1.0 + 1e-12)))
    # (no relation here: the query's release declares its table's at the charge)
    event = events[0] if len(events) == 1 else ComposedEvent(events=tuple(events))
    return NoisePlan(tuple(out), selection, event, epsilon, delta, rho)


def _count_selected(
    out: list[MeasureNoise],
    bounding: Bounding,
    selection: KeySelection,
    epsilon: float,
    delta: float,
) -> NoisePlan:
    """The plan whose keys are selected by thresholding its own noisy row count.

    The Laplace mechanism on every measure (ε in all, the key set of both neighbours) plus the
    event that a key only one of them has passes τ (probability ≤ δ, ``_selection`` module
    notes): (ε, δ)-DP as one event, nothing split off for a separate selection count.
    """
    rows = [mn for mn in out if mn.measure.kind == "rows"]
    if not rows or any(mn.kind != "laplace" for mn in out):
        raise PrivacyParameterError(
            "selection='count' thresholds the query's own row count: it needs count() among "
            "the aggregations and Laplace noise."
        )
    mn = rows[0]
    if mn.exponent != 0:  # pragma: no cover - a count's per-row integer is 1 (exponent 0)
        raise PrivacyParameterError("selection='count' needs an integer count.")
    c, _, _ = bounding.caps(mn.measure)  # a count's rows are integers of exponent 0
    # keys one unit can add: its L0 pairs, even those the L1 row cap left with no row (a
    # candidate key with a count of 0), so not min(L0, L1)
    tau = count_threshold(mn.scale, per_key=c, keys=bounding.max_groups, delta=selection.delta)
    sel = replace(selection, scale=mn.scale, threshold=tau)
    event = ApproxDPEvent(epsilon=math.fsum(m.epsilon for m in out), delta=selection.delta)
    return NoisePlan(tuple(out), sel, event, epsilon, delta, None)


def zcdp_plan(
    measures: Sequence[Measure],
    bounding: Bounding,
    public_keys: bool,
    *,
    epsilon: object,
    delta: object,
    noise: str | None,
    rho: object,
) -> NoisePlan:
    """The plan of a query given a zCDP budget ρ: Gaussian noise on every measure, the costs
    ``Δ₂²/(2σ²)`` adding up to at most ρ (Bun and Steinke 2016), paid in ρ. Public keys only:
    private key selection is an (ε, δ) mechanism with no zCDP bound."""
    if epsilon is not None or delta not in (None, 0, 0.0):
        raise PrivacyParameterError(
            "give either rho= (zCDP, Gaussian noise) or epsilon= (with delta=), not both."
        )
    if noise not in (None, "gaussian"):
        raise PrivacyParameterError("a rho= budget pays for Gaussian noise; leave noise out.")
    if not public_keys:
        raise PrivacyParameterError(
            "rho= needs public keys (private key selection is (epsilon, delta)-DP); pass "
            "public_keys, or epsilon= and delta=."
        )
    r = check_positive(rho, "rho")
    return noise_plan(measures, bounding, epsilon=0.0, delta=0.0, noise="gaussian",
                      selection=None, rho=r)  # fmt: skip
