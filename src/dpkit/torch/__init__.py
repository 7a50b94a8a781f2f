"""DP-SGD for PyTorch: per-example clipping, sampling that matches the accounting, exact noise.

``make_private(model, optimizer, data, ...)`` returns the private model, optimizer and loader
(plus the run's plan and a small trainer): per-example gradients are clipped layer by layer by
the fastest correct method (ghost norms and book-keeping for Linear, Embedding and convolutions,
closed forms for LayerNorm and GroupNorm, ``torch.func`` for any other layer), batches are
Poisson samples of a declared public dataset size with fixed physical shapes, noise is dpkit's
exact discrete Gaussian from its secure generator, and the whole run is accounted by dpkit's
PLD/RDP accountant on the event of the sampler actually used. See ``docs/torch.md``.

Needs the ``torch`` extra (``pip install dpkit[torch]``); nothing else in dpkit imports torch.
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("dpkit.torch needs PyTorch: pip install 'dpkit[torch]'.") from exc

from dpkit.torch._audit import audit_training, random_canaries
from dpkit.torch._canaries import GradientCanaries
from dpkit.torch._convert import replace_batchnorm
from dpkit.torch._engine import PrivateTraining, make_private
from dpkit.torch._optimizer import PrivateOptimizer
from dpkit.torch._plan import TrainingPlan, plan_training
from dpkit.torch._sampling import LogicalBatch, PrivateLoader

__all__ = [
    "GradientCanaries",
    "LogicalBatch",
    "PrivateLoader",
    "PrivateOptimizer",
    "PrivateTraining",
    "TrainingPlan",
    "audit_training",
    "make_private",
    "plan_training",
    "random_canaries",
    "replace_batchnorm",
]
