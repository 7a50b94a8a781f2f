"""What the accountant tells people: short decimals, the missing resource, what to pass."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting import ApproxDPEvent, GaussianEvent, LaplaceEvent
from dpkit.errors import BudgetExceededError, PrivacyParameterError


def _refusal(acct: dp.Accountant, event: object) -> str:
    with pytest.raises(BudgetExceededError) as e:
        acct.charge(event, label="q")  # type: ignore[arg-type]
    return str(e.value)


def test_refusals_name_the_resource_and_the_fix() -> None:
    acct = dp.Accountant(dp.ApproxDP(epsilon=1.0, delta=1e-6))
    acct.charge(ApproxDPEvent(epsilon=0.25, delta=1e-6))
    x = np.random.default_rng(0).uniform(0, 1, 100)
    dp.mean(x, bounds=(0, 1), epsilon=0.5, accountant=acct)
    eps = _refusal(acct, LaplaceEvent(scale=1.0))
    assert "not enough epsilon (spent 0.75 of 1.0, 0.25 left)" in eps
    assert "epsilon at most 0.25" in eps and "Nothing was charged" in eps
    delta = _refusal(acct, GaussianEvent(sigma=100.0))  # cheap in ε, but every δ is spent
    assert "not enough delta (spent 1e-06 of 1e-06, 0.0 left)" in delta
    assert "pure-epsilon release" in delta and "0.7499" not in delta
    z = dp.Accountant(dp.ZCDP(rho=0.1))
    assert "not enough rho" in _refusal(z, GaussianEvent(sigma=1.0))
    assert len(acct.ledger) == 2 and not z.ledger


def test_accountant_says_what_to_pass() -> None:
    for kw in ({"epsilon": 1}, {"epsilon": 1, "delta": 1e-6}, {"budget": 1.0}, {}):
        with pytest.raises(PrivacyParameterError, match=r"Accountant\(PureDP\(epsilon=\.\.\.\)\)"):
            dp.Accountant(**kw)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError) as e:
        dp.Accountant(3.14159)  # type: ignore[arg-type]
    assert "3.14" not in str(e.value)  # names the type, never echoes the value


def test_ledger_and_notebook_show_short_decimals() -> None:
    acct = dp.Accountant(dp.ApproxDP(epsilon=1.0, delta=1e-6))
    x = np.random.default_rng(0).uniform(0, 100, 1_000)
    dp.mean(x, bounds=(0, 100), epsilon=0.5, accountant=acct)
    assert acct.ledger[0].epsilon != 0.5  # the safe-side margin is in the arithmetic...
    assert repr(acct.ledger[0]) == "LedgerEntry(label='mean', epsilon=0.5, event=ComposedEvent)"
    html = acct._repr_html_()  # ...not in what is shown
    assert "<td>ApproxDP(epsilon=0.5, delta=0.0)</td>" in html and "0.4999" not in html
    assert "<td>mean</td><td>0.5</td>" in html
