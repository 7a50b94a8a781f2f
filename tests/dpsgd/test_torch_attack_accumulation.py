"""Attacks on what one private step may contain: the accounting charges one Poisson batch per step.

Each test builds a run whose step would release a sum in which one example counts more than once
(so its sensitivity is k·C, not the C the plan was charged for), or a sum over examples that the
private loader never sampled (so the Poisson amplification is claimed for data it does not cover).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from dpkit.errors import PrivacyParameterError  # noqa: E402
from dpkit.random import seeded  # noqa: E402
from dpkit.torch import make_private  # noqa: E402


def _run(n: int = 12, batch_size: int = 12, physical: int | None = None) -> tuple[object, object]:
    torch.manual_seed(0)
    x = torch.randn(n, 3)
    y = (x[:, 0] > 0).long()
    model = nn.Linear(3, 2)
    run = make_private(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        TensorDataset(x, y),
        n_samples=n,
        batch_size=batch_size,
        physical_batch_size=physical,
        epochs=3,
        max_grad_norm=1.0,
        delta=1e-5,
        noise_multiplier=1.0,
        rng=seeded(5),
    )
    return model, run


_crit = nn.CrossEntropyLoss(reduction="none")


def test_backward_twice_on_one_physical_batch_refused() -> None:
    # the same examples' clipped gradients added twice: sensitivity 2C in a step charged for C
    model, run = _run()
    opt = run.optimizer  # type: ignore[attr-defined]
    batch = next(iter(run.loader))  # type: ignore[attr-defined]
    opt.zero_grad()
    for x, y in batch:
        opt.backward(_crit(model(x), y))
        with pytest.raises(PrivacyParameterError, match="once"):
            opt.backward(_crit(model(x), y))


def test_gradients_accumulated_over_two_logical_batches_refused() -> None:
    # two independent Poisson draws summed into one step: an example in both counts twice, and
    # the step is charged as one draw of rate q
    model, run = _run(batch_size=6)
    opt = run.optimizer  # type: ignore[attr-defined]
    it = iter(run.loader)  # type: ignore[attr-defined]
    opt.zero_grad()
    for x, y in next(it):
        opt.backward(_crit(model(x), y))
    second = next(it)
    with pytest.raises(PrivacyParameterError, match="logical batch"):
        for x, y in second:
            opt.backward(_crit(model(x), y))
        opt.step()


def test_backward_on_data_outside_the_private_loader_refused() -> None:
    # a plain loop over the user's own batches: no Poisson sampling, yet charged as if
    model, run = _run()
    opt = run.optimizer  # type: ignore[attr-defined]
    x = torch.randn(12, 3)
    y = torch.zeros(12, dtype=torch.long)
    opt.zero_grad()
    with pytest.raises(PrivacyParameterError, match="private loader"):
        opt.backward(_crit(model(x), y))


def test_backward_after_step_without_a_new_batch_refused() -> None:
    model, run = _run()
    opt = run.optimizer  # type: ignore[attr-defined]
    batch = next(iter(run.loader))  # type: ignore[attr-defined]
    opt.zero_grad()
    kept = []
    for x, y in batch:
        kept.append((x, y))
        opt.backward(_crit(model(x), y))
    opt.step()
    opt.zero_grad()
    x, y = kept[0]
    with pytest.raises(PrivacyParameterError, match="private loader"):
        opt.backward(_crit(model(x), y))


def test_honest_loop_and_empty_step_still_work() -> None:
    model, run = _run(batch_size=6, physical=4)
    opt = run.optimizer  # type: ignore[attr-defined]
    for batch in run.loader:  # type: ignore[attr-defined]
        opt.zero_grad()
        for x, y in batch:
            opt.backward(_crit(model(x), y))
        opt.step()
    assert opt.steps_taken == 2
    opt.zero_grad()
    opt.step()  # a step with no example (as an empty Poisson batch): pure noise, allowed
    assert opt.steps_taken == 3


def test_a_mask_cannot_unmask_padding() -> None:
    # padded rows repeat a real example: unmasked, that example would count twice in the step
    model, run = _run(n=12, batch_size=6, physical=16)
    opt = run.optimizer  # type: ignore[attr-defined]
    batch = next(iter(run.loader))  # type: ignore[attr-defined]
    assert 0 < len(batch.indices) < 16  # seeded: one padded physical batch
    opt.zero_grad()
    x, y = next(iter(batch))
    padded = ~batch.mask
    assert bool(padded.any())
    opt.backward(_crit(model(x), y), mask=torch.ones(16, dtype=torch.bool))
    got = [s.clone() for s in opt.clipper.sums]
    c = opt.clipper
    c.reset()
    c.accumulate(_crit(model(x), y), batch.mask)  # the padding-masked reference
    for g, r in zip(got, c.sums, strict=True):
        assert torch.allclose(g, r)


def test_a_logical_batch_is_iterated_once() -> None:
    # two interleaved iterators of one logical batch would replay its physical batches
    _model, run = _run(n=12, batch_size=12, physical=4)
    batch = next(iter(run.loader))  # type: ignore[attr-defined]
    first = iter(batch)
    next(first)
    with pytest.raises(PrivacyParameterError, match="once"):
        next(iter(batch))
