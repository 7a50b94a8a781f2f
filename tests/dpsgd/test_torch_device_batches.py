"""Physical batches of a TensorDataset are indexed and masked where the data is."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from dpkit.random import seeded
from dpkit.torch import make_private
from dpkit.torch._sampling import LogicalBatch

CUDA = torch.cuda.is_available()


def _loader(device: str, *, units: bool = False):
    x = torch.arange(30, dtype=torch.float32, device=device).reshape(30, 1)
    y = torch.arange(30, device=device) % 2
    model = nn.Linear(1, 2).to(device)
    kw = {"units": np.arange(30) // 3, "max_examples_per_unit": 2} if units else {}
    run = make_private(
        model, torch.optim.SGD(model.parameters(), lr=0.1), TensorDataset(x, y),
        n_samples=10 if units else 30, batch_size=4, epochs=1, max_grad_norm=1.0, delta=1e-5,
        noise_multiplier=1.0, physical_batch_size=3, rng=seeded(0), **kw,
    )  # fmt: skip
    return run.loader


@pytest.mark.parametrize("units", [False, True])
def test_physical_batches_hold_the_drawn_rows_and_pad_with_masked_repeats(units):
    loader = _loader("cpu", units=units)
    rows = np.array([[4, 5], [10, -1], [27, 28], [6, 7]]) if units else np.array([3, 9, 11, 20])
    batch = LogicalBatch(loader, rows)
    flat = batch.indices.reshape(-1)
    per = 3 * loader.group
    seen = []
    for k, (xb, _) in enumerate(batch):
        want = flat[k * per : (k + 1) * per]
        mask = batch.mask.numpy()
        assert xb.shape == (per, 1) and mask.shape == (per,)  # one shape for every pass
        real = np.concatenate([want, np.full(per - len(want), -1)]) >= 0
        assert np.array_equal(mask, real)
        got = xb[:, 0].numpy().astype(int)
        assert np.array_equal(got[mask], want[want >= 0])
        assert (got[~mask] == got[0]).all()  # padding repeats a real row, masked out
        seen.extend(got[mask])
    assert sorted(seen) == sorted(flat[flat >= 0])


@pytest.mark.skipif(not CUDA, reason="no GPU")
def test_physical_batches_on_the_gpu_do_not_wait_for_the_device():
    loader = _loader("cuda")
    batch = LogicalBatch(loader, np.array([3, 9, 11, 20]))
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for xb, _ in batch:
            assert xb.device.type == "cuda" and batch.mask.device.type == "cuda"
    finally:
        torch.cuda.set_sync_debug_mode("default")
