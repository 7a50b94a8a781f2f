"""Events: data-independent descriptions of one mechanism run, which accountants turn into ε.

Each event records the noise and the sensitivity of one release (the sensitivity is already the one
under the neighbouring relation the caller chose). Events are frozen, validated at construction and
hold no data. Composition and subsampling are events too, so a whole training run is one value.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass, field, fields

from dpkit._checks import check_delta, check_epsilon, check_positive, check_probability
from dpkit.accounting._guarantees import Neighbouring
from dpkit.errors import PrivacyParameterError

__all__ = [
    "ApproxDPEvent",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "Event",
    "ExponentialEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "PermuteAndFlipEvent",
    "PoissonSubsampledEvent",
    "PureDPEvent",
    "RandomizedResponseEvent",
    "ReportNoisyMaxEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ZCDPEvent",
    "declared_neighbouring",
]


def _check_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise PrivacyParameterError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


@dataclass(frozen=True)
class Event:
    """Base class of all privacy events.

    A basic event (a noise distribution or a generic guarantee) has a ``neighbouring`` field:
    ``None`` (default) when its sensitivity or guarantee is stated for whichever relation the
    caller accounts under, or the :class:`~dpkit.accounting.Neighbouring` relation it holds
    under only (a sensitivity computed for replacement of one unit, say). Accountants refuse to
    compose events declaring different relations (:func:`declared_neighbouring`). Setting the
    field does not change the cost: the sensitivity must already be the one under that relation
    (for a count, 1 under add/remove and 2 under replacement).

    Examples
    --------
    >>> from dpkit.accounting import LaplaceEvent, Neighbouring, epsilon_of
    >>> epsilon_of(LaplaceEvent(scale=2.0, sensitivity=1.0))
    0.5
    >>> LaplaceEvent(scale=4.0, sensitivity=2.0, neighbouring=Neighbouring.REPLACE)
    LaplaceEvent(scale=4.0, sensitivity=2.0, neighbouring=Neighbouring.REPLACE)
    """

    def __repr__(self) -> str:
        # the dataclass repr, less a ``neighbouring`` left at None (most events declare none)
        shown = []
        for f in fields(self):
            v = getattr(self, f.name)
            if not f.repr or (f.name == "neighbouring" and v is None):
                continue
            shown.append(
                f"{f.name}={'Neighbouring.' + v.name if f.name == 'neighbouring' else repr(v)}"
            )
        return f"{type(self).__name__}({', '.join(shown)})"


def _check_relation(event: Event) -> None:
    r = getattr(event, "neighbouring", None)
    if r is not None and not isinstance(r, Neighbouring):
        raise PrivacyParameterError(
            "neighbouring must be None, Neighbouring.ADD_REMOVE or Neighbouring.REPLACE, "
            f"got a {type(r).__name__}."
        )


@dataclass(frozen=True, kw_only=True, repr=False)
class LaplaceEvent(Event):
    """Laplace noise of scale b on a query of ℓ1 sensitivity Δ: ε = Δ/b (Dwork & Roth 2014, §3.3).

    Examples
    --------
    >>> LaplaceEvent(scale=2.0, sensitivity=1.0)
    LaplaceEvent(scale=2.0, sensitivity=1.0)
    """

    scale: float
    sensitivity: float = 1.0

    neighbouring: Neighbouring | None = None

    def __post_init__(self) -> None:
        _check_relation(self)
        object.__setattr__(self, "scale", check_positive(self.scale, "scale"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))


@dataclass(frozen=True, kw_only=True, repr=False)
class GaussianEvent(Event):
    """Gaussian noise N(0, σ²) on a query of ℓ2 sensitivity Δ (the "Approximate Differential
    Privacy" notes §"Gaussian mechanism").

    Its exact (ε, δ) curve is that of Balle & Wang (2018); it is Δ²/(2σ²)-zCDP.

    Examples
    --------
    >>> GaussianEvent(sigma=4.0).sensitivity
    1.0
    """

    sigma: float
    sensitivity: float = 1.0

    neighbouring: Neighbouring | None = None

    def __post_init__(self) -> None:
        _check_relation(self)
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))


@dataclass(frozen=True, kw_only=True, repr=False)
class DiscreteLaplaceEvent(Event):
    """Discrete Laplace noise P(k) ∝ exp(-|k|/b) on an integer query of ℓ1 sensitivity Δ ∈ ℕ.

    ε = Δ/b (Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke 2020).

    Examples
    --------
    >>> DiscreteLaplaceEvent(scale=10, sensitivity=2).sensitivity
    2
    """

    scale: float
    sensitivity: int = 1

    neighbouring: Neighbouring | None = None

    def __post_init__(self) -> None:
        _check_relation(self)
        object.__setattr__(self, "scale", check_positive(self.scale, "scale"))
        object.__setattr__(self, "sensitivity", _check_count(self.sensitivity, "sensitivity"))


@dataclass(frozen=True, kw_only=True, repr=False)
class DiscreteGaussianEvent(Event):
    """Discrete Gaussian noise P(k) ∝ exp(-k²/2σ²) on an integer query of ℓ2 sensitivity Δ.

    It is Δ²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020, Theorem 4). For a scalar query
    (``dimension=1``) with integer Δ the PLD accountant uses its exact privacy loss distribution;
    for a vector query give its ``dimension`` and the ℓ2 sensitivity, and the zCDP bound is used.

    Examples
    --------
    >>> DiscreteGaussianEvent(sigma=3.0).sensitivity
    1.0
    """

    sigma: float
    sensitivity: float = 1.0
    dimension: int = 1

    neighbouring: Neighbouring | None = None

    def __post_init__(self) -> None:
        _check_relation(self)
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "dimension", _check_count(self.dimension, "dimension"))


@dataclass(frozen=True, kw_only=True, repr=False)
class RandomizedResponseEvent(Event):
    """k-ary randomized response: keep the true category with probability e^ε/(e^ε + k - 1).

    Warner (1965); Kamath (2020), "Randomized response". Pure ε-DP.

    Examples
    --------
    >>> RandomizedResponseEvent(epsilon=1.0).categories
    2
    """

    epsilon: float
    categories: int = 2

    neighbouring: Neighbouring | None = None

    def __post_init__(self) -> None:
        _check_relation(self)
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        k = _check_count(self.categories, "categories")
        if k < 2:
            raise PrivacyParameterError(f"categories must be at least 2, got {k}.")
        object.__setattr__(self, "categories", k)


@dataclass(frozen=True, kw_only=True, repr=False)
class _PureEpsilon(Event):
    epsilon: float

    neighbouring: Neighbouring | None = None

    def __post_init__(self) -> None:
        _check_relation(self)
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))


@dataclass(frozen=True, kw_only=True, repr=False)
class ExponentialEvent(_PureEpsilon):
    """The exponential mechanism at privacy level ε (McSherry & Talwar 2007; McSherry 2016).

    Pure ε-DP; it is also ε-bounded-range, hence ε²/8-zCDP (Durfee & Rogers 2019; Cesar & Rogers
    2021, Lemma 3.2), which the zCDP and RDP accountants use.

    Examples
    --------
    >>> ExponentialEvent(epsilon=0.5).epsilon
    0.5
    """


@dataclass(frozen=True, kw_only=True, repr=False)
class ReportNoisyMaxEvent(_PureEpsilon):
    """Report-noisy-max at privacy level ε (Dwork & Roth 2014, §3.3): pure ε-DP.

    Accounted as a generic pure ε-DP mechanism (ε²/2-zCDP), valid for any noise distribution.

    Examples
    --------
    >>> ReportNoisyMaxEvent(epsilon=0.5).epsilon
    0.5
    """


@dataclass(frozen=True, kw_only=True, repr=False)
class PermuteAndFlipEvent(_PureEpsilon):
    """Permute-and-flip at privacy level ε (McKenna & Sheldon 2020): pure ε-DP.

    Examples
    --------
    >>> PermuteAndFlipEvent(epsilon=0.5).epsilon
    0.5
    """


@dataclass(frozen=True, kw_only=True, repr=False)
class PureDPEvent(_PureEpsilon):
    """Any ε-DP mechanism; accounted through the worst case for ε-DP (binary randomized response,
    Kairouz, Oh & Viswanath 2015).

    Examples
    --------
    >>> PureDPEvent(epsilon=1.0)
    PureDPEvent(epsilon=1.0)
    """


@dataclass(frozen=True, kw_only=True, repr=False)
class ApproxDPEvent(Event):
    """Any (ε, δ)-DP mechanism; accounted through its worst case (Kairouz, Oh & Viswanath 2015).

    Examples
    --------
    >>> ApproxDPEvent(epsilon=1.0, delta=1e-6).delta
    1e-06
    """

    epsilon: float
    delta: float

    neighbouring: Neighbouring | None = None

    def __post_init__(self) -> None:
        _check_relation(self)
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))


@dataclass(frozen=True, kw_only=True, repr=False)
class ZCDPEvent(Event):
    """Any ρ-zCDP mechanism (Bun & Steinke 2016).

    Examples
    --------
    >>> ZCDPEvent(rho=0.1).rho
    0.1
    """

    rho: float

    neighbouring: Neighbouring | None = None

    def __post_init__(self) -> None:
        _check_relation(self)
        object.__setattr__(self, "rho", check_positive(self.rho, "rho"))


@dataclass(frozen=True)
class PoissonSubsampledEvent(Event):
    """Run ``event`` on a Poisson subsample: each unit is kept independently with probability q.

    Under ``Neighbouring.ADD_REMOVE`` (default) the privacy is amplified as in Balle, Barthe &
    Gaboardi (2018), Mironov, Talwar & Zhang (2019) and Zhu, Dong & Wang (2022): the subsampled
    mechanism's pairs are ((1-q)M(D) + qM(D ∪ {x}), M(D)) and the reverse. Under
    ``Neighbouring.REPLACE`` the inner event's sensitivity is the replace-one sensitivity and no
    bound on how one unit moves the output *relative to leaving it out* is assumed, so the analysis
    uses the pair ((1-q)ω + qM(D ∪ {x}), (1-q)ω + qM(D ∪ {x'})) with a common atom ω: δ shrinks by
    the factor q but ε is not amplified. This is always valid; when each unit's contribution is
    known to lie within Δ/2 of a centre (clipped gradients), account with ``ADD_REMOVE`` and the
    add/remove sensitivity instead.

    Examples
    --------
    >>> e = PoissonSubsampledEvent(GaussianEvent(sigma=4.0), sampling_rate=0.01)
    >>> e.neighbouring
    <Neighbouring.ADD_REMOVE: 'add_remove'>
    """

    event: Event
    _: KW_ONLY
    sampling_rate: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        if not isinstance(self.event, Event):
            raise PrivacyParameterError(
                "PoissonSubsampledEvent needs an Event to subsample, "
                f"got {type(self.event).__name__}."
            )
        q = check_probability(self.sampling_rate, "sampling_rate")
        object.__setattr__(self, "sampling_rate", q)
        if not isinstance(self.neighbouring, Neighbouring):
            raise PrivacyParameterError(
                "neighbouring must be Neighbouring.ADD_REMOVE or Neighbouring.REPLACE, "
                f"got {self.neighbouring!r}."
            )
        leaf_neighbouring(self)  # the subsampled event holds under this relation too


@dataclass(frozen=True)
class SampledWithoutReplacementEvent(Event):
    """Run ``event`` on ``sample_size`` units drawn without replacement from ``population_size``.

    Both sizes are public and the neighbouring relation is *replacement* of one unit (the size
    cannot change): ``event``'s sensitivity must be the replace-one sensitivity (2C for a sum of
    vectors clipped to norm C). With γ = sample_size / population_size, Balle, Barthe & Gaboardi
    (2018, "Privacy Amplification by Subsampling: Tight Analyses via Couplings and Divergences",
    Theorem 10 and the advanced joint convexity of Theorem 2) bound every hockey-stick divergence
    of order e^ε ≥ 1 by that of the pair ((1−γ)Q + γP, Q), (P, Q) dominating ``event``; the
    relation being symmetric, orders below 1 follow by swapping, and the symmetric tradeoff
    function they make together (Dong, Roth & Su 2022, "Gaussian Differential Privacy",
    Theorem 4.2: C_γ(f)) dominates one step. The PLD accountant composes that symmetric pair
    (Zhu, Dong & Wang 2022, "Optimal Accounting of Differential Privacy via Characteristic
    Function"), which is never less than composing either ordered pair alone.

    Examples
    --------
    >>> e = SampledWithoutReplacementEvent(GaussianEvent(sigma=4.0, sensitivity=2.0),
    ...                                    sample_size=64, population_size=6400)
    >>> e.sampling_rate
    0.01
    """

    event: Event
    _: KW_ONLY
    sample_size: int
    population_size: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, Event):
            raise PrivacyParameterError(
                "SampledWithoutReplacementEvent needs an Event to subsample, "
                f"got {type(self.event).__name__}."
            )
        b = _check_count(self.sample_size, "sample_size")
        n = _check_count(self.population_size, "population_size")
        if b > n:
            raise PrivacyParameterError("sample_size must be at most population_size.")
        object.__setattr__(self, "sample_size", b)
        object.__setattr__(self, "population_size", n)
        leaf_neighbouring(self)  # an add/remove event inside would be paid as a replace-one one

    @property
    def sampling_rate(self) -> float:
        """γ = sample_size / population_size."""
        return self.sample_size / self.population_size


@dataclass(frozen=True, kw_only=True)
class ComposedEvent(Event):
    """Sequential composition of several events (McSherry 2016 §"Composition", the "Approximate
    Differential Privacy" notes).

    Examples
    --------
    >>> ComposedEvent(events=[LaplaceEvent(scale=1.0), GaussianEvent(sigma=2.0)]).events[0]
    LaplaceEvent(scale=1.0, sensitivity=1.0)
    """

    events: tuple[Event, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        events = self.events
        if isinstance(events, Event) or not isinstance(events, Iterable):
            raise PrivacyParameterError("events must be a sequence of Event objects.")
        items = tuple(events)
        if not items:
            raise PrivacyParameterError("ComposedEvent needs at least one event.")
        for item in items:
            if not isinstance(item, Event):
                raise PrivacyParameterError(
                    f"every item of events must be an Event, got {type(item).__name__}."
                )
        declared_neighbouring(items)
        object.__setattr__(self, "events", items)


@dataclass(frozen=True)
class SelfComposedEvent(Event):
    """``count`` sequential runs of the same event (e.g. the steps of DP-SGD).

    Examples
    --------
    >>> SelfComposedEvent(GaussianEvent(sigma=1.0), count=4).count
    4
    """

    event: Event
    _: KW_ONLY
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.event, Event):
            raise PrivacyParameterError(
                f"SelfComposedEvent needs an Event, got {type(self.event).__name__}."
            )
        object.__setattr__(self, "count", _check_count(self.count, "count"))


def flatten(events: Event | Iterable[Event]) -> list[tuple[Event, int]]:
    """Reduce events to (leaf event, multiplicity) pairs, merging equal leaves."""
    counts: dict[Event, int] = {}

    def walk(e: Event, k: int) -> None:
        if isinstance(e, ComposedEvent):
            for sub in e.events:
                walk(sub, k)
        elif isinstance(e, SelfComposedEvent):
            walk(e.event, k * e.count)
        else:
            counts[e] = counts.get(e, 0) + k

    if isinstance(events, Event):
        walk(events, 1)
    else:
        items = list(events)
        if not items:
            raise PrivacyParameterError("no events given; pass at least one Event.")
        for item in items:
            if not isinstance(item, Event):
                raise PrivacyParameterError(f"expected Event objects, got {type(item).__name__}.")
            walk(item, 1)
    out = list(counts.items())
    declared_neighbouring(e for e, _ in out)  # refuse a composition across relations
    return out


def declared_neighbouring(leaves: Iterable[Event]) -> Neighbouring | None:
    """The neighbouring relation the leaf events declare, or None if none declares one.

    A subsampled event fixes its relation (:class:`PoissonSubsampledEvent` its ``neighbouring``,
    :class:`SampledWithoutReplacementEvent` replacement: the population size is public); other
    events hold under the relation the caller chose. Guarantees under different relations do
    not compose into either one (an add/remove bound says nothing on replacement without group
    privacy, and a bound that needs the size public says nothing under add/remove), so a mix is
    refused rather than summed into an ε that holds for neither.
    """
    found: Neighbouring | None = None
    for e in leaves:
        r = leaf_neighbouring(e)
        if r is None:
            continue
        if found is not None and r is not found:
            raise PrivacyParameterError(MIXED_NEIGHBOURING)
        found = r
    return found


def leaf_neighbouring(event: Event) -> Neighbouring | None:
    """The relation one event declares (see :func:`declared_neighbouring`), composites walked."""
    if isinstance(event, SampledWithoutReplacementEvent | PoissonSubsampledEvent):
        # a subsampling bound turns the inner event's guarantee into one under the same
        # relation: an inner event declaring the other one would be paid as if it held here
        outer = (
            Neighbouring.REPLACE
            if isinstance(event, SampledWithoutReplacementEvent)
            else event.neighbouring
        )
        inner = leaf_neighbouring(event.event)
        if inner is not None and inner is not outer:
            raise PrivacyParameterError(MIXED_NEIGHBOURING)
        return outer
    if isinstance(event, ComposedEvent):
        return declared_neighbouring(event.events)
    if isinstance(event, SelfComposedEvent):
        return leaf_neighbouring(event.event)
    # a basic event: the relation it was built for (its ``neighbouring``), or None
    r = getattr(event, "neighbouring", None)
    return r if isinstance(r, Neighbouring) else None


MIXED_NEIGHBOURING = (
    "these events are accounted under different neighbouring relations (add/remove of one unit "
    "and replacement of one unit, e.g. Poisson and fixed-size sampling): their guarantees do "
    "not add up to one under either relation. Account them separately, or use one relation."
)
