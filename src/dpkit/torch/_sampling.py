"""Batches that match the accounting: Poisson subsampling with fixed physical shapes, or shuffling.

Poisson (the default, Abadi et al. 2016): each step keeps every example independently with
probability ``q = batch_size / n_samples``, where ``n_samples`` is a *declared*, public size. The
step draws the batch size ``b ~ Binomial(len(data), q)`` and then ``b`` distinct indices
uniformly, which is the same distribution as independent coin flips and costs O(b), not O(N)
(Beltran et al. 2024). The ``b`` examples are cut into physical batches of a fixed size, the
last one padded and masked, so every forward pass has one shape; ``b = 0`` gives no physical
batch and the step still releases noise. Randomness comes from dpkit's secure generator unless a
seeded one is given.

Shuffling ("shuffle"): each epoch is a random permutation cut into ``len(data) // batch_size``
full batches. No amplification is claimed for it (see :mod:`dpkit.torch._plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

import torch
from torch import Tensor

__all__ = ["LogicalBatch", "PrivateLoader"]


def _default_collate(items: list[Any]) -> tuple[Tensor, ...]:
    first = items[0]
    if isinstance(first, tuple | list):
        return tuple(
            torch.stack([torch.as_tensor(it[k]) for it in items]) for k in range(len(first))
        )
    return (torch.stack([torch.as_tensor(it) for it in items]),)


class LogicalBatch:
    """One DP-SGD step's examples: iterate it for the fixed-shape physical batches.

    Each item is the tuple of tensors of one physical batch; padded rows repeat a real example
    and are masked out of the gradient (``mask`` of the physical batch being iterated).
    """

    def __init__(self, loader: PrivateLoader, indices: np.ndarray) -> None:
        self._loader = loader
        self.indices = indices
        p = loader.physical_batch_size
        self.physical_batches = -(-len(indices) // p)
        self.mask: Tensor | None = None
        self.done = 0

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        p = self._loader.physical_batch_size
        for start in range(0, len(self.indices), p):
            chunk = self.indices[start : start + p]
            real = len(chunk)
            if real < p:  # pad with copies of the first example: the shape stays fixed
                chunk = np.concatenate([chunk, np.full(p - real, chunk[0])])
            mask = torch.zeros(p, dtype=torch.bool)
            mask[:real] = True
            self.mask = mask
            yield self._loader.fetch(chunk)
            self.done += 1


class PrivateLoader:
    """Logical batches drawn as the privacy accounting assumes (Poisson or shuffled)."""

    def __init__(
        self,
        data: Sequence[Any],
        *,
        sample_rate: float,
        batch_size: int,
        physical_batch_size: int,
        steps_per_epoch: int,
        sampling: str,
        gen: np.random.Generator,
        collate: Callable[[list[Any]], tuple[Tensor, ...]] | None = None,
    ) -> None:
        self.data = data
        self.sample_rate = sample_rate
        self.batch_size = batch_size
        self.physical_batch_size = physical_batch_size
        self.steps_per_epoch = steps_per_epoch
        self.sampling = sampling
        self._gen = gen
        self._collate = collate or _default_collate
        self._tensors = _as_tensors(data)
        self.current: LogicalBatch | None = None

    def __len__(self) -> int:
        return self.steps_per_epoch

    def fetch(self, idx: np.ndarray) -> tuple[Tensor, ...]:
        """The examples at ``idx``, collated into tensors."""
        if self._tensors is not None:
            t = torch.from_numpy(idx.astype(np.int64))
            return tuple(x[t] for x in self._tensors)
        return self._collate([self.data[int(i)] for i in idx])

    def draw(self) -> np.ndarray:
        """Indices of one Poisson sample: Binomial(N, q) of them, distinct, uniformly chosen."""
        n = len(self.data)
        b = int(self._gen.binomial(n, self.sample_rate))
        return np.sort(self._gen.choice(n, size=b, replace=False)) if b else np.empty(0, np.int64)

    def __iter__(self) -> Iterator[LogicalBatch]:
        if self.sampling == "poisson":
            for _ in range(self.steps_per_epoch):
                self.current = LogicalBatch(self, self.draw())
                yield self.current
            return
        perm = self._gen.permutation(len(self.data))
        for k in range(self.steps_per_epoch):
            self.current = LogicalBatch(self, perm[k * self.batch_size : (k + 1) * self.batch_size])
            yield self.current


def _as_tensors(data: Any) -> tuple[Tensor, ...] | None:
    """The tensors of a ``TensorDataset`` (indexed in one gather instead of per example)."""
    from torch.utils.data import TensorDataset

    if isinstance(data, TensorDataset):
        return tuple(data.tensors)
    return None
