"""Accountants: atomic, thread-safe charges that never exceed the budget."""

from __future__ import annotations

import contextlib
import math
import threading

import pytest

from dpkit.accounting import (
    ZCDP,
    Accountant,
    ApproxDP,
    ApproxDPEvent,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSubsampledEvent,
    PureDP,
    SelfComposedEvent,
    ZCDPEvent,
    compose,
    epsilon_of,
)
from dpkit.errors import BudgetExceededError, PrivacyParameterError


def test_pure_budget_six_sums() -> None:
    # McSherry 2016: Pearson correlation from six noisy sums at ε/6 each.
    acct = Accountant(PureDP(epsilon=1.0))
    for i in range(6):
        acct.charge(LaplaceEvent(scale=6.0), label=f"sum{i}")
    assert acct.spent.epsilon == pytest.approx(1.0)  # type: ignore[attr-defined]
    assert [e.label for e in acct.ledger] == [f"sum{i}" for i in range(6)]
    with pytest.raises(BudgetExceededError) as info:
        acct.charge(LaplaceEvent(scale=1e6))
    assert info.value.requested == LaplaceEvent(scale=1e6)
    assert len(acct.ledger) == 6


def test_tenths_fit_exactly() -> None:
    acct = Accountant(PureDP(epsilon=1.0))
    for _ in range(10):
        acct.charge(LaplaceEvent(scale=10.0))  # ε = 0.1, stored as 0.1000000000000000055
    assert not acct.can_afford(LaplaceEvent(scale=1e9))


def test_charge_is_atomic() -> None:
    acct = Accountant(PureDP(epsilon=1.0))
    acct.charge(LaplaceEvent(scale=2.0))
    before = (acct.spent, acct.ledger)
    big = ComposedEvent(
        events=[LaplaceEvent(scale=4.0), LaplaceEvent(scale=4.0), LaplaceEvent(scale=4.0)]
    )
    with pytest.raises(BudgetExceededError):
        acct.charge(big)  # the first two parts would fit, the third would not: nothing recorded
    assert (acct.spent, acct.ledger) == before


def test_pure_budget_refuses_gaussian() -> None:
    acct = Accountant(PureDP(epsilon=1.0))
    with pytest.raises(PrivacyParameterError, match="ApproxDP or ZCDP"):
        acct.charge(GaussianEvent(sigma=10.0))
    assert acct.ledger == ()


def test_zcdp_budget() -> None:
    acct = Accountant(ZCDP(rho=0.5))
    acct.charge(GaussianEvent(sigma=1.0))  # ρ = 1/2
    assert acct.spent.rho == pytest.approx(0.5)  # type: ignore[attr-defined]
    with pytest.raises(BudgetExceededError):
        acct.charge(ZCDPEvent(rho=1e-6))


def test_approx_budget_uses_zcdp_for_gaussians() -> None:
    # 20 Gaussians of σ = 25: one at a time each costs ≥ ε(δ/20)…; the zCDP filter pays
    # ρ = 20/(2·625) and converts once (Canonne, Kamath & Steinke 2020).
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6), method="zcdp")
    for _ in range(20):
        acct.charge(GaussianEvent(sigma=25.0))
    spent = acct.spent
    assert isinstance(spent, ApproxDP)
    basic = compose([GaussianEvent(sigma=25.0)] * 20, method="basic").epsilon(1e-6)
    assert spent.epsilon < basic
    assert spent.epsilon == pytest.approx(
        compose([GaussianEvent(sigma=25.0)] * 20, method="zcdp").epsilon(1e-6)
    )
    assert math.fsum(e.rho for e in acct.ledger) == pytest.approx(20 / 1250)


def test_approx_budget_basic_mixes_event_kinds() -> None:
    acct = Accountant(ApproxDP(epsilon=3.0, delta=1e-6))
    acct.charge(LaplaceEvent(scale=2.0))  # pure, 0.5
    acct.charge(ApproxDPEvent(epsilon=0.5, delta=1e-7))
    acct.charge(GaussianEvent(sigma=10.0))  # a curve, paid at event_delta = budget δ / 10
    sub = PoissonSubsampledEvent(GaussianEvent(sigma=2.0), sampling_rate=0.01)
    acct.charge(SelfComposedEvent(sub, count=10))
    spent = acct.spent
    assert isinstance(spent, ApproxDP)
    assert spent.epsilon <= 3.0 and spent.delta <= 1e-6
    entries = acct.ledger
    assert entries[0].epsilon == pytest.approx(0.5) and entries[0].delta == 0
    assert entries[1].delta == pytest.approx(1e-7)
    assert entries[2].delta == pytest.approx(1e-7) and entries[2].rho == 0
    assert entries[2].epsilon == pytest.approx(epsilon_of(GaussianEvent(sigma=10.0), delta=1e-7))
    assert entries[3].delta == pytest.approx(1e-7)
    assert spent.epsilon == pytest.approx(math.fsum(e.epsilon for e in entries))


def test_zcdp_filters_pay_every_event_in_rho() -> None:
    """One filter, one currency: a pure event is not free under a zCDP budget (ρ = ε²/2)."""
    z = Accountant(ZCDP(rho=0.01))
    z.charge(LaplaceEvent(scale=10.0))  # ε = 0.1 → ρ = 0.005
    assert z.spent.rho == pytest.approx(0.005)  # type: ignore[attr-defined]
    with pytest.raises(BudgetExceededError):
        z.charge(LaplaceEvent(scale=0.1))  # ε = 10
    approx = Accountant(ApproxDP(epsilon=1.0, delta=1e-6), method="zcdp")
    approx.charge(LaplaceEvent(scale=10.0))
    assert approx.ledger[-1].rho == pytest.approx(0.005) and approx.ledger[-1].epsilon == 0
    with pytest.raises(PrivacyParameterError, match="zCDP"):
        approx.charge(ApproxDPEvent(epsilon=0.1, delta=1e-8))
    for acct in (z, approx):
        with pytest.raises(BudgetExceededError):
            for _ in range(1000):
                acct.charge(LaplaceEvent(scale=0.5))


def test_split() -> None:
    parent = Accountant(ApproxDP(epsilon=1.2, delta=6e-6))
    parts = parent.split(6)
    assert len(parts) == 6
    assert parts[0].budget == ApproxDP(epsilon=0.19999999999999998, delta=1e-6) or (
        parts[0].budget.epsilon == pytest.approx(0.2)  # type: ignore[attr-defined]
    )
    with pytest.raises(BudgetExceededError):
        parent.charge(LaplaceEvent(scale=1e6))
    parts[0].charge(LaplaceEvent(scale=5.0))
    with pytest.raises(BudgetExceededError):
        parts[0].charge(LaplaceEvent(scale=5.0))
    with pytest.raises(BudgetExceededError):
        parent.split(2)


def test_32_threads_never_overspend() -> None:
    # 32 threads race to charge 400 events of ε = 0.01 into a budget of 1: exactly 100 fit.
    acct = Accountant(PureDP(epsilon=1.0))
    accepted = []
    lock = threading.Lock()
    barrier = threading.Barrier(32)

    def worker(i: int) -> None:
        barrier.wait()
        for j in range(400 // 32 + 1):
            try:
                acct.charge(LaplaceEvent(scale=100.0), label=f"{i}-{j}")
            except BudgetExceededError:
                continue
            with lock:
                accepted.append((i, j))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ledger = acct.ledger
    assert len(ledger) == len(accepted) == 100
    total = math.fsum(e.epsilon for e in ledger)
    assert total <= 1.0 * (1 + 1e-12)
    assert acct.spent.epsilon == pytest.approx(total)  # type: ignore[attr-defined]
    assert {e.label for e in ledger} == {f"{i}-{j}" for i, j in accepted}


def test_32_threads_zcdp_filter() -> None:
    acct = Accountant(ApproxDP(epsilon=1.0, delta=1e-6), method="zcdp")
    barrier = threading.Barrier(32)

    def worker() -> None:
        barrier.wait()
        for _ in range(10):
            with contextlib.suppress(BudgetExceededError):
                acct.charge(GaussianEvent(sigma=20.0))

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spent = acct.spent
    assert isinstance(spent, ApproxDP)
    assert spent.epsilon <= 1.0 * (1 + 1e-12)
    n = len(acct.ledger)
    # the filter admits exactly as many as fit: one more would not
    assert compose([GaussianEvent(sigma=20.0)] * (n + 1), method="zcdp").epsilon(1e-6) > 1.0


def test_bad_accountant_input() -> None:
    with pytest.raises(PrivacyParameterError):
        Accountant(1.0)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        Accountant(PureDP(epsilon=1.0), method="zcdp")
    with pytest.raises(PrivacyParameterError):
        Accountant(ApproxDP(epsilon=1.0, delta=1e-6), event_delta=1e-3)
    acct = Accountant(PureDP(epsilon=1.0))
    with pytest.raises(PrivacyParameterError):
        acct.charge("laplace")  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        acct.split(0)
    assert acct.spent.epsilon == 0.0  # type: ignore[attr-defined]
    assert acct.remaining == PureDP(epsilon=1.0)
