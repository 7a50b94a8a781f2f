"""Privacy accounting: guarantees, events, composition, calibration and budgets.

Every release in dpkit is paid for from a privacy budget. This package describes what a mechanism
costs (an :class:`Event`), turns events into (ε, δ) by the tightest valid method (:func:`compose`),
calibrates noise to a target (:func:`gaussian_sigma`, :func:`calibrate`), and enforces budgets that
cannot be overspent, even by concurrent or adaptively chosen queries (:class:`Accountant`).

Examples
--------
>>> from dpkit.accounting import Accountant, ApproxDP, LaplaceEvent
>>> acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6))
>>> acct.charge(LaplaceEvent(scale=2.0), label="count")
>>> acct.spent.epsilon
0.5
"""

from __future__ import annotations

from dpkit.accounting._accountant import Accountant, LedgerEntry
from dpkit.accounting._calibrate import calibrate, dpsgd_epsilon, dpsgd_noise_multiplier
from dpkit.accounting._compose import Composition, compose, delta_of, epsilon_of
from dpkit.accounting._events import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    PermuteAndFlipEvent,
    PoissonSubsampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpkit.accounting._gaussian import gaussian_delta, gaussian_epsilon, gaussian_sigma
from dpkit.accounting._guarantees import (
    ZCDP,
    ApproxDP,
    Guarantee,
    Neighbouring,
    PureDP,
    group_privacy,
    zcdp_delta,
    zcdp_epsilon,
)
from dpkit.accounting._parallel import DisjointParts

__all__ = [
    "ZCDP",
    "Accountant",
    "ApproxDP",
    "ApproxDPEvent",
    "ComposedEvent",
    "Composition",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "DisjointParts",
    "Event",
    "ExponentialEvent",
    "GaussianEvent",
    "Guarantee",
    "LaplaceEvent",
    "LedgerEntry",
    "Neighbouring",
    "PermuteAndFlipEvent",
    "PoissonSubsampledEvent",
    "PureDP",
    "PureDPEvent",
    "RandomizedResponseEvent",
    "ReportNoisyMaxEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ZCDPEvent",
    "calibrate",
    "compose",
    "delta_of",
    "dpsgd_epsilon",
    "dpsgd_noise_multiplier",
    "epsilon_of",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_sigma",
    "group_privacy",
    "zcdp_delta",
    "zcdp_epsilon",
]
