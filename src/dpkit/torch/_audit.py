"""One-run audit of a PyTorch training procedure: input-space canaries, scored by their loss."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn
from torch.utils.data import ConcatDataset, Dataset, TensorDataset

from dpkit.audit import OneRunResult, one_run_audit
from dpkit.errors import PrivacyParameterError
from dpkit.random import RNGLike, as_generator

__all__ = ["audit_training", "random_canaries"]

Criterion = Callable[[Tensor, Tensor], Tensor]


def _with(data: Dataset[tuple[Tensor, ...]], x: Tensor, y: Tensor) -> Dataset[tuple[Tensor, ...]]:
    """``data`` plus the examples ``(x, y)`` (one ``TensorDataset`` when ``data`` is one)."""
    if isinstance(data, TensorDataset) and len(data.tensors) == 2:
        dx, dy = data.tensors
        return TensorDataset(torch.cat([dx, x.to(dx.dtype)]), torch.cat([dy, y.to(dy.dtype)]))
    return ConcatDataset([data, TensorDataset(x, y)])


def random_canaries(
    count: int, *, shape: tuple[int, ...], classes: int, rng: RNGLike = None
) -> tuple[Tensor, Tensor]:
    """``count`` input-space canaries: standard normal inputs of ``shape`` with random labels.

    Such examples are far from any real data and their labels are arbitrary, so a model fits
    them only by memorising them: the gap between the losses of included and excluded canaries
    is what a one-run audit measures.

    >>> x, y = random_canaries(4, shape=(3,), classes=10, rng=0)
    >>> tuple(x.shape), tuple(y.shape)
    ((4, 3), (4,))
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise PrivacyParameterError("count must be a positive int.")
    if isinstance(classes, bool) or not isinstance(classes, int) or classes < 2:
        raise PrivacyParameterError("classes must be an int of at least 2.")
    gen = as_generator(rng)
    x = torch.from_numpy(gen.standard_normal((count, *shape)).astype(np.float32))
    y = torch.from_numpy(gen.integers(0, classes, size=count).astype(np.int64))
    return x, y


def audit_training(
    train: Callable[[Dataset[tuple[Tensor, ...]]], nn.Module],
    data: Dataset[tuple[Tensor, ...]],
    canaries: tuple[Tensor, Tensor],
    *,
    guess_in: int,
    guess_out: int,
    delta: float,
    criterion: Criterion | None = None,
    confidence: float = 0.95,
    rng: RNGLike = None,
) -> OneRunResult:
    """Audit a training procedure in one run (Steinke, Nasr & Jagielski 2023), black box.

    Each canary ``(x_i, y_i)`` is added to ``data`` by a secret fair coin, ``train(dataset)``
    trains once and returns the model, and each canary's score is minus its loss under that model
    (:func:`dpkit.audit.one_run_bound` then guesses "in" for the ``guess_in`` lowest losses and
    "out" for the ``guess_out`` highest). The result is a lower bound on the ε of ``train`` for
    add/remove of one example, valid with probability ``confidence``: a bound above the ε the
    procedure claims proves it wrong. ``train`` must account with add/remove neighbours
    (``sampling="poisson"``) for the comparison to be meaningful.

    Parameters
    ----------
    train : callable
        ``train(dataset) -> model``; e.g. ``make_private(...)`` then ``fit``. The dataset is a
        map-style dataset of ``(x, y)`` pairs whose size depends on the coins: ``train`` must
        declare a size that does not, e.g. ``n_samples=len(data) + m // 2`` (Poisson sampling
        then draws from the examples actually there). Declaring ``len(dataset)`` would make the
        sampling rate and the divisor depend on every coin, outside the guarantee audited.
    data : Dataset
        The other training examples, ``(x, y)`` pairs (a ``TensorDataset`` is fastest).
    canaries : (Tensor, Tensor)
        Canary inputs and labels (e.g. :func:`random_canaries`).
    guess_in, guess_out, delta, confidence
        As in :func:`dpkit.audit.one_run_bound`.
    criterion : callable, optional
        Per-example loss ``criterion(model(x), y)`` of shape (m,) (default: cross-entropy).
    rng : None, int or numpy.random.Generator
        For the coins (dpkit's secure generator by default).
    """
    cx, cy = canaries
    if not isinstance(cx, Tensor) or not isinstance(cy, Tensor) or cx.shape[0] != cy.shape[0]:
        raise PrivacyParameterError("canaries must be two tensors with one row per canary.")
    m = int(cx.shape[0])
    crit = criterion if criterion is not None else nn.CrossEntropyLoss(reduction="none")

    def run(included: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        idx = torch.from_numpy(np.flatnonzero(included))
        model = train(_with(data, cx[idx], cy[idx]))
        was = model.training
        model.eval()
        with torch.no_grad():
            losses = crit(model(cx), cy).detach().to(torch.float64).reshape(-1)
        model.train(was)
        if losses.shape[0] != m:
            raise PrivacyParameterError(
                'criterion must return one loss per canary (reduction="none").'
            )
        return np.asarray(-losses.numpy(), dtype=np.float64)

    return one_run_audit(
        run,
        canaries=m,
        guess_in=guess_in,
        guess_out=guess_out,
        delta=delta,
        confidence=confidence,
        rng=rng,
    )
