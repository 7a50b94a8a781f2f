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

Fixed-size ("fixed"): each step draws exactly ``batch_size`` distinct examples uniformly, anew
for every step, from data whose size must be the declared one (public under replacement of one
example); accounted as sampling without replacement (see :mod:`dpkit.torch._plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from dpkit.errors import PrivacyParameterError

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
    and are masked out of the gradient (``mask`` of the physical batch being iterated). With
    privacy units, ``indices`` has one row of ``group`` example indices per unit (−1: padding).
    """

    def __init__(self, loader: PrivateLoader, indices: np.ndarray) -> None:
        self._loader = loader
        self.indices = indices.reshape(-1, loader.group)
        p = loader.physical_batch_size
        self.physical_batches = -(-len(self.indices) // p)
        self.mask: Tensor | None = None
        self.done = 0
        self._iterated = False

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        # once: a second pass (or two interleaved ones) would replay the same examples
        if self._iterated:
            raise PrivacyParameterError("a logical batch can be iterated once.")
        self._iterated = True
        return self._physical()

    def _physical(self) -> Iterator[tuple[Tensor, ...]]:
        p = self._loader.physical_batch_size
        tensors = self._loader._tensors
        if tensors is not None and len(self.indices):
            yield from self._gathered(tensors, p)
            return
        for start in range(0, len(self.indices), p):
            chunk = self.indices[start : start + p]
            if len(chunk) < p:  # pad whole rows: the shape stays fixed
                chunk = np.concatenate([chunk, np.full((p - len(chunk), chunk.shape[1]), -1)])
            flat = chunk.reshape(-1)
            real = flat >= 0
            self.mask = torch.from_numpy(real)
            # padded rows repeat a real example (masked out): no value is invented
            yield self._loader.fetch(np.where(real, flat, flat[0]))
            self.done += 1

    def _gathered(self, tensors: tuple[Tensor, ...], p: int) -> Iterator[tuple[Tensor, ...]]:
        """Physical batches of a ``TensorDataset``: the step's indices go to the data's device
        in one copy (from pinned memory, not waited for), and each physical batch's indices,
        mask and padding are made there, so no physical batch stalls the host."""
        rows = len(self.indices)
        k = -(-rows // p)
        padded = np.full((k * p, self.indices.shape[1]), -1, dtype=np.int64)
        padded[:rows] = self.indices
        device = tensors[0].device
        idx = torch.from_numpy(padded.reshape(k, -1))
        if device.type == "cuda":
            idx = idx.pin_memory().to(device, non_blocking=True)
        for chunk in idx.to(device):
            real = chunk >= 0
            self.mask = real
            # padded rows repeat a real example (masked out): no value is invented
            at = torch.where(real, chunk, chunk[0])
            yield tuple(x[at.to(x.device)] for x in tensors)
            self.done += 1


class PrivateLoader:
    """Logical batches drawn as the privacy accounting assumes (Poisson, shuffled or fixed-size).

    With ``units`` (one privacy-unit id per example), Poisson sampling picks units, each with
    probability q, and at most ``group`` of each unit's examples (chosen at random per step);
    ``physical_batch_size`` then counts units, each taking ``group`` rows.
    """

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
        units: Any = None,
        group: int = 1,
    ) -> None:
        self.data = data
        self.sample_rate = sample_rate
        self.batch_size = batch_size
        self.physical_batch_size = physical_batch_size
        self.steps_per_epoch = steps_per_epoch
        self.sampling = sampling
        self.group = group
        self._gen = gen
        self._collate = collate or _default_collate
        self._tensors = _as_tensors(data)
        self.current: LogicalBatch | None = None
        self.position = 0  # private steps taken (set by the optimizer): where shuffling stands
        self._perm: np.ndarray | None = None
        self._perm_epoch = -1
        self._members: list[np.ndarray] | None = None
        if units is not None:
            ids = np.asarray(units)
            if ids.shape != (len(data),):
                raise PrivacyParameterError("units must hold one unit id per example of data.")
            order = np.argsort(ids, kind="stable")
            _, starts = np.unique(ids[order], return_index=True)
            self._members = np.split(order, starts[1:])
        if sampling == "fixed" and self._count() != round(batch_size / sample_rate):
            raise PrivacyParameterError(
                'sampling="fixed" needs data of exactly n_samples examples (units): the sampling '
                "is accounted under replacement of one example, where the size is public."
            )

    def __len__(self) -> int:
        return self.steps_per_epoch

    def state_dict(self) -> dict[str, Any]:
        """The current epoch's permutation (shuffling only): a run resumed mid-epoch must take
        the rest of the epoch's batches from it, or an example could be in two of its steps."""
        if self.sampling != "shuffle" or self._perm is None:
            return {}
        return {"perm_epoch": self._perm_epoch, "perm": self._perm.tolist()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (an empty one keeps the loader as it is)."""
        if not state:
            return
        if self.sampling != "shuffle":
            raise PrivacyParameterError("the checkpoint's loader state is for shuffling.")
        perm = np.asarray(state.get("perm"), dtype=np.int64)
        epoch = state.get("perm_epoch")
        if (
            isinstance(epoch, bool)
            or not isinstance(epoch, int)
            or perm.shape != (self._count(),)
            or not np.array_equal(np.sort(perm), np.arange(self._count()))
        ):
            raise PrivacyParameterError(
                "the checkpoint's permutation is not one of this loader's examples."
            )
        self._perm, self._perm_epoch = perm, epoch

    def fetch(self, idx: np.ndarray) -> tuple[Tensor, ...]:
        """The examples at ``idx``, collated into tensors."""
        if self._tensors is not None:
            t = torch.from_numpy(idx.astype(np.int64))
            return tuple(x[t] for x in self._tensors)
        return self._collate([self.data[int(i)] for i in idx])

    def _count(self) -> int:
        return len(self.data) if self._members is None else len(self._members)

    def draw(self) -> np.ndarray:
        """Indices of one Poisson sample: Binomial(N, q) of them, distinct, uniformly chosen.

        With units: one row per sampled unit, up to ``group`` of its examples, −1 padded.
        """
        n = self._count()
        b = int(self._gen.binomial(n, self.sample_rate))
        chosen = np.sort(self._gen.choice(n, size=b, replace=False)) if b else np.empty(0, int)
        return self._rows(chosen)

    def draw_fixed(self) -> np.ndarray:
        """Indices of one fixed-size sample: ``batch_size`` distinct, uniformly chosen."""
        chosen = np.sort(self._gen.choice(self._count(), size=self.batch_size, replace=False))
        return self._rows(chosen)

    def _rows(self, chosen: np.ndarray) -> np.ndarray:
        if self._members is None:
            return chosen.astype(np.int64)
        out = np.full((len(chosen), self.group), -1, dtype=np.int64)
        for r, u in enumerate(chosen):
            m = self._members[int(u)]
            take = self._gen.choice(m, size=min(len(m), self.group), replace=False)
            out[r, : len(take)] = take
        return out

    def __iter__(self) -> Iterator[LogicalBatch]:
        if self.sampling in ("poisson", "fixed"):
            draw = self.draw if self.sampling == "poisson" else self.draw_fixed
            for _ in range(self.steps_per_epoch):
                self.current = LogicalBatch(self, draw())
                yield self.current
            return
        # the accounting charges one Gaussian per epoch of steps_per_epoch *steps*: step s takes
        # batch s mod steps_per_epoch of epoch s // steps_per_epoch's permutation, so a pass
        # that stops early and a later one resume the same epoch (a fresh permutation mid-epoch
        # could put one example in two steps of one accounted epoch)
        per = self.steps_per_epoch
        start = self.position // per
        for _ in range(per):
            epoch, k = divmod(self.position, per)
            if epoch != start:
                return
            if self._perm_epoch != epoch:
                self._perm = self._gen.permutation(self._count())
                self._perm_epoch = epoch
            assert self._perm is not None
            part = self._perm[k * self.batch_size : (k + 1) * self.batch_size]
            self.current = LogicalBatch(self, self._rows(part))
            yield self.current


def _as_tensors(data: Any) -> tuple[Tensor, ...] | None:
    """The tensors of a ``TensorDataset`` (indexed in one gather instead of per example)."""
    from torch.utils.data import TensorDataset

    if isinstance(data, TensorDataset):
        return tuple(data.tensors)
    return None
