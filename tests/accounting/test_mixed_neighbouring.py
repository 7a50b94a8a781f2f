"""Events under add/remove and under replacement never compose into one ε.

The attack: a fixed-size (replace-one) training run and a Poisson (add/remove) run charged to one
accountant used to be summed. Under replacement the Poisson run costs its replace-one ε (the
inner sensitivity doubles), far more than its add/remove ε, so the sum understates the truth;
under add/remove the fixed-size run has no guarantee at all (its size is public).
"""

from __future__ import annotations

import pytest

from dpkit.accounting import (
    Accountant,
    ApproxDP,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    PoissonSubsampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    epsilon_of,
)
from dpkit.errors import PrivacyParameterError

DELTA = 1e-5
FIXED = SelfComposedEvent(
    SampledWithoutReplacementEvent(
        GaussianEvent(sigma=1.0, sensitivity=2.0), sample_size=10, population_size=1000
    ),
    count=50,
)
POISSON_AR = SelfComposedEvent(
    PoissonSubsampledEvent(GaussianEvent(sigma=1.0, sensitivity=1.0), sampling_rate=0.01),
    count=50,
)
# the same Poisson run seen under replacement of one example (sensitivity 2Δ)
POISSON_RE = SelfComposedEvent(
    PoissonSubsampledEvent(
        GaussianEvent(sigma=1.0, sensitivity=2.0),
        sampling_rate=0.01,
        neighbouring=Neighbouring.REPLACE,
    ),
    count=50,
)


def test_the_sum_would_understate_the_replace_one_cost() -> None:
    # what mixing used to report vs the true cost under the only relation both could share
    mixed_sum = epsilon_of(FIXED, delta=DELTA / 2) + epsilon_of(POISSON_AR, delta=DELTA / 2)
    true_replace = epsilon_of(ComposedEvent(events=[FIXED, POISSON_RE]), delta=DELTA)
    assert true_replace > 1.2 * mixed_sum


def test_accountant_refuses_a_second_relation_and_charges_nothing() -> None:
    acct = Accountant(ApproxDP(epsilon=100.0, delta=1e-3))
    acct.charge(FIXED, delta=DELTA)
    spent = acct.spent
    with pytest.raises(PrivacyParameterError, match="neighbouring relations"):
        acct.charge(POISSON_AR, delta=DELTA)
    with pytest.raises(PrivacyParameterError, match="neighbouring relations"):
        acct.can_afford(POISSON_AR, delta=DELTA)
    assert acct.spent == spent and len(acct.ledger) == 1
    # the same relation, and events that declare none, still compose
    acct.charge(POISSON_RE, delta=DELTA)
    acct.charge(LaplaceEvent(scale=10.0))
    assert len(acct.ledger) == 3


def test_split_children_share_the_relation() -> None:
    a, b = Accountant(ApproxDP(epsilon=100.0, delta=1e-3)).split(2)
    a.charge(POISSON_AR, delta=DELTA)
    with pytest.raises(PrivacyParameterError, match="neighbouring relations"):
        b.charge(FIXED, delta=DELTA)


def test_composition_refuses_mixed_relations() -> None:
    with pytest.raises(PrivacyParameterError, match="neighbouring relations"):
        ComposedEvent(events=[FIXED, POISSON_AR])
    with pytest.raises(PrivacyParameterError, match="neighbouring relations"):
        epsilon_of([FIXED, POISSON_AR], delta=DELTA)


def test_a_subsampled_event_inside_another_keeps_one_relation() -> None:
    # fixed-size sampling of a Poisson add/remove event used to be paid from the inner event's
    # add/remove ε as if it held under replacement: ε = 0.36 charged where the replace-one
    # view of the same release (inner sensitivity doubled, no Poisson amplification under
    # replacement) costs log(1 + ½(e² − 1)) = 1.43
    poisson = PoissonSubsampledEvent(LaplaceEvent(scale=1.0), sampling_rate=0.5)
    with pytest.raises(PrivacyParameterError, match="neighbouring relations"):
        SampledWithoutReplacementEvent(poisson, sample_size=50, population_size=100)
    fixed = SampledWithoutReplacementEvent(
        LaplaceEvent(scale=1.0), sample_size=5, population_size=10
    )
    with pytest.raises(PrivacyParameterError, match="neighbouring relations"):
        PoissonSubsampledEvent(fixed, sampling_rate=0.5)
    # the same relation inside is still accepted
    PoissonSubsampledEvent(fixed, sampling_rate=0.5, neighbouring=Neighbouring.REPLACE)
