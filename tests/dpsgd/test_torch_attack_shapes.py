"""Attacks on the per-example norms: layer shapes whose ghost / book-keeping norm could be wrong.

For each model, every example is clipped hard (C far below its gradient norm) on its own: the
clipped sum must then be exactly that example's torch.func gradient scaled to norm C(1 − 2⁻¹⁶).
A norm under-claimed by the closed forms would give a sum longer than C (sensitivity broken).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from dpkit.torch._clip import Clipper  # noqa: E402

C = 1e-3
MARGIN = 1.0 - 2.0**-16


class Twice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.tanh(self.lin(x)))


class OwnAndChild(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 2.0, 4))
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale + x * self.scale


def _frozen_weight() -> nn.Module:
    m = nn.Linear(4, 3)
    m.weight.requires_grad_(False)
    return m


CASES: dict[str, tuple[Callable[[], nn.Module], Callable[[torch.Generator], torch.Tensor]]] = {
    "linear_seq": (lambda: nn.Linear(4, 3), lambda g: torch.randn(3, 5, 4, generator=g)),
    "linear_4d": (lambda: nn.Linear(4, 3), lambda g: torch.randn(3, 2, 5, 4, generator=g)),
    "linear_nobias_seq": (
        lambda: nn.Linear(4, 3, bias=False),
        lambda g: torch.randn(3, 6, 4, generator=g),
    ),
    "linear_frozen_weight": (_frozen_weight, lambda g: torch.randn(3, 5, 4, generator=g)),
    "linear_called_twice": (Twice, lambda g: torch.randn(3, 5, 4, generator=g)),
    "own_param_and_child": (OwnAndChild, lambda g: torch.randn(3, 5, 4, generator=g)),
    "embedding_repeats": (
        lambda: nn.Embedding(5, 3, padding_idx=1),
        lambda g: torch.tensor([[2, 2, 2, 1, 0], [1, 1, 1, 1, 3], [4, 0, 4, 0, 4]]),
    ),
    "conv2d_stride_pad_dil": (
        lambda: nn.Conv2d(2, 3, 3, stride=2, padding=2, dilation=2),
        lambda g: torch.randn(3, 2, 9, 9, generator=g),
    ),
    "conv2d_rect": (
        lambda: nn.Conv2d(2, 3, (1, 3), stride=(2, 1), padding=(0, 1), bias=False),
        lambda g: torch.randn(3, 2, 6, 7, generator=g),
    ),
    "conv2d_groups": (
        lambda: nn.Conv2d(4, 4, 3, groups=2),
        lambda g: torch.randn(3, 4, 6, 6, generator=g),
    ),
    "conv2d_same_reflect": (
        lambda: nn.Conv2d(2, 3, 3, padding="same", padding_mode="reflect"),
        lambda g: torch.randn(3, 2, 6, 6, generator=g),
    ),
    "conv1d_stride_dil": (
        lambda: nn.Conv1d(2, 3, 3, stride=2, dilation=2, padding=1),
        lambda g: torch.randn(3, 2, 11, generator=g),
    ),
    "conv3d": (lambda: nn.Conv3d(2, 2, 2), lambda g: torch.randn(3, 2, 3, 3, 3, generator=g)),
    "conv_transpose": (
        lambda: nn.ConvTranspose2d(2, 2, 3, stride=2),
        lambda g: torch.randn(3, 2, 4, 4, generator=g),
    ),
    "layernorm_2d_shape": (
        lambda: nn.LayerNorm((5, 4)),
        lambda g: torch.randn(3, 5, 4, generator=g),
    ),
    "layernorm_seq": (lambda: nn.LayerNorm(4), lambda g: torch.randn(3, 5, 4, generator=g)),
    "layernorm_nobias": (
        lambda: nn.LayerNorm(4, bias=False),
        lambda g: torch.randn(3, 5, 4, generator=g),
    ),
    "groupnorm_1d": (lambda: nn.GroupNorm(2, 4), lambda g: torch.randn(3, 4, 7, generator=g)),
    "groupnorm_2d": (lambda: nn.GroupNorm(2, 4), lambda g: torch.randn(3, 4, 3, 3, generator=g)),
    "groupnorm_flat": (lambda: nn.GroupNorm(1, 4), lambda g: torch.randn(3, 4, generator=g)),
    "instancenorm_affine": (
        lambda: nn.InstanceNorm1d(4, affine=True),
        lambda g: torch.randn(3, 4, 6, generator=g),
    ),
    "rmsnorm": (lambda: nn.RMSNorm(4), lambda g: torch.randn(3, 5, 4, generator=g)),
    "prelu": (lambda: nn.PReLU(4), lambda g: torch.randn(3, 4, 5, generator=g)),
}


def _loss(out: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    flat = out.reshape(out.shape[0], -1).to(torch.float32)
    return (torch.sin(flat * w[: flat.shape[1]]) + flat.pow(2)).sum(1)


PER_LAYER = ("linear_called_twice", "own_param_and_child", "embedding_repeats", "groupnorm_flat")


@pytest.mark.parametrize(
    ("name", "clipping"),
    [(n, "flat") for n in sorted(CASES)] + [(n, "per_layer") for n in PER_LAYER],
)
def test_each_clipped_example_is_its_true_gradient_scaled_to_c(name: str, clipping: str) -> None:
    from torch.func import functional_call, grad, vmap

    make, data = CASES[name]
    torch.manual_seed(0)
    model = make()
    g = torch.Generator().manual_seed(1)
    x = data(g)
    w = torch.randn(10_000, generator=g)
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}

    def one(p: dict[str, torch.Tensor], xi: torch.Tensor) -> torch.Tensor:
        return _loss(functional_call(model, p, (xi[None],)), w)[0]

    ref = vmap(grad(one), in_dims=(None, 0))(params, x)
    clipper = Clipper(model, max_grad_norm=C, clipping=clipping)
    names = {id(p): k for k, p in model.named_parameters()}
    layers = [[names[id(p)] for p in r.params] for r in clipper.rules]
    for i in range(x.shape[0]):
        clipper.reset()
        mask = torch.zeros(x.shape[0], dtype=torch.bool)
        mask[i] = True
        clipper.accumulate(_loss(model(x), w), mask)
        got = dict(zip([names[id(p)] for p in clipper.params], clipper.sums, strict=True))
        groups = [[k for keys in layers for k in keys]] if clipping == "flat" else layers
        bound = C if clipping == "flat" else C / len(layers) ** 0.5
        for keys in groups:
            r = torch.cat([ref[k][i].reshape(-1) for k in keys]).double()
            s = torch.cat([got[k].reshape(-1) for k in keys]).double()
            expected = r * min(1.0, bound * MARGIN / float(r.norm()))
            assert float(s.norm()) <= bound * (1 + 1e-9), (name, i)
            assert torch.allclose(s, expected, rtol=1e-4, atol=1e-9), (name, i)
    clipper.remove()
