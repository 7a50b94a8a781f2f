"""Attack on shuffling's accounting: each accounted epoch must use each example at most once.

``sampling="shuffle"`` is charged one Gaussian (sensitivity 2Δ) per epoch of ``steps_per_epoch``
steps, which holds only if those steps' batches come from one permutation. Resuming training
(``fit(steps=…)`` twice, or a second ``for batch in loader``) drew a fresh permutation mid-epoch,
so one example could be in two steps of the same accounted epoch (sensitivity 4Δ).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from dpkit.random import seeded  # noqa: E402
from dpkit.torch import make_private  # noqa: E402


def test_resumed_shuffled_epoch_uses_each_example_once() -> None:
    torch.manual_seed(0)
    n = 10
    x = torch.randn(n, 3)
    y = (x[:, 0] > 0).long()
    model = nn.Linear(3, 2)
    run = make_private(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        TensorDataset(x, y),
        n_samples=n,
        batch_size=2,
        epochs=2,
        max_grad_norm=1.0,
        delta=1e-5,
        noise_multiplier=1.0,
        sampling="shuffle",
        rng=seeded(0),
    )
    opt, loader = run.optimizer, run.loader
    crit = nn.CrossEntropyLoss(reduction="none")
    used: list[list[int]] = []
    for stop in (3, 2, 1, 4):  # steps taken per pass: a run interrupted and resumed
        for k, batch in enumerate(loader):
            if k == stop:
                break
            used.append([int(i) for i in batch.indices.reshape(-1)])
            opt.zero_grad()
            for xb, yb in batch:
                opt.backward(crit(model(xb), yb))
            opt.step()
    assert opt.steps_taken == 10 == run.plan.steps
    per = run.plan.steps_per_epoch
    for e in range(2):  # each accounted epoch: each example at most once
        seen = [i for step in used[e * per : (e + 1) * per] for i in step]
        assert len(seen) == len(set(seen))
