"""Attacks on what a row is: per-example clipping takes dim 0 of each layer call as the example.

A sequence-first layout (T, B, d) — the default of ``nn.MultiheadAttention``, ``nn.Transformer``
and ``nn.LSTM`` — makes dim 0 the position: the hooks would clip each *position* (a sum over all
examples) to C, so one example moves every row and the step's sensitivity is T·C, not C.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from dpkit.errors import PrivacyParameterError  # noqa: E402
from dpkit.torch._clip import Clipper  # noqa: E402


class SeqFirst(nn.Module):
    """A Linear applied to (T, B, d): rows of the layer call are positions, not examples."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, 3)
        out: torch.Tensor = self.lin(x.transpose(0, 1)).sum(0)  # (B, 2)
        return out


def _losses(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x).pow(2).sum(1)


def test_sequence_first_layer_with_t_equal_b_refused() -> None:
    torch.manual_seed(0)
    model = SeqFirst()
    x = torch.randn(4, 4, 3)  # T = B: every shape check passes
    clipper = Clipper(model, max_grad_norm=1.0, clipping="flat")
    with pytest.raises(PrivacyParameterError, match="example"):
        clipper.accumulate(_losses(model, x), torch.ones(4, dtype=torch.bool))


def test_sequence_first_layer_with_t_not_b_refused() -> None:
    torch.manual_seed(0)
    model = SeqFirst()
    x = torch.randn(4, 1, 3)  # T = 1: norms of shape (1,) broadcast against a mask of 4
    clipper = Clipper(model, max_grad_norm=1.0, clipping="flat")
    with pytest.raises(PrivacyParameterError, match="example"):
        clipper.accumulate(_losses(model, x), torch.ones(4, dtype=torch.bool))


def test_multihead_attention_sequence_first_refused() -> None:
    torch.manual_seed(0)

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.att = nn.MultiheadAttention(4, 1)  # batch_first=False: (T, B, E)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = x.transpose(0, 1)
            out: torch.Tensor = self.att(s, s, s, need_weights=False)[0].sum(0)
            return out

    model = Attn()
    x = torch.randn(3, 3, 4)
    clipper = Clipper(model, max_grad_norm=1.0, clipping="flat")
    with pytest.raises(PrivacyParameterError):
        clipper.accumulate(_losses(model, x), torch.ones(3, dtype=torch.bool))


def test_sensitivity_of_sequence_first_sum_exceeds_c_without_the_check() -> None:
    # the break itself: replacing one example moves the clipped sum by far more than 2C
    torch.manual_seed(0)
    model = SeqFirst()
    x = 0.01 * torch.randn(4, 4, 3)
    x[0] = 100 * torch.randn(3)  # example 0: one large vector at every position
    x2 = x.clone()
    x2[0] = 0.0  # replace example 0 by zeros
    sums = []
    for data in (x, x2):
        clipper = Clipper(model, max_grad_norm=1.0, clipping="flat")
        clipper._check_rows = lambda *a, **k: None  # type: ignore[method-assign]
        try:
            clipper.accumulate(_losses(model, data), torch.ones(4, dtype=torch.bool))
        finally:
            clipper.remove()
        sums.append(torch.cat([s.reshape(-1) for s in clipper.sums]))
    assert float((sums[0] - sums[1]).norm()) > 2.0  # 2C bounds a replacement, per example
