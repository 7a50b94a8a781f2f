"""A DP-SGD run's event states the relation it holds under, so that it cannot be composed with
releases accounted under the other one.

``sampling="shuffle"`` was a plain ``GaussianEvent`` with the replace-one sensitivity 2Δ: charged
to an accountant beside add/remove releases (a Poisson run, a statistic), the total held under
neither relation. Now the shuffled and fixed-size runs declare replacement and the Poisson run
add/remove, and an accountant refuses a mix before charging anything.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

import dpkit as dp
import dpkit.stats as st
from dpkit.accounting import Accountant, ApproxDP, Neighbouring
from dpkit.errors import PrivacyParameterError
from dpkit.torch._plan import plan_training

ADD, REP = Neighbouring.ADD_REMOVE, Neighbouring.REPLACE


def _plan(sampling: str) -> object:
    return plan_training(
        n_samples=1000,
        batch_size=100,
        epochs=2,
        max_grad_norm=1.0,
        dimension=10,
        delta=1e-5,
        noise_multiplier=2.0,
        sampling=sampling,
    )


@pytest.mark.parametrize("sampling", ["shuffle", "fixed"])
def test_a_replace_one_run_and_an_add_remove_release_are_refused_in_one_accountant(
    sampling: str,
) -> None:
    run = _plan(sampling).event  # type: ignore[attr-defined]
    acct = Accountant(ApproxDP(epsilon=50.0, delta=1e-4))
    acct.charge(run, label="training", delta=1e-5)
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        st.count(np.ones(10), epsilon=0.5, accountant=acct, rng=dp.random.seeded(1))
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        acct.charge(_plan("poisson").event, delta=1e-5)  # type: ignore[attr-defined]
    assert len(acct.ledger) == 1
    # in the other order too: an add/remove statistic first, then the run
    other = Accountant(ApproxDP(epsilon=50.0, delta=1e-4))
    st.count(np.ones(10), epsilon=0.5, accountant=other, rng=dp.random.seeded(2))
    with pytest.raises(PrivacyParameterError, match="different neighbouring relations"):
        other.charge(run, delta=1e-5)
    assert len(other.ledger) == 1
    # a replace-one statistic composes with it
    st.sum(np.ones(10), bounds=(0.0, 1.0), epsilon=0.5, accountant=acct,
           rng=dp.random.seeded(3), neighbouring=REP)  # fmt: skip
    assert len(acct.ledger) == 2


def test_each_sampler_declares_the_relation_of_its_sensitivity() -> None:
    shuffle, fixed, poisson = (_plan(s) for s in ("shuffle", "fixed", "poisson"))
    for p, rel, factor in ((shuffle, REP, 2), (fixed, REP, 2), (poisson, ADD, 1)):
        gauss = p.step_event()  # type: ignore[attr-defined]
        while hasattr(gauss, "event"):
            gauss = gauss.event
        assert gauss.neighbouring is rel
        # the label and the sensitivity agree: replace-one doubles the clipped sum's bound
        assert gauss.sensitivity == factor * p.sensitivity  # type: ignore[attr-defined]
