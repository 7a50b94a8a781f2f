"""Attacks on refusals: invalid input charges nothing and leaves the model as it was; a record's
value (NaN, inf) never decides whether a step succeeds; randomness is secure by default."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from dpkit.accounting import Accountant, ApproxDP  # noqa: E402
from dpkit.errors import PrivacyParameterError  # noqa: E402
from dpkit.random import SecureGenerator  # noqa: E402
from dpkit.torch import make_private  # noqa: E402
from dpkit.torch._clip import Clipper  # noqa: E402


def _make(model: nn.Module, **kw: object) -> object:
    args: dict[str, object] = dict(
        n_samples=10,
        batch_size=5,
        epochs=1,
        max_grad_norm=1.0,
        delta=1e-5,
        noise_multiplier=1.0,
    )
    args.update(kw)
    data = TensorDataset(torch.randn(10, 3), torch.zeros(10).long())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return make_private(model, opt, data, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw",
    [
        {"n_samples": 0},
        {"delta": 2.0},
        {"epochs": float("inf")},
        {"noise_multiplier": -1.0},
        {"units": [0, 1], "max_examples_per_unit": 2},  # one id per example is required
    ],
)
def test_refused_run_charges_nothing_and_leaves_model_unhooked(kw: dict[str, object]) -> None:
    acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-4))
    model = nn.Linear(3, 2)
    with pytest.raises(PrivacyParameterError):
        _make(model, accountant=acct, **kw)
    assert len(acct.ledger) == 0
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_default_randomness_is_secure() -> None:
    run = _make(nn.Linear(3, 2))
    assert isinstance(run.optimizer._gen, SecureGenerator)  # type: ignore[attr-defined]
    assert isinstance(run.loader._gen, SecureGenerator)  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_records_on_the_first_batch_are_dropped_not_refused(bad: float) -> None:
    # the first accumulate also runs the one-time row probe: it must not trip on a bad record
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.LayerNorm(4), nn.Linear(4, 2))
    x = torch.randn(5, 3)
    x[0, 1] = bad
    x[3, 0] = bad
    y = torch.tensor([0, 1, 0, 1, 1])
    crit = nn.CrossEntropyLoss(reduction="none")
    clipper = Clipper(model, max_grad_norm=1.0, clipping="flat")
    clipper.accumulate(crit(model(x), y), torch.ones(5, dtype=torch.bool))
    got = [s.clone() for s in clipper.sums]
    assert all(bool(torch.isfinite(s).all()) for s in got)
    clipper.remove()
    keep = torch.tensor([False, True, True, False, True])
    ref = Clipper(model, max_grad_norm=1.0, clipping="flat")
    ref.accumulate(crit(model(x[keep]), y[keep]), torch.ones(3, dtype=torch.bool))
    for g, r in zip(got, ref.sums, strict=True):
        assert torch.allclose(g, r, atol=1e-6)
